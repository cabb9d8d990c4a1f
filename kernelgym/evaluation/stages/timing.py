"""Stage 5, timing: both sides timed by the worker's clock in alternating batches of fresh inputs (on a GPU
while holding the machine's timing slot), the speedup's median and bootstrap interval, whether it is
verified (reproduced, not contended, above the threshold), and the candidate's CPU time against its wall
time. The measurement itself is evaluation/timed_rounds.py; the statistics evaluation/timing.py."""

from __future__ import annotations

import os
import time

from kernelgym.evaluation import rules
from kernelgym.evaluation.batch import hold_candidate
from kernelgym.evaluation.batch_size import calls_per_batch
from kernelgym.evaluation.options import EvalOptions
from kernelgym.evaluation.outcome import end
from kernelgym.evaluation.reference_alone import compile_baseline_ms
from kernelgym.evaluation.result import TimingResult
from kernelgym.evaluation.rules import reason
from kernelgym.evaluation.state import BATCH_PARTS, Evaluation
from kernelgym.evaluation.timed_rounds import (
    measure,
    on_timing_core,
    prepare_inputs,
    release_prepared,
    round_trip_ms,
)
from kernelgym.evaluation.timing import speedup_interval, stats
from kernelgym.workers import locks


def timing(ev: Evaluation) -> None:
    ev.stage = "timing"
    started = time.monotonic()
    options = ev.options
    parts_before = dict(ev.batch_parts_s)
    hold_candidate(ev)  # the round trip, taken off both sides' times: the candidate cannot inflate it
    round_trip = round_trip_ms(ev)
    calls = calls_per_batch(ev, round_trip)
    # What needs no quiet GPU is done before the slot: the time it is held bounds the pool's rate.
    prepare_inputs(ev, calls, options.warmup + min(5, options.timing_trials))
    ev.result.stage_s["timing_prepare"] = round(time.monotonic() - started, 3)
    try:
        with locks.timing_slot(ev.device, ev.result.stage_s), on_timing_core(ev) as moved:
            if moved:
                round_trip = round_trip_ms(ev)  # again where the batches run
            ref_ms, cand_ms, cpu_s, wall_s, repeat, reproduced = measure(ev, calls, round_trip)
    finally:
        release_prepared(ev)
    speedup, low, high = speedup_interval(ref_ms, cand_ms)
    timing = TimingResult(
        available=True, device=_device_label(ev.device, options.threads), candidate=stats(cand_ms),
        reference=stats(ref_ms), speedup=round(speedup, 4), speedup_ci_low=round(low, 4),
        speedup_ci_high=round(high, 4), remeasured=bool(repeat), round_trip_ms=round(round_trip, 4),
        calls_per_batch=calls, batches=len(cand_ms),
        readback_lag_ms=ev.readback_lag_ms,
        cpu_past_clock_ms=round(ev.past_clock_ms, 3) if ev.device == "cpu" else None,
    )
    contended = _contention(ev, timing)
    timing.verified = low > options.threshold and reproduced and not contended
    _roofline(ev, timing)
    if options.compile_baseline:
        _against_compile(ev, timing)
    ev.result.timing = timing
    ev.result.stage_s["timing"] = round(time.monotonic() - started, 3)
    for name in BATCH_PARTS:
        ev.result.stage_s[f"timing_{name}"] = round(ev.batch_parts_s[name] - parts_before[name], 3)
    if not reproduced:  # noise, not evidence: the speedup is simply not verified
        said = (f"an implausible speedup did not reproduce within {options.reproduce_tolerance:.0%}"
                if repeat == "implausible" else
                f"the speedup's interval cleared {options.threshold:g} in one timing but not in a second")
        ev.result.reasons.append(reason(rules.NOT_REPRODUCED, f"{said}; both measurements are pooled, "
                                                              "unverified"))
    _check_cores(ev, timing, cpu_s, wall_s)


def no_timing_reason(mode: str, options: EvalOptions) -> str:
    """Why an evaluation has no timing (the stage did not run)."""
    if mode == "interpret":
        return "timing unavailable: no GPU, so the Triton kernels ran in the interpreter (correctness only)"
    if not options.timing:
        return "timing disabled by the caller"
    return "timing unavailable"


def _contention(ev: Evaluation, timing: TimingResult) -> bool:
    """Records how long the sides waited for their cores while their batches were clocked, the larger
    share of the two (a load that falls on one side's batches moves the speedup most); True (and a
    reason) when it marks the timing contended: then no speedup is verified from it."""
    shares = [c.share() for c in ev.contention.values() if c.share() is not None]
    if not shares:
        return False
    timing.cpu_wait_share = round(max(shares), 4)
    timing.contended = timing.cpu_wait_share > ev.options.max_contention
    if timing.contended:
        ev.result.reasons.append(reason(
            rules.CONTENDED, f"other processes held the timing's core(s) {sorted(ev.cores)}: a side "
                             f"waited for a CPU {timing.cpu_wait_share:.0%} of its timed batches' core "
                             f"time (more than {ev.options.max_contention:.0%}); the timing is marked "
                             "contended and its speedup is not verified (judge it again on a quieter "
                             "machine)"))
    return timing.contended


def _against_compile(ev: Evaluation, timing: TimingResult) -> None:
    folder = os.path.join(ev.eval_dir, "compile_baseline")
    os.mkdir(folder)
    compile_ms, cached = compile_baseline_ms(ev.machine, ev.job, ev.device, ev.mode, folder)
    if compile_ms:
        timing.compile_ms, timing.compile_baseline_cached = round(compile_ms, 6), cached
        timing.speedup_vs_compile = round(compile_ms / max(timing.candidate.median_ms, 1e-9), 4)


def _check_cores(ev: Evaluation, timing: TimingResult, cpu_s: float, wall_s: float) -> None:
    if ev.device != "cpu" or wall_s <= 0:
        return
    ratio = cpu_s / wall_s
    timing.cpu_time_ratio = round(ratio, 3)
    allowed = ev.options.threads * ev.options.max_cpu_time_ratio
    # A cgroup counts to the ns; /proc/PID/stat in clock ticks: then judge only once there are enough.
    if (ev.watch.cgroup is not None or wall_s > 0.25) and ratio > allowed:
        raise end(rules.EXTRA_CORES, f"the candidate's processes used {ratio:.2f} cores' worth of CPU "
                                     "time during its timed calls; the reference gets "
                                     f"{ev.options.threads}")


def _roofline(ev: Evaluation, timing: TimingResult) -> None:
    from kernelgym.evaluation.roofline import Peaks, TaskCost, floor_ms

    ready = ev.ready
    if not ready.peaks or ready.flops is None:
        return
    cost = TaskCost(float(ready.flops), float(ready.min_bytes))
    peaks = {k: v for k, v in ready.peaks.items() if k in Peaks.__dataclass_fields__}
    floor, bound = floor_ms(cost, Peaks(**peaks))
    timing.flops, timing.min_bytes = cost.flops, cost.min_bytes
    timing.floor_ms, timing.bound = round(floor, 6), bound
    if timing.candidate and timing.candidate.median_ms > 0:
        timing.roofline_fraction = round(floor / timing.candidate.median_ms, 4)


def _device_label(device: str, threads: int) -> str:
    if device == "cuda":
        return "cuda"
    import platform

    return f"cpu ({platform.processor() or platform.machine()}), {threads} thread(s)"
