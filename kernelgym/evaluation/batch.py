"""One batch of fresh input sets through both evaluation processes, as the trusted worker runs it: inputs
from the reference, the reference run while the candidate is frozen, the candidate run, its outputs read by
this process and compared by the reference. Every stage that runs the solution runs it through `run_batch`.

Where trust lies: the worker holds the clock (its own perf_counter around each batch), draws the seeds of
every input set, reads the candidate's outputs itself from its frozen process, and reads the CPU time the
kernel accounted to the candidate's process tree. The reference process holds the expected outputs and
compares. The candidate's process holds nothing the verdict depends on.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable

from kernelgym.evaluation import launch_evidence, rules
from kernelgym.evaluation.conversation import receive, to_candidate, to_reference
from kernelgym.evaluation.outcome import LateMismatch, Mismatch, end
from kernelgym.evaluation.outputs import FrozenReader, refuse_aliased_inputs
from kernelgym.evaluation.result import TrialResult
from kernelgym.evaluation.rules import reason
from kernelgym.evaluation.state import Batch, Evaluation, Prepared
from kernelgym.evaluation.timing import Laps
from kernelgym.workers import messages as m
from kernelgym.workers.process import Died

# A stopped tree's threads may still finish taking their stop (kernel time, microseconds each).
STOPPED_CPU_ALLOWANCE_S = 0.002
STOP_SETTLE_LIMIT_S = 1.0  # a stop pending on a busy machine: measured at 2 s and more (workers/process.py)


def run_batch(ev: Evaluation, seeds: list[int], perturbed: list[bool], candidate_first: bool = False,
              profile: bool = False, prepared: Prepared | None = None) -> Batch:
    """One batch of fresh input sets through both sides, timed by this process, every output checked."""
    part = Laps(ev.batch_parts_s).lap
    if prepared is not None:
        record, inputs, fd = Batch(prepared.number, len(prepared.seeds)), prepared.inputs, prepared.fd
    else:
        ev.batches += 1
        record = Batch(ev.batches, len(seeds))
        to_reference(ev, m.MakeInputs(record.number, seeds, perturbed))
        inputs, fd = reference_inputs(ev, record.number)
    part("inputs")
    try:
        if inputs.ipc:
            _map_then_fill(ev, record.number, inputs.ipc)
        part("map")
        order = ("candidate", "reference") if candidate_first else ("reference", "candidate")
        done = None
        for side in order:
            if side == "reference":
                hold_candidate(ev)
                stopped_cpu = stopped_cpu_s(ev) if ev.watch.cgroup is not None else None
                record.reference_ms = _run_reference(ev, record.number, inputs, fd)
                if stopped_cpu is not None:
                    _require_stopped(ev.candidate_cpu_s() - stopped_cpu)
            else:
                done = _run_candidate(ev, record, inputs, fd, profile)
        part("run")
        _check(ev, record, done, fd, inputs.ipc)
        part("check")
        # after the check: nothing may stand between the candidate's 'done' and the read of its outputs
        launch_evidence.take_batch(ev, record.number, record.calls, record.candidate_ms, profile)
    finally:
        if fd is not None:
            os.close(fd)
        for process in (ev.reference, ev.candidate):
            try:
                process.send(m.Release(record.number))
            except Died:  # the stage that raised says why; a dead process needs no release
                pass
    return record


def require_own_kernels(ev: Evaluation, record: Batch) -> None:
    """The candidate's own count of calls into its kernels: on the CPU only where perf events are
    refused (the samples decide otherwise); the backward's count as it was."""
    counted_inside = ev.device == "cpu" and not ev.watch.judges_own_code()
    if counted_inside and record.own_kernel_calls < record.calls:
        raise end(rules.KERNEL_NOT_CALLED, "forward ran the solution's kernels "
                                           f"{record.own_kernel_calls} time(s) in {record.calls} calls")
    # Counted in the candidate's process by the same wrappers as above (native loaders, Triton launches).
    counted = ev.device == "cpu" or ev.job.backend == "triton"
    if ev.job.backward and counted and 0 <= record.backward_kernel_calls < record.calls:
        raise end(rules.BACKWARD_NOT_OWN, "autograd's backward ran the solution's kernels "
                                          f"{record.backward_kernel_calls} time(s) in {record.calls} "
                                          "calls: the backward was left to PyTorch")


@contextlib.contextmanager
def later_outputs_checked(ev: Evaluation, seeds: list[int]):
    """A wrong output after correctness passed (warm-up, timing, profile), in the batch of these input sets.
    Either the candidate behaved differently once it counted (skipped, cached, finished after 'done'), or
    it is wrong on inputs the correctness trials did not draw (an honest kernel's NaN where a == b was
    charged `outputs_changed`): the pipeline replays the wrong call's input set to tell (LateMismatch)."""
    try:
        yield
    except Mismatch as mismatch:
        finding = reason(rules.OUTPUTS_CHANGED, f"call {mismatch.call + 1} of a later batch returned wrong "
                                                f"outputs ({mismatch.trial.message})")
        raise LateMismatch(finding, ev.child_job.init_seed, seeds[mismatch.call]) from None


def hold_candidate(ev: Evaluation) -> None:
    """The candidate is frozen whenever the reference runs. They share cores (and the GPU), so a live
    candidate, a thread that spins or launches kernels while its own process waits, would slow the
    reference and look faster. (GPU work it queued before the freeze still runs: see threat-model.md.)"""
    if not ev.candidate.frozen:
        ev.candidate.freeze()


def reference_inputs(ev: Evaluation, number: int) -> tuple[m.Inputs, int | None]:
    try:
        msg, _, fds = ev.reference.receive(time.monotonic() + ev.options.timeout_s + 60)
    except (TimeoutError, Died):
        raise end(rules.JUDGE_FAILED, "the reference process did not make the inputs") from None
    if isinstance(msg, m.Failed) and msg.error_kind == "oom":
        raise end(rules.TOO_LARGE, f"the task's inputs do not fit: {msg.message[:200]}")
    if not isinstance(msg, m.Inputs) or msg.batch != number:
        raise end(rules.JUDGE_FAILED, f"the reference process said {msg.kind!r}")
    return msg, (fds[0] if fds else None)


def _contention_watched(ev: Evaluation, side: str, pids: Callable[[], list[int]]):
    """During the timing, how long one side's threads wait for a CPU while its batch is clocked."""
    contention = ev.contention.get(side) if ev.stage == "timing" else None
    return contention.watch(pids) if contention is not None else contextlib.nullcontext()


def _map_then_fill(ev: Evaluation, number: int, ipc: list) -> None:
    """GPU: the candidate maps the batch's input buffers before the clock starts (mapping is no part of
    its time), but they hold nothing yet; the reference fills them once the candidate is frozen. Work
    the candidate does outside its RunBatch's clock can then never use this batch's inputs."""
    ev.candidate.thaw()
    to_candidate(ev, m.RunBatch(number, ipc=ipc, map_only=True))
    receive(ev, m.BatchDone, ev.stage, ev.options.timeout_s)
    hold_candidate(ev)
    to_reference(ev, m.FillInputs(number))
    try:
        msg, _, _ = ev.reference.receive(time.monotonic() + ev.options.timeout_s + 60)
    except (TimeoutError, Died):
        raise end(rules.JUDGE_FAILED, "the reference process did not fill the inputs") from None
    if not isinstance(msg, m.InputsFilled) or msg.batch != number:
        raise end(rules.JUDGE_FAILED, f"the reference process said {msg.kind!r}")


def stopped_cpu_s(ev: Evaluation) -> float:
    """CPU: the candidate tree's count, read frozen (and, where a cgroup counts, once every thread is off
    its CPU). The kernel adds a running thread's time to its cgroup at a scheduler tick or a switch (every
    4 ms here), so a count read while a thread runs lacks up to a tick, which the next read then charges to
    the wrong window: an honest ReLU timed in one ~4 ms batch read 1.45 cores in CI (`extra_cores`)."""
    hold_candidate(ev)
    if ev.watch.cgroup is not None:
        ev.candidate.settle(STOP_SETTLE_LIMIT_S)
    return ev.candidate_cpu_s()


def _require_stopped(cpu_s: float) -> None:
    """CPU: the candidate's tree, stopped, spent no CPU time while the reference's batch ran. SIGSTOP does
    not stop every thread (io_uring's own workers ignore it); one that burns the shared core then slows
    the reference unseen by the candidate's clock. Its cgroup counts such threads too."""
    if cpu_s > STOPPED_CPU_ALLOWANCE_S:
        raise end(rules.EXTRA_CORES, f"the candidate's processes ran {cpu_s * 1e3:.1f} ms while stopped, "
                                     "beside the reference's timed batch (threads that ignore SIGSTOP)")


def _run_reference(ev: Evaluation, number: int, inputs: m.Inputs, fd: int | None) -> float:
    message = m.RunBatch(number, layout=inputs.layout)
    ev.watch.start_reference(ev.reference.main_pid)  # the same timer interrupts as the candidate
    with _contention_watched(ev, "reference", ev.reference.tree):
        start = time.perf_counter_ns()
        to_reference(ev, message, fds=[fd] if fd is not None else ())
        try:
            msg, _, _ = ev.reference.receive(time.monotonic() + ev.options.timeout_s + 60)
        except (TimeoutError, Died):
            raise end(rules.JUDGE_FAILED, "the reference process did not finish a batch") from None
        elapsed = (time.perf_counter_ns() - start) / 1e6
    ev.watch.discard()
    if not isinstance(msg, m.BatchDone):
        raise end(rules.JUDGE_FAILED,
                  f"the reference failed on a batch: {getattr(msg, 'message', msg.kind)[:300]}")
    return elapsed


def _run_candidate(ev: Evaluation, record: Batch, inputs: m.Inputs, fd: int | None,
                   profile: bool) -> m.BatchDone:
    message = m.RunBatch(record.number, layout=inputs.layout, ipc=inputs.ipc, profile=profile)
    inside_clock = bool(inputs.ipc)  # GPU: its inputs sit in memory it mapped, so it wakes on the clock
    cpu_before = 0.0
    if not inside_clock:  # CPU: the inputs come with the message, nothing to start on before it
        cpu_before = stopped_cpu_s(ev)
        ev.candidate.thaw()
    if ev.watch.judges_own_code():
        ev.watch.start(ev.candidate_pids(), ev.cores)
    with _contention_watched(ev, "candidate", ev.candidate_pids):
        start = time.perf_counter_ns()
        if inside_clock:
            ev.candidate.thaw()
        to_candidate(ev, message, fds=[fd] if fd is not None else ())
        done = receive(ev, m.BatchDone, ev.stage, ev.options.timeout_s)
        record.candidate_ms = (time.perf_counter_ns() - start) / 1e6
    ev.done_at = time.perf_counter_ns()
    if ev.device == "cpu":
        _charge_cpu(ev, record, cpu_before)
    record.own_kernel_calls, record.profile = int(done.own_kernel_calls), dict(done.profile or {})
    record.backward_kernel_calls = int(done.backward_kernel_calls)
    if done.precision_lowered:
        raise end(rules.PRECISION_DOWNGRADE, "TF32 or reduced-precision matmul was switched on"
                   if ev.job.dtype == "float32" else
                   f"half-precision reductions were switched on for a {ev.job.dtype} run")
    return done


def _charge_cpu(ev: Evaluation, record: Batch, cpu_before: float) -> None:
    """CPU: the candidate frozen at 'done' (a thread still writing now leaves its outputs unfinished for the
    read that follows), its tree's CPU time charged to the batch, and the cores it reached checked."""
    record.candidate_cpu_s = stopped_cpu_s(ev) - cpu_before
    record.cpu_ns_exact = ev.watch.cgroup is not None
    ev.watch.take(record.candidate_cpu_s, timed=ev.stage == "timing")
    outside = ev.candidate.cpus_seen() - ev.cores
    if outside:  # the kernel's own record: a thread was allowed on, or ran on, another core
        raise end(rules.EXTRA_CORES, f"the candidate's threads reached cores {sorted(outside)}, "
                                     f"beyond the {len(ev.cores)} the reference gets")


def _check(ev: Evaluation, record: Batch, done: m.BatchDone, fd: int | None, inputs_ipc: list | None) -> None:
    """Every call's outputs, read from the frozen candidate (CPU) or mapped by the reference (GPU),
    checked by the reference in one exchange; the candidate stays frozen until the answer."""
    try:
        if len(done.outputs) != record.calls:
            raise end(rules.OUTPUTS_UNREADABLE, f"{len(done.outputs)} outputs for {record.calls} calls")
        if ev.device == "cpu":
            outputs = FrozenReader(ev.candidate, ev.readback, ev.ready).read(done, fd, ev.stage)
            fds = [ev.readback.fd]
        else:
            outputs, fds = refuse_aliased_inputs(done.outputs, inputs_ipc), []
        to_reference(ev, m.Compare(record.number, outputs, ev.atol, ev.rtol), fds=fds)
        try:
            answer, _, _ = ev.reference.receive(time.monotonic() + ev.options.timeout_s + 60)
        except (TimeoutError, Died):
            raise end(rules.JUDGE_FAILED, "the reference process did not answer a comparison") from None
    finally:
        ev.candidate.thaw()
    if not isinstance(answer, m.Compared):
        raise end(rules.JUDGE_FAILED, f"the reference process said {answer.kind!r}")
    if ev.device != "cpu" and answer.last_checked_ns:
        ev.readback_lag_ms = (answer.last_checked_ns - ev.done_at) / 1e6
    if answer.inputs_modified:
        raise end(rules.INPUTS_MODIFIED, "forward wrote into its input tensors")
    trial = TrialResult(**answer.trial)
    if trial.lowered_precision:
        raise end(rules.PRECISION_LOST, f"call {answer.call + 1}: {trial.message}")
    if not trial.passed:
        raise Mismatch(answer.call, trial)
