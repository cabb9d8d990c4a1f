"""The GPU timer on a real device: its calibration is small, hidden side-stream work stays counted."""

import pytest

from kernelgym.evaluation.timing import Timer

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def timer():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    timer = Timer("cuda")
    timer.calibrate()
    return timer


def test_sync_cost_is_a_few_microseconds(timer):
    assert 0 < timer.sync_cost_ms < 0.1, timer.sync_cost_ms


def test_an_empty_call_measures_less_than_the_raw_region(timer):
    raw = Timer("cuda", subtract_sync_cost=False)
    raw_ms = sorted(raw.time_call(lambda: None) for _ in range(51))[25]
    calibrated_ms = sorted(timer.time_call(lambda: None) for _ in range(51))[25]
    assert calibrated_ms < raw_ms, (calibrated_ms, raw_ms, timer.sync_cost_ms)


def test_side_stream_work_is_counted(timer):
    import torch

    side = torch.cuda.Stream()
    cycles = 2_000_000  # about 1 ms at H200 clocks

    def on_side():
        with torch.cuda.stream(side):
            torch.cuda._sleep(cycles)

    def alone() -> float:  # the sleep timed on its own stream
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(side):
            begin.record()
            torch.cuda._sleep(cycles)
            end.record()
        torch.cuda.synchronize()
        return begin.elapsed_time(end)

    alone_ms = sorted(alone() for _ in range(11))[5]  # the first call also loads the kernel
    measured = sorted(timer.time_call(on_side) for _ in range(11))[5]
    assert measured >= 0.95 * alone_ms, (measured, alone_ms)
