"""The timing stage's measurement: warm-up, timed batches alternating which side goes first until the time
budget or enough precision, and a second timing where the first cannot be trusted alone. Per-call times of
each side less a batch's fixed round trip (measured on the reference's side: the candidate cannot inflate
it). The first batches' inputs are made before the GPU's timing slot is taken (`prepare_inputs`).
"""

from __future__ import annotations

import contextlib
import os
import time

from kernelgym.evaluation import own_code, rules
from kernelgym.evaluation.batch import (
    later_outputs_checked,
    reference_inputs,
    require_own_kernels,
    run_batch,
)
from kernelgym.evaluation.batch_size import bytes_per_call, memory_budget
from kernelgym.evaluation.contention import SideContention
from kernelgym.evaluation.conversation import to_reference
from kernelgym.evaluation.outcome import end
from kernelgym.evaluation.state import Batch, Evaluation, Prepared
from kernelgym.evaluation.timing import (
    charged_batch_ms,
    precise_enough,
    second_timing_agrees,
    second_timing_needed,
    speedup_interval,
)
from kernelgym.stats import median
from kernelgym.workers import messages as m
from kernelgym.workers.process import Died
from kernelgym.workers.procfs import pin_threads


def measure(ev: Evaluation, calls: int, round_trip: float) -> tuple:
    """Warm-up, the timed rounds, and a second timing where the first cannot be trusted alone: each
    side's per-call times (both timings pooled), the candidate's CPU and wall seconds, why it was
    repeated (or None) and whether the second agreed."""
    options = ev.options
    for _ in range(options.warmup):
        _next_batch(ev, calls)
    if ev.device == "cpu":  # from the first timed batch on, across a second timing too
        ev.contention = {side: SideContention(len(ev.cores)) for side in ("reference", "candidate")}
    ref_ms, cand_ms, cpu_s, wall_s = _rounds(ev, calls, round_trip)
    speedup, low, _ = speedup_interval(ref_ms, cand_ms)
    repeat = second_timing_needed(speedup, low, options)
    if not repeat:
        return ref_ms, cand_ms, cpu_s, wall_s, None, True
    ref2, cand2, cpu2, wall2 = _rounds(ev, calls, round_trip)
    speedup2, low2, _ = speedup_interval(ref2, cand2)
    reproduced = second_timing_agrees(repeat, speedup, speedup2, low2, options)
    return ref_ms + ref2, cand_ms + cand2, cpu_s + cpu2, wall_s + wall2, repeat, reproduced


def _rounds(ev: Evaluation, calls: int, round_trip: float) -> tuple[list[float], list[float], float, float]:
    """Timed batches, alternating which side goes first; per-call times less the fixed round trip."""
    options = ev.options
    ref_ms: list[float] = []
    cand_ms: list[float] = []
    cpu_s = wall_s = spent = 0.0
    least = min(5, options.timing_trials)
    started = time.monotonic()
    for i in range(options.timing_trials):
        record = _next_batch(ev, calls, candidate_first=i % 2 == 1)
        require_own_kernels(ev, record)
        clocked_ms = record.candidate_ms
        if record.cpu_ns_exact:  # its cgroup counted every thread to the ns: work past 'done' is charged
            charged = charged_batch_ms(clocked_ms, record.candidate_cpu_s, options.threads)
            ev.past_clock_ms += charged - clocked_ms
            clocked_ms = charged
        ref_ms.append(max(record.reference_ms - round_trip, 1e-6) / calls)
        cand_ms.append(max(clocked_ms - round_trip, 1e-6) / calls)
        cpu_s += record.candidate_cpu_s
        wall_s += record.candidate_ms / 1e3
        spent += max(record.reference_ms, record.candidate_ms) / 1e3
        # The budget is the measured time per side; the stage's wall time (fresh inputs, the checks of
        # every output) is held to a few times that. The GPU's slot is held meanwhile, so a timing also
        # stops once it is precise enough to decide the verdict and the reward, and, on the CPU, its
        # samples enough to decide whose code did the work.
        if i + 1 < least:
            continue
        if spent > options.timing_budget_s or time.monotonic() - started > 3 * options.timing_budget_s:
            break
        if _samples_decide(ev) and precise_enough(ref_ms, cand_ms, options):
            break
    return ref_ms, cand_ms, cpu_s, wall_s


def _samples_decide(ev: Evaluation) -> bool:
    """Whether the instruction pointers sampled so far can decide the own-code verdict. A fast task's
    timing was precise after a few batches of ~10 ms, whose samples (one per ms of CPU time, a third in
    glue) were too few: the candidate's in-process profile then decided, forgeable and noisy under load
    (honest tiny kernels judged `untracked_compute` in CI). More of the same timed batches decide it,
    within `timing_trials` and the time budget; the candidate cannot tell them apart."""
    return not ev.watch.judges_own_code() or own_code.decides(ev.watch.evidence, ev.options.max_torch_share)


def _next_batch(ev: Evaluation, calls: int, candidate_first: bool = False) -> Batch:
    prepared = ev.prepared.pop(0) if ev.prepared else None
    seeds = prepared.seeds if prepared else ev.seeds(calls)
    with later_outputs_checked(ev, seeds):
        return run_batch(ev, seeds, [False] * calls, candidate_first, prepared=prepared)


def prepare_inputs(ev: Evaluation, calls: int, count: int) -> None:
    """The input sets of the timing's first batches, made by the reference now, as far as memory allows:
    they stay in its own memory until their batch (the candidate still maps empty buffers, filled while
    it is frozen). On the H100 making them was half the slot's time for small tasks."""
    # the batch under way beside the prepared ones, all within what one batch may use
    count = min(count, memory_budget(ev) // max(calls * bytes_per_call(ev), 1) - 1)
    for _ in range(max(count, 0)):
        ev.batches += 1
        number, seeds = ev.batches, ev.seeds(calls)
        to_reference(ev, m.MakeInputs(number, seeds, [False] * calls))
        inputs, fd = reference_inputs(ev, number)
        ev.prepared.append(Prepared(number, seeds, inputs, fd))


def release_prepared(ev: Evaluation) -> None:
    """Prepared batches the timing did not need (it stopped early, or ended the evaluation)."""
    for prepared in ev.prepared:
        if prepared.fd is not None:
            os.close(prepared.fd)
        try:
            ev.reference.send(m.Release(prepared.number))
        except Died:
            pass
    ev.prepared = []


def round_trip_ms(ev: Evaluation) -> float:
    """The fixed cost of a batch (messages, the harness's bookkeeping), measured on the reference's side:
    the candidate cannot inflate what is taken off its own times."""
    times = []
    for i in range(12):
        start = time.perf_counter_ns()
        to_reference(ev, m.RunBatch(-1 - i))
        try:
            ev.reference.receive(time.monotonic() + 30)
        except (TimeoutError, Died):
            raise end(rules.JUDGE_FAILED, "the reference process did not answer") from None
        times.append((time.perf_counter_ns() - start) / 1e6)
    return median(times[2:])  # the first two warm the path


@contextlib.contextmanager
def on_timing_core(ev: Evaluation):
    """GPU: both processes on the core the pool keeps for the slot's holder while they are timed, then
    back (best effort: where the kernel refuses, they are timed on their own cores)."""
    core = ev.machine.timing_core
    if core is None or ev.device != "cuda":
        yield False
        return
    both = lambda: ev.reference.tree() + ev.candidate.tree()
    try:
        yield pin_threads(both, {core})
    finally:
        pin_threads(both, ev.cores)
