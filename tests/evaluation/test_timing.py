"""The timing stage's arithmetic: the in-region synchronize's cost comes off, hidden work never does."""

from kernelgym.evaluation.feedback import render_feedback
from kernelgym.evaluation.timing import (
    Timer,
    charged_batch_ms,
    region_time,
    speedup_interval,
)


def test_the_calibrated_sync_cost_comes_off_a_call():
    assert region_time(device_ms=0.110, stream_ms=0.100, sync_cost_ms=0.012) == 0.100
    assert abs(region_time(device_ms=1.020, stream_ms=0.990, sync_cost_ms=0.012) - 1.008) < 1e-12


def test_work_on_another_stream_stays_counted():
    # The current stream finished at once; the device was busy for 2 ms on a side stream.
    assert abs(region_time(device_ms=2.015, stream_ms=0.004, sync_cost_ms=0.012) - 2.003) < 1e-12


def test_never_below_what_the_current_stream_measured():
    # A calibration larger than the call's own overhead (noise) cannot push a time below the stream's.
    assert region_time(device_ms=0.050, stream_ms=0.045, sync_cost_ms=0.030) == 0.045


def test_cpu_work_past_the_clock_is_charged_to_the_batch():
    # 10 ms on the clock, one core: 14 ms of the tree's CPU time means 4 ms ran after 'done'.
    assert charged_batch_ms(clocked_ms=10.0, tree_cpu_s=0.014, threads=1) == 14.0
    # The same CPU time over two cores fits inside the clock: nothing is charged.
    assert charged_batch_ms(clocked_ms=10.0, tree_cpu_s=0.014, threads=2) == 10.0
    # An idle stretch inside the clock is never refunded.
    assert charged_batch_ms(clocked_ms=10.0, tree_cpu_s=0.002, threads=1) == 10.0


def test_cpu_timer_has_nothing_to_calibrate():
    timer = Timer("cpu")
    assert timer.calibrate() == 0.0
    assert timer.time_call(lambda: sum(range(1000))) > 0


def test_speedup_interval_contains_its_point():
    point, low, high = speedup_interval([2.0, 2.1, 1.9, 2.0] * 5, [1.0, 1.05, 0.95, 1.0] * 5)
    assert abs(point - 2.0) < 1e-9 and low <= point <= high


def test_feedback_says_when_work_past_the_clock_was_charged():
    from kernelgym.evaluation.result import EvalResult, TimingResult, TimingStats, Verdict

    def feedback(past_ms: float) -> str:
        stats_ms = TimingStats(1.0, 1.0, 0.0, 1.0, 1.0, 10)
        timing = TimingResult(True, device="cpu", candidate=stats_ms, reference=stats_ms, speedup=1.0,
                              speedup_ci_low=0.9, speedup_ci_high=1.1, batches=10, calls_per_batch=5,
                              cpu_past_clock_ms=past_ms)
        return render_feedback(EvalResult("L1/1_ReLU", "cpp", "cpu", Verdict.OK, timing=timing))

    assert "12.5 ms of CPU time past the clock" in feedback(12.5)  # 25% of the 50 ms timed
    assert "past the clock" not in feedback(0.4)  # under 5%: noise
