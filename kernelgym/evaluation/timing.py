"""Timing statistics, and the in-process timer of the reference timed alone (baselines, never a candidate).

GPU: CUDA events around each call with the whole device synchronized inside the timed region (so work on
any stream is counted), L2 flushed before each call. The synchronize itself costs a fixed few microseconds,
which would pull every speedup toward 1; it is calibrated once, before any candidate code exists, and taken
off each call, never below the time the current stream alone measured. CPU: a monotonic clock bound before
any candidate code was imported. Inputs rotate over several sets; reference and candidate alternate.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from kernelgym.evaluation.options import EvalOptions
from kernelgym.evaluation.result import TimingStats

# Bound at import of this module, which the worker does before importing a candidate.
_clock_ns = time.perf_counter_ns
L2_FLUSH_BYTES = 256 << 20  # several times the largest L2 (60 MB on an H200)


class Laps:
    """A stopwatch over consecutive parts of some work: each `lap(name)` adds the seconds since the last one
    to `seconds[name]` (the judge's own bookkeeping for stage_s; never a candidate's measurement)."""

    def __init__(self, seconds: dict[str, float] | None = None):
        self.seconds = {} if seconds is None else seconds
        self._last = time.monotonic()

    def lap(self, name: str) -> None:
        now = time.monotonic()
        self.seconds[name] = self.seconds.get(name, 0.0) + now - self._last
        self._last = now


@dataclass
class TimingConfig:
    trials: int = 100
    warmup: int = 3
    budget_s: float = 4.0  # per side; fewer trials (at least min_trials) when calls are slow
    min_trials: int = 10
    bootstrap: int = 1000
    # GPU: take the calibrated cost of the in-region synchronize off each call
    subtract_sync_cost: bool = True


class Timer:
    """Times one call at a time. Create it before any candidate code is imported (it binds what it uses)."""

    def __init__(self, device: str, subtract_sync_cost: bool = True):
        self.device = device
        self._flush = None
        self._subtract = subtract_sync_cost
        self.sync_cost_ms = 0.0  # set by calibrate()
        if device.startswith("cuda"):
            import torch

            self._torch = torch
            self._flush = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int32, device=device)
            # Bound now, before any candidate code: rebinding them later changes nothing measured here.
            self._sync = torch.cuda.synchronize
            self._event = torch.cuda.Event
            self._record = torch.cuda.Event.record
            self._elapsed = torch.cuda.Event.elapsed_time
            self._wait = torch.cuda.Event.synchronize

    def calibrate(self, calls: int = 100) -> float:
        """Measures the region's own cost: the median whole-device time of a call that does nothing. Call it
        with the device to itself and before any candidate code is imported (a candidate could inflate it)."""
        if self._flush is not None and self._subtract:
            for _ in range(5):
                self._region(lambda: None)
            self.sync_cost_ms = float(np.median([self._region(lambda: None)[0] for _ in range(calls)]))
        return self.sync_cost_ms

    def _region(self, fn: Callable[[], object]) -> tuple[float, float, object]:
        """(whole-device ms, current-stream ms, output) of one call after an L2 flush."""
        self._flush.zero_()
        self._sync()
        begin, stream_end, device_end = (self._event(enable_timing=True) for _ in range(3))
        self._record(begin)
        out = fn()
        self._record(stream_end)
        self._sync()  # whole device: work hidden on another stream is inside the region
        self._record(device_end)
        self._wait(device_end)
        return self._elapsed(begin, device_end), self._elapsed(begin, stream_end), out

    def time_call(self, fn: Callable[[], object]) -> float:
        """One call's time in ms."""
        return self.time_call_with_output(fn)[0]

    def time_call_with_output(self, fn: Callable[[], object]) -> tuple[float, object]:
        if self._flush is None:
            start = _clock_ns()
            out = fn()
            return (_clock_ns() - start) / 1e6, out
        device_ms, stream_ms, out = self._region(fn)
        return region_time(device_ms, stream_ms, self.sync_cost_ms), out


def region_time(device_ms: float, stream_ms: float, sync_cost_ms: float) -> float:
    """A call's time: the whole device's, less the calibrated cost of synchronizing it, but never less than
    the current stream's own (work on other streams stays counted; at most the calibration is forgiven)."""
    return max(device_ms - sync_cost_ms, stream_ms)


def charged_batch_ms(clocked_ms: float, tree_cpu_s: float, threads: int) -> float:
    """A CPU batch's time: its clock, or the CPU time its whole tree spent from thaw to freeze spread over the
    cores it may use, whichever is longer. Pinned to `threads` cores, work done inside the clock cannot
    exceed clock x cores, so any excess ran after 'done' and before the freeze stopped it (a thread left
    finishing the last call): it is charged, not forgiven."""
    return max(clocked_ms, tree_cpu_s * 1e3 / max(threads, 1))


def measure_alone(timer: Timer, fn: Callable[[int], object], n_sets: int,
                  config: TimingConfig) -> list[float]:
    for i in range(config.warmup):
        fn(i % n_sets)
    times: list[float] = []
    for i in range(config.trials):
        times.append(timer.time_call(lambda i=i: fn(i % n_sets)))
        if i + 1 >= config.min_trials and sum(times) > config.budget_s * 1e3:
            break
    return times


def stats(times: Sequence[float], bootstrap: int = 1000, seed: int = 0) -> TimingStats:
    values = np.asarray(times, dtype=np.float64)
    rng = np.random.default_rng(seed)
    medians = np.median(rng.choice(values, size=(bootstrap, len(values)), replace=True), axis=1)
    return TimingStats(
        median_ms=float(np.median(values)), mean_ms=float(values.mean()), std_ms=float(values.std()),
        ci_low_ms=float(np.percentile(medians, 2.5)), ci_high_ms=float(np.percentile(medians, 97.5)),
        trials=len(values),
    )


def speedup_interval(ref_times: Sequence[float], cand_times: Sequence[float], bootstrap: int = 1000,
                     seed: int = 0) -> tuple[float, float, float]:
    """Median ratio reference/candidate and its bootstrap 95% interval."""
    ref, cand = np.asarray(ref_times), np.asarray(cand_times)
    rng = np.random.default_rng(seed)
    ref_m = np.median(rng.choice(ref, size=(bootstrap, len(ref))), axis=1)
    cand_m = np.median(rng.choice(cand, size=(bootstrap, len(cand))), axis=1)
    ratios = ref_m / np.maximum(cand_m, 1e-9)
    point = float(np.median(ref) / max(float(np.median(cand)), 1e-9))
    return point, float(np.percentile(ratios, 2.5)), float(np.percentile(ratios, 97.5))


# when the judge's timing stops, and when it must be repeated ---------------------------------------------

def precise_enough(ref_ms: list[float], cand_ms: list[float], options: EvalOptions) -> bool:
    """Whether the speedup's interval is tight enough that more batches would not change what is paid: its
    half-width is within `timing_precision` of the speedup. A speedup within that distance of the threshold
    stays unverified (a gain that small is the size of the noise between whole evaluations anyway). An
    interval wholly below the threshold decides "not verified" already; it needs only
    `timing_precision_unverified` (most candidates an RL policy writes are slower than PyTorch)."""
    if options.timing_precision <= 0 or len(ref_ms) < 5:
        return False
    speedup, low, high = speedup_interval(ref_ms, cand_ms, bootstrap=200)
    needed = options.timing_precision
    if high < options.threshold:
        needed = max(needed, options.timing_precision_unverified)
    return (high - low) / 2 <= needed * speedup


def second_timing_needed(speedup: float, low: float, options: EvalOptions) -> str | None:
    """Why a timing must be repeated before it verifies anything, or None.

    'implausible': too fast to believe once. 'confirm': the interval clears the threshold, and a batch
    bootstrap's interval is narrower than the spread between whole evaluations on a loaded machine (an honest
    kernel at 0.9x quiet was verified at 1.2x in 2 of 12 evaluations beside other work), so a claim must hold
    in an independent second timing."""
    if speedup > options.implausible_speedup:
        return "implausible"
    if options.confirm_verified and low > options.threshold:
        return "confirm"
    return None


def second_timing_agrees(why: str, speedup: float, speedup2: float, low2: float,
                         options: EvalOptions) -> bool:
    if why == "implausible":
        return abs(speedup2 - speedup) / speedup <= options.reproduce_tolerance
    return low2 > options.threshold
