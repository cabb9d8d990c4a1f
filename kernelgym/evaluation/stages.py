"""The stages of one evaluation, run in kernelgym's trusted worker (which never imports candidate code).

static -> reference -> build + load -> correctness -> timing -> own code / profile, each stage a method that
returns or ends the evaluation with a `Reason` from the rules catalogue (evaluation/rules.py). Each batch
goes through both processes the same way: fresh inputs from the reference, the reference run while the
candidate is frozen, the candidate run, its outputs read by this process and compared by the reference.
The conversation with the two evaluation processes is typed (workers/messages.py, whose docstring shows it).

Where trust lies: the worker holds the clock (its own perf_counter around each batch), draws the seeds of
every input set, reads the candidate's outputs itself from its frozen process, and reads the CPU time the
kernel accounted to the candidate's process tree. The reference process holds the expected outputs and
compares. The candidate's process holds nothing the verdict depends on.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kernelgym import backends
from kernelgym.evaluation import own_code, rules
from kernelgym.evaluation.compare import tolerance
from kernelgym.evaluation.contention import SideContention
from kernelgym.evaluation.job import EvalJob
from kernelgym.evaluation.launches import LaunchCounts, LaunchWatch, judge_launches
from kernelgym.evaluation.options import EvalOptions
from kernelgym.evaluation.outcome import Mismatch, Outcome, end
from kernelgym.evaluation.outputs import FrozenReader, refuse_aliased_inputs
from kernelgym.evaluation.own_code import CandidateWatch
from kernelgym.evaluation.profile import judge_profile
from kernelgym.evaluation.result import (
    BuildResult,
    CorrectnessResult,
    EvalResult,
    LoadResult,
    ProfileResult,
    TimingResult,
    TrialResult,
    Verdict,
)
from kernelgym.evaluation.rules import Reason, reason
from kernelgym.evaluation.static import static_check
from kernelgym.evaluation.timing import (
    Laps,
    charged_batch_ms,
    precise_enough,
    second_timing_agrees,
    second_timing_needed,
    speedup_interval,
    stats,
)
from kernelgym.stats import median
from kernelgym.workers import cgroup, locks
from kernelgym.workers import messages as m
from kernelgym.workers.candidate_side import run_candidate
from kernelgym.workers.process import Died, EvalProcess, pin_threads
from kernelgym.workers.readback import Readback
from kernelgym.workers.reference_side import run_reference

if TYPE_CHECKING:
    from kernelgym.evaluation.pipeline import Pipeline

_BATCH_PARTS = ("inputs", "map", "run", "check")
# A stopped tree's threads may still finish taking their stop (kernel time, microseconds each).
STOPPED_CPU_ALLOWANCE_S = 0.002
STOP_SETTLE_LIMIT_S = 1.0  # a stop pending on a busy machine: measured at 2 s and more (workers/process.py)
# An input set's copies on a GPU: the reference's own, its pristine copy, the buffers the candidate maps, and
# one of slack for the caching allocator's rounding (the CPU's budget is a flat 1 GiB).
INPUT_COPIES = 4


@dataclass
class _Batch:
    """One batch as the trusted side saw it."""

    number: int
    calls: int
    reference_ms: float = 0.0  # wall time of the reference's batch, by the worker's clock
    candidate_ms: float = 0.0
    candidate_cpu_s: float = 0.0
    own_kernel_calls: int = 0  # the candidate's own count: a hint in messages, never evidence
    backward_kernel_calls: int = -1
    profile: dict = field(default_factory=dict)
    cpu_ns_exact: bool = False  # candidate_cpu_s came from its cgroup (every thread, to the ns)
    launches: LaunchCounts | None = None  # GPU, the profiled batch: kernel launches seen from outside


@dataclass
class _Prepared:
    """A batch's input sets made by the reference ahead of its turn (before the GPU's slot is taken)."""

    number: int
    seeds: list[int]
    inputs: m.Inputs
    fd: int | None


def seed_source(options: EvalOptions):
    import random

    return secrets.SystemRandom() if options.seed is None else random.Random(options.seed)


class Evaluation:
    """The stages of one evaluation, in order; each returns or raises Outcome."""

    def __init__(self, pipeline: Pipeline, job: EvalJob, result: EvalResult, eval_dir: str):
        self.pipeline, self.job, self.result, self.eval_dir = pipeline, job, result, eval_dir
        self.options = job.options
        self.backend = backends.get(job.backend)
        self.device, self.mode = pipeline.placement(self.backend)
        self.rng = seed_source(self.options)
        self.child_job = pipeline.child_job(job, self.device, self.mode, self.rng)
        self.atol, self.rtol = tolerance(job.dtype, job.atol, job.rtol)
        self.reference: EvalProcess | None = None
        self.candidate: EvalProcess | None = None
        self.ready: m.Ready | None = None
        self.readback = Readback() if self.device == "cpu" else None
        self.batches = 0
        self.prepared: list[_Prepared] = []  # the timing's first batches' inputs, made before its slot
        self.past_clock_ms = 0.0  # CPU: timed batches' work charged past their clocks
        self.spare_folder: str | None = None  # where processes started before this job live
        # Seconds of every batch's parts so far (inputs made, inputs mapped, both sides run, outputs checked):
        # the timing stage reports its own share, which is what holds the GPU's slot.
        self.batch_parts_s = dict.fromkeys(_BATCH_PARTS, 0.0)
        self.build_s, self.cached = 0.0, True
        self.stage = "load"  # the stage under way, named in timeouts and crashes
        self.cores = pipeline.evaluation_cores(self.device, self.options.threads)  # both processes' cores
        # issue 28: the candidate's cgroup and the samples of its batches, taken from outside
        self.watch = CandidateWatch(self.device == "cpu", native=self.backend.device == "cpu")
        # CPU, each side's while the timing's batches are clocked (issue 47)
        self.contention: dict[str, SideContention] = {}

    def run(self) -> None:
        try:
            self.static()
            self.start_reference()
            self.load_beside_reference()
            self.correctness()
            if self.options.timing and self.mode == "run":
                self.timing()
            else:
                self.result.timing = TimingResult(False, reason=_no_timing_reason(self.mode, self.options))
            if self.watch.evidence.note:  # perf events refused: say so, and what decided instead
                self.result.static.warnings.append(self.watch.evidence.note)
            decided = self.watch.judges_own_code() and self.own_code()
            if not decided and self.options.profile and self.mode == "run":
                self.profile()
        finally:
            for process in (self.candidate, self.reference):
                if process is not None:
                    process.close()
            if self.readback is not None:
                self.readback.close()
            self.result.candidate_oom_kills = self.watch.oom_kills()
            self.watch.close()
            if self.candidate is not None:
                self.result.output_tail = self.candidate.output_tail()
            if self.spare_folder:
                shutil.rmtree(self.spare_folder, ignore_errors=True)
        if self.options.ncu and self.result.verdict is Verdict.OK:
            self.ncu()

    # static -------------------------------------------------------------------------------------------
    def static(self) -> None:
        self.result.static = static_check(self.job.solution_source, self.backend, self.job.dtype)
        if not self.result.static.passed:
            raise Outcome(Reason.parse(self.result.static.reasons[0]))

    # reference --------------------------------------------------------------------------------------------
    def _spares(self):
        """The worker's spare processes, where they suit this evaluation's device (a GPU worker's are
        GPU processes: a CPU evaluation there starts its own)."""
        spares = self.pipeline.spares
        return spares if spares is not None and spares.uses_gpu == (self.device == "cuda") else None

    def _take_spares(self):
        """A GPU worker's waiting pair of processes (start_reference forks the next once its reference is
        ready: forking on the way there would delay it)."""
        spares = self._spares()
        if spares is None:
            return None
        pair = spares.take(self.cores)
        if pair is None:
            return None
        joins = self.watch.make_cgroup(self.cores, _tree_memory_bytes(self.pipeline.sandbox))
        # None of its code has run yet: every process it makes from now on is born inside, as after a fork.
        if joins and not cgroup.adopt(joins, pair.candidate.tree()):
            pair.discard()
            self.watch.cgroup.remove()
            return None
        self.spare_folder = pair.folder
        return pair

    def _spawn(self, target, name: str) -> EvalProcess:
        folder = os.path.join(self.eval_dir, name)
        os.mkdir(folder)
        joins = (self.watch.make_cgroup(self.cores, _tree_memory_bytes(self.pipeline.sandbox))
                 if target is run_candidate else None)
        return EvalProcess(target, self.child_job, folder, self.pipeline.sandbox, self.device == "cuda",
                           cores=self.cores, cgroup_files=joins)

    def start_reference(self) -> None:
        """The reference's process, up to the task's init arguments (what the candidate's construction needs);
        its model and first call follow while the candidate loads, unless the machine's peaks are measured
        (nothing else may run then: the candidate starts once the reference is ready)."""
        self.reference_started = time.monotonic()
        job = self.child_job
        measuring_peaks = job.roofline and self.mode == "run" and job.cached_peaks is None
        spares = None if measuring_peaks else self._take_spares()
        if spares is not None:  # started before this job: their CUDA contexts are made
            self.reference, self.candidate = spares.reference, spares.candidate
            self.reference.assign(job)
            self.candidate.assign(job)
        else:
            self.reference = self._spawn(run_reference, "reference")
            if not measuring_peaks:  # its start-up (CUDA context, imports) overlaps the reference's
                self.candidate = self._spawn(run_candidate, "candidate")
        self.reference_deadline = time.monotonic() + self.options.timeout_s + 60
        with self._reference_answering():
            self.reference.hello(self.reference_deadline)
        self.result.stage_s["reference_hello"] = round(time.monotonic() - self.reference_started, 3)
        self.init_args = self._from_reference(m.InitArgs).init_args
        if measuring_peaks:
            self.reference_ready()

    def load_beside_reference(self) -> None:
        """The candidate's import and construction while the reference builds its model (on L2 tasks a
        second or more of CPU initialisation on each side, which used to run one after the other)."""
        try:
            self.load_candidate()
        except Outcome:
            self.reference_ready()  # a broken task is named first, as when the reference finished first
            raise
        self.reference_ready()

    def reference_ready(self) -> None:
        """The reference's model built and run once: the sizes of its inputs and outputs, its roofline."""
        if self.ready is not None:
            return
        # its own limit runs from its start; a long build of the candidate's may have outlasted it meanwhile
        self.reference_deadline = max(self.reference_deadline, time.monotonic() + 1.0)
        self.ready = self._from_reference(m.Ready)
        for part, seconds in (self.ready.startup_s or {}).items():
            if isinstance(seconds, int | float):
                self.result.stage_s[f"reference_{part}"] = round(float(seconds), 3)
        self._remember_roofline(self.ready)
        # its own start (its answer may have waited while the candidate loaded beside it)
        own = sum(v for v in (self.ready.startup_s or {}).values() if isinstance(v, int | float))
        self.result.stage_s["reference"] = round(self.result.stage_s.get("reference_hello", 0.0) + own, 3)
        if self._spares() is not None:
            self._spares().refill(self.cores)  # while the candidate's first batches run

    @contextlib.contextmanager
    def _reference_answering(self):
        """A reference silent past its deadline ran past its limit; one that died is the judge's failure."""
        try:
            yield
        except TimeoutError:
            raise end(rules.TIMEOUT, "the task's reference ran past its limit") from None
        except Died:
            raise end(rules.JUDGE_FAILED, f"the reference process {self.reference.death()}") from None

    def _from_reference(self, expected: type[m.Message]) -> m.Message:
        with self._reference_answering():
            msg, _, _ = self.reference.receive(self.reference_deadline)
        if isinstance(msg, m.Failed):
            raise end(rules.REFERENCE_FAILED, f"the task's reference raised {msg.message[:300]}")
        if not isinstance(msg, expected):
            raise end(rules.JUDGE_FAILED, f"the reference process said {msg.kind!r}")
        return msg

    def _remember_roofline(self, ready: m.Ready) -> None:
        """The machine's peaks and the task's counted cost, for every later evaluation on this machine."""
        from kernelgym.evaluation.roofline import Peaks, TaskCost

        if ready.peaks and not self.child_job.cached_peaks:
            key = self.pipeline.peaks_key(self.device, self.options.threads, self.job.dtype)
            self.pipeline.peaks.put(key, Peaks(**ready.peaks))
        if ready.flops is not None and not self.child_job.cached_cost:
            self.pipeline.costs.put(self.pipeline.cost_key(self.job), TaskCost(ready.flops, ready.min_bytes))

    # sending: a dead candidate is its own crash; a dead reference is the judge's failure -------------------
    def to_candidate(self, message: m.Message, fds=()) -> None:
        try:
            self.candidate.send(message, fds=fds)
        except Died:
            death = self.candidate.death()
            raise end(rules.CRASH, f"the candidate's process {death} during {self.stage}") from None

    def to_reference(self, message: m.Message, fds=()) -> None:
        try:
            self.reference.send(message, fds=fds)
        except Died:
            raise end(rules.JUDGE_FAILED, f"the reference process {self.reference.death()}") from None

    # the candidate's messages -------------------------------------------------------------------------------
    def receive(self, expected: type[m.Message], stage: str, limit_s: float) -> m.Message:
        """The candidate's next message of the expected type; build requests are served on the way."""
        deadline = time.monotonic() + limit_s
        while True:
            try:
                msg, _, fds = self.candidate.receive(deadline)
            except TimeoutError:
                said = (f"the {stage} stage ran past its limit of {limit_s:g} s (timeout_s; builds get "
                        "build_timeout_s)")
                raise end(rules.TIMEOUT, said) from None
            except Died:
                raise end(rules.CRASH,
                          f"the candidate's process {self.candidate.death()} during {stage}") from None
            for fd in fds:
                os.close(fd)
            if isinstance(msg, m.Build):  # builds, in any stage, beside the stage's own limit
                # One budget for all the builds of an evaluation: a build's time is added to the stage's
                # deadline, so a solution asking for build after build held a worker without end (red team).
                left = self.options.build_timeout_s - self.build_s
                if left <= 0:
                    raise end(rules.TIMEOUT, f"the builds it asked for took {self.build_s:.0f} s together, "
                                             f"past build_timeout_s ({self.options.build_timeout_s:g} s)")
                started = time.monotonic()
                self.build(msg, started + left)
                deadline += time.monotonic() - started
            elif isinstance(msg, m.Failed):
                self.failed(msg)
            elif isinstance(msg, expected):
                return msg
            else:
                raise end(rules.PROTOCOL, f"unexpected {msg.kind!r} during {stage}")

    def build(self, msg: m.Build, deadline: float) -> None:
        from kernelgym.build import serve

        started = time.monotonic()
        reply, cached = serve.serve(msg.request, max(1.0, deadline - time.monotonic()))
        if isinstance(reply, m.Built):  # the solution's own code: what its samples are held to
            self.watch.classifier.add_built(reply.path)
        self.cached = self.cached and cached
        self.build_s += time.monotonic() - started
        self.to_candidate(reply)

    def failed(self, msg: m.Failed) -> None:
        stage = msg.stage
        if msg.error_kind == "compile" or (stage == "load" and "BuildError" in msg.message):
            self.result.build = BuildResult(False, round(self.build_s, 3), False,
                                            log=trim_log(msg.log or msg.message))
            first = msg.message.splitlines()[0][:300] if msg.message else "build failed"
            raise end(rules.COMPILE_ERROR, first)
        if msg.error_kind == "cuda":
            raise end(rules.CUDA_ERROR, f"{msg.message[:300]} (during {stage}; the process is discarded)")
        if msg.error_kind == "contract":
            raise end(rules.CONTRACT, msg.message)
        where = "; ".join(msg.frames)
        text = msg.message[:500] + (f" [{where}]" if where else "")
        if stage in ("load", "init"):
            self.result.build = BuildResult(True, round(self.build_s, 3), self.cached)
            self.result.load = LoadResult(False, error=msg.message[:2000])
            raise end(rules.LOAD_ERROR, text)
        raise end(rules.OUT_OF_MEMORY if msg.error_kind == "oom" else rules.RUNTIME_ERROR, text)

    # build + load -------------------------------------------------------------------------------------------
    def load_candidate(self) -> None:
        started = time.monotonic()
        if self.candidate is None:
            self.candidate = self._spawn(run_candidate, "candidate")
        try:
            hello = self.candidate.hello(time.monotonic() + 120)
        except (TimeoutError, Died):
            raise end(rules.CRASH, "the candidate's process did not start") from None
        self.result.static.warnings.extend(hello.notes)
        self.result.static.warnings.extend(self.watch.check_joined())
        # Importing gets the run limit like any stage: builds are served through it with their own limit
        # (a reply whose import loops forever cost 300 s, the build limit, when import had that limit).
        self.receive(m.Loaded, "load", self.options.timeout_s)
        self.result.build = BuildResult(True, round(self.build_s, 3), self.cached,
                                        runnable=self.mode != "compile")
        self.result.load = LoadResult(True, round(time.monotonic() - started - self.build_s, 3))
        self.result.stage_s["load"] = round(time.monotonic() - started, 3)
        if self.mode == "compile":
            raise end(rules.NO_GPU, "the CUDA code compiled, but this machine has no GPU to run it")
        started = time.monotonic()
        self.to_candidate(m.Construct(self.init_args, self.child_job.init_seed))
        self.receive(m.Constructed, "init", self.options.timeout_s)
        self.result.stage_s["init"] = round(time.monotonic() - started, 3)
        if self.build_s > self.result.build.build_s:  # built in __init__ (many models' answers do)
            self.result.build = BuildResult(True, round(self.build_s, 3), self.cached)

    # batches ------------------------------------------------------------------------------------------------
    def batch(self, seeds: list[int], perturbed: list[bool], candidate_first: bool = False,
              profile: bool = False, prepared: _Prepared | None = None) -> _Batch:
        """One batch of fresh input sets through both sides, timed by this process, every output checked."""
        part = Laps(self.batch_parts_s).lap
        if prepared is not None:
            record, inputs, fd = _Batch(prepared.number, len(prepared.seeds)), prepared.inputs, prepared.fd
        else:
            self.batches += 1
            record = _Batch(self.batches, len(seeds))
            self.to_reference(m.MakeInputs(record.number, seeds, perturbed))
            inputs, fd = self._reference_inputs(record.number)
        part("inputs")
        try:
            if inputs.ipc:
                self._map_then_fill(record.number, inputs.ipc)
            part("map")
            order = ("candidate", "reference") if candidate_first else ("reference", "candidate")
            done = None
            for side in order:
                if side == "reference":
                    self._hold_candidate()
                    stopped_cpu = None
                    if self.watch.cgroup is not None:  # counted once every stop has landed and been charged
                        self.candidate.settle(STOP_SETTLE_LIMIT_S)
                        stopped_cpu = self._candidate_cpu_s()
                    record.reference_ms = self._run_reference(record.number, inputs, fd)
                    if stopped_cpu is not None:
                        self._require_stopped(self._candidate_cpu_s() - stopped_cpu)
                else:
                    done = self._run_candidate(record, inputs, fd, profile)
            part("run")
            self._check(record, done, fd, inputs.ipc)
            part("check")
        finally:
            if fd is not None:
                os.close(fd)
            for process in (self.reference, self.candidate):
                try:
                    process.send(m.Release(record.number))
                except Died:  # the stage that raised says why; a dead process needs no release
                    pass
        return record

    def _contention_watched(self, side: str, pids: Callable[[], list[int]]):
        """During the timing, how long one side's threads wait for a CPU while its batch is clocked."""
        contention = self.contention.get(side) if self.stage == "timing" else None
        return contention.watch(pids) if contention is not None else contextlib.nullcontext()

    def _map_then_fill(self, number: int, ipc: list) -> None:
        """GPU: the candidate maps the batch's input buffers before the clock starts (mapping is no part of
        its time), but they hold nothing yet; the reference fills them once the candidate is frozen. Work
        the candidate does outside its RunBatch's clock can then never use this batch's inputs."""
        self.candidate.thaw()
        self.to_candidate(m.RunBatch(number, ipc=ipc, map_only=True))
        self.receive(m.BatchDone, self.stage, self.options.timeout_s)
        self._hold_candidate()
        self.to_reference(m.FillInputs(number))
        try:
            msg, _, _ = self.reference.receive(time.monotonic() + self.options.timeout_s + 60)
        except (TimeoutError, Died):
            raise end(rules.JUDGE_FAILED, "the reference process did not fill the inputs") from None
        if not isinstance(msg, m.InputsFilled) or msg.batch != number:
            raise end(rules.JUDGE_FAILED, f"the reference process said {msg.kind!r}")

    def _hold_candidate(self) -> None:
        """The candidate is frozen whenever the reference runs. They share cores (and the GPU), so a live
        candidate, a thread that spins or launches kernels while its own process waits, would slow the
        reference and look faster. (GPU work it queued before the freeze still runs: see threat-model.md.)"""
        if not self.candidate.frozen:
            self.candidate.freeze()

    def _require_stopped(self, cpu_s: float) -> None:
        """CPU: the candidate's tree, stopped, spent no CPU time while the reference's batch ran. SIGSTOP does
        not stop every thread (io_uring's own workers ignore it); one that burns the shared core then slows
        the reference unseen by the candidate's clock. Its cgroup counts such threads too."""
        if cpu_s > STOPPED_CPU_ALLOWANCE_S:
            raise end(rules.EXTRA_CORES, f"the candidate's processes ran {cpu_s * 1e3:.1f} ms while stopped, "
                                         "beside the reference's timed batch (threads that ignore SIGSTOP)")

    def _reference_inputs(self, number: int) -> tuple[m.Inputs, int | None]:
        try:
            msg, _, fds = self.reference.receive(time.monotonic() + self.options.timeout_s + 60)
        except (TimeoutError, Died):
            raise end(rules.JUDGE_FAILED, "the reference process did not make the inputs") from None
        if isinstance(msg, m.Failed) and msg.error_kind == "oom":
            raise end(rules.TOO_LARGE, f"the task's inputs do not fit: {msg.message[:200]}")
        if not isinstance(msg, m.Inputs) or msg.batch != number:
            raise end(rules.JUDGE_FAILED, f"the reference process said {msg.kind!r}")
        return msg, (fds[0] if fds else None)

    def _run_reference(self, number: int, inputs: m.Inputs, fd: int | None) -> float:
        message = m.RunBatch(number, layout=inputs.layout)
        self.watch.start_reference(self.reference.main_pid)  # the same timer interrupts as the candidate
        with self._contention_watched("reference", self.reference.tree):
            start = time.perf_counter_ns()
            self.to_reference(message, fds=[fd] if fd is not None else ())
            try:
                msg, _, _ = self.reference.receive(time.monotonic() + self.options.timeout_s + 60)
            except (TimeoutError, Died):
                raise end(rules.JUDGE_FAILED, "the reference process did not finish a batch") from None
            elapsed = (time.perf_counter_ns() - start) / 1e6
        self.watch.discard()
        if not isinstance(msg, m.BatchDone):
            raise end(rules.JUDGE_FAILED,
                      f"the reference failed on a batch: {getattr(msg, 'message', msg.kind)[:300]}")
        return elapsed

    def _run_candidate(self, record: _Batch, inputs: m.Inputs, fd: int | None, profile: bool) -> m.BatchDone:
        message = m.RunBatch(record.number, layout=inputs.layout, ipc=inputs.ipc, profile=profile)
        inside_clock = bool(inputs.ipc)  # GPU: its inputs sit in memory it mapped, so it wakes on the clock
        if not inside_clock:  # CPU: the inputs come with the message, nothing to start on before it
            self.candidate.thaw()
        cpu_before = self._candidate_cpu_s()
        if self.watch.judges_own_code():
            self.watch.start(self.candidate_pids(), self.cores)
        wanted = self.options.launch_evidence or self.options.launch_rules
        launches = LaunchWatch() if profile and wanted and self.device == "cuda" else None
        watching = launches is not None and launches.start(self.candidate.main_pid)
        with self._contention_watched("candidate", self.candidate_pids):
            start = time.perf_counter_ns()
            if inside_clock:
                self.candidate.thaw()
            self.to_candidate(message, fds=[fd] if fd is not None else ())
            try:
                done = self.receive(m.BatchDone, self.stage, self.options.timeout_s)
            finally:
                if launches is not None:
                    record.launches = launches.stop() if watching else LaunchCounts(False, launches.refused)
            record.candidate_ms = (time.perf_counter_ns() - start) / 1e6
        self.done_at = time.perf_counter_ns()
        if self.device == "cpu":
            # Frozen at 'done': a thread still writing now leaves its outputs unfinished for the read below.
            self.candidate.freeze()
            record.candidate_cpu_s = self._candidate_cpu_s() - cpu_before
            record.cpu_ns_exact = self.watch.cgroup is not None
            self.watch.take(record.candidate_cpu_s, timed=self.stage == "timing")
            outside = self.candidate.cpus_seen() - self.cores
            if outside:  # the kernel's own record: a thread was allowed on, or ran on, another core
                raise end(rules.EXTRA_CORES, f"the candidate's threads reached cores {sorted(outside)}, "
                                             f"beyond the {len(self.cores)} the reference gets")
        record.own_kernel_calls, record.profile = int(done.own_kernel_calls), dict(done.profile or {})
        record.backward_kernel_calls = int(done.backward_kernel_calls)
        if done.precision_lowered:
            raise end(rules.PRECISION_DOWNGRADE, "TF32 or reduced-precision matmul was switched on"
                       if self.job.dtype == "float32" else
                       f"half-precision reductions were switched on for a {self.job.dtype} run")
        return done

    def _check(self, record: _Batch, done: m.BatchDone, fd: int | None, inputs_ipc: list | None) -> None:
        """Every call's outputs, read from the frozen candidate (CPU) or mapped by the reference (GPU),
        checked by the reference in one exchange; the candidate stays frozen until the answer."""
        try:
            if len(done.outputs) != record.calls:
                raise end(rules.OUTPUTS_UNREADABLE, f"{len(done.outputs)} outputs for {record.calls} calls")
            if self.device == "cpu":
                outputs = FrozenReader(self.candidate, self.readback, self.ready).read(done, fd, self.stage)
                fds = [self.readback.fd]
            else:
                outputs, fds = refuse_aliased_inputs(done.outputs, inputs_ipc), []
            self.to_reference(m.Compare(record.number, outputs, self.atol, self.rtol), fds=fds)
            try:
                answer, _, _ = self.reference.receive(time.monotonic() + self.options.timeout_s + 60)
            except (TimeoutError, Died):
                raise end(rules.JUDGE_FAILED, "the reference process did not answer a comparison") from None
        finally:
            self.candidate.thaw()
        if not isinstance(answer, m.Compared):
            raise end(rules.JUDGE_FAILED, f"the reference process said {answer.kind!r}")
        if self.device != "cpu" and answer.last_checked_ns:
            self.readback_lag_ms = (answer.last_checked_ns - self.done_at) / 1e6
        if answer.inputs_modified:
            raise end(rules.INPUTS_MODIFIED, "forward wrote into its input tensors")
        trial = TrialResult(**answer.trial)
        if trial.lowered_precision:
            raise end(rules.PRECISION_LOST, f"call {answer.call + 1}: {trial.message}")
        if not trial.passed:
            self.failed_trial = (answer.call, trial)
            raise Mismatch(answer.call, trial)

    def seeds(self, n: int) -> list[int]:
        return [self.rng.randrange(2**31) for _ in range(n)]

    # correctness --------------------------------------------------------------------------------------------
    def correctness(self) -> None:
        self.stage = "correctness"
        started = time.monotonic()
        n = self.options.correctness_trials
        perturbed = [i >= n - self.options.perturbed_trials and self.job.perturb != "none" for i in range(n)]
        result = CorrectnessResult(passed=False, atol=self.atol, rtol=self.rtol)
        self.result.correctness = result
        self._check_fits(per_batch=1)
        seeds, per_batch = self.seeds(n), self._calls_that_fit(n, share=0.8)
        for first in range(0, n, per_batch):  # shipped-size tasks: as many sets at once as the device holds
            chunk = slice(first, first + per_batch)
            try:
                record = self.batch(seeds[chunk], perturbed[chunk])
            except Mismatch as mismatch:
                call = first + mismatch.call
                trial = mismatch.trial
                trial.index, trial.perturbed = call, perturbed[call]
                result.trials.append(trial)
                which = " (perturbed inputs)" if trial.perturbed else ""
                raise end(rules.INCORRECT, f"trial {call + 1}{which}: {trial.message}") from None
            self._require_own_kernels(record)
            if first == 0:
                self.first_batch = record
        result.trials = [TrialResult(i, perturbed[i], True) for i in range(n)]
        result.passed = True
        self.result.stage_s["correctness"] = round(time.monotonic() - started, 3)

    def _check_fits(self, per_batch: int) -> None:
        ready = self.ready
        if self.device != "cuda":
            return
        need = per_batch * self._bytes_per_call()
        free = ready.device_memory_bytes
        if free and need > free:
            raise end(rules.TOO_LARGE, f"one call needs about {need / 2**30:.1f} GiB with the judge's "
                                       f"copies; the device has {free / 2**30:.1f} GiB")

    def _require_own_kernels(self, record: _Batch) -> None:
        """The candidate's own count of calls into its kernels: on the CPU only where perf events are
        refused (the samples decide otherwise); the backward's count as it was."""
        counted_inside = self.device == "cpu" and not self.watch.judges_own_code()
        if counted_inside and record.own_kernel_calls < record.calls:
            raise end(rules.KERNEL_NOT_CALLED, "forward ran the solution's kernels "
                                               f"{record.own_kernel_calls} time(s) in {record.calls} calls")
        # Counted in the candidate's process by the same wrappers as above (native loaders, Triton launches).
        counted = self.device == "cpu" or self.job.backend == "triton"
        if self.job.backward and counted and 0 <= record.backward_kernel_calls < record.calls:
            raise end(rules.BACKWARD_NOT_OWN, "autograd's backward ran the solution's kernels "
                                              f"{record.backward_kernel_calls} time(s) in {record.calls} "
                                              "calls: the backward was left to PyTorch")

    # timing -------------------------------------------------------------------------------------------------
    def timing(self) -> None:
        self.stage = "timing"
        started = time.monotonic()
        options = self.options
        parts_before = dict(self.batch_parts_s)
        self._hold_candidate()  # the round trip, taken off both sides' times: the candidate cannot inflate it
        round_trip = self._round_trip_ms()
        calls = self._calls_per_batch(round_trip)
        # What needs no quiet GPU is done before the slot: the time it is held bounds the pool's rate.
        self._prepare_inputs(calls, options.warmup + min(5, options.timing_trials))
        self.result.stage_s["timing_prepare"] = round(time.monotonic() - started, 3)
        try:
            with locks.timing_slot(self.device, self.result.stage_s), self._on_timing_core() as moved:
                if moved:
                    round_trip = self._round_trip_ms()  # again where the batches run
                ref_ms, cand_ms, cpu_s, wall_s, repeat, reproduced = self._measure(calls, round_trip)
        finally:
            self._release_prepared()
        speedup, low, high = speedup_interval(ref_ms, cand_ms)
        timing = TimingResult(
            available=True, device=_device_label(self.device, options.threads), candidate=stats(cand_ms),
            reference=stats(ref_ms), speedup=round(speedup, 4), speedup_ci_low=round(low, 4),
            speedup_ci_high=round(high, 4), remeasured=bool(repeat), round_trip_ms=round(round_trip, 4),
            calls_per_batch=calls, batches=len(cand_ms),
            readback_lag_ms=getattr(self, "readback_lag_ms", None),
            cpu_past_clock_ms=round(self.past_clock_ms, 3) if self.device == "cpu" else None,
        )
        contended = self._contention(timing)
        timing.verified = low > options.threshold and reproduced and not contended
        self._roofline(timing)
        if options.compile_baseline:
            self._against_compile(timing)
        self.result.timing = timing
        self.result.stage_s["timing"] = round(time.monotonic() - started, 3)
        for name in _BATCH_PARTS:
            self.result.stage_s[f"timing_{name}"] = round(self.batch_parts_s[name] - parts_before[name], 3)
        if not reproduced:  # noise, not evidence: the speedup is simply not verified
            said = (f"an implausible speedup did not reproduce within {options.reproduce_tolerance:.0%}"
                    if repeat == "implausible" else
                    f"the speedup's interval cleared {options.threshold:g} in one timing but not in a second")
            self.result.reasons.append(reason(rules.NOT_REPRODUCED, f"{said}; both measurements are pooled, "
                                                                    "unverified"))
        self._check_cores(timing, cpu_s, wall_s)

    def _contention(self, timing: TimingResult) -> bool:
        """Records how long the sides waited for their cores while their batches were clocked, the larger
        share of the two (a load that falls on one side's batches moves the speedup most); True (and a
        reason) when it marks the timing contended: then no speedup is verified from it."""
        shares = [c.share() for c in self.contention.values() if c.share() is not None]
        if not shares:
            return False
        timing.cpu_wait_share = round(max(shares), 4)
        timing.contended = timing.cpu_wait_share > self.options.max_contention
        if timing.contended:
            self.result.reasons.append(reason(
                rules.CONTENDED, f"other processes held the timing's core(s) {sorted(self.cores)}: a side "
                                 f"waited for a CPU {timing.cpu_wait_share:.0%} of its timed batches' core "
                                 f"time (more than {self.options.max_contention:.0%}); the timing is marked "
                                 "contended and its speedup is not verified (judge it again on a quieter "
                                 "machine)"))
        return timing.contended

    @contextlib.contextmanager
    def _on_timing_core(self):
        """GPU: both processes on the core the pool keeps for the slot's holder while they are timed, then
        back (best effort: where the kernel refuses, they are timed on their own cores)."""
        core = self.pipeline.timing_core
        if core is None or self.device != "cuda":
            yield False
            return
        both = lambda: self.reference.tree() + self.candidate.tree()
        try:
            yield pin_threads(both, {core})
        finally:
            pin_threads(both, self.cores)

    def _measure(self, calls: int, round_trip: float) -> tuple:
        """Warm-up, the timed rounds, and a second timing where the first cannot be trusted alone: each
        side's per-call times (both timings pooled), the candidate's CPU and wall seconds, why it was
        repeated (or None) and whether the second agreed."""
        options = self.options
        with _timed_outputs_checked():
            for _ in range(options.warmup):
                self._next_batch(calls)
            if self.device == "cpu":  # from the first timed batch on, across a second timing too
                self.contention = {side: SideContention(len(self.cores))
                                   for side in ("reference", "candidate")}
            ref_ms, cand_ms, cpu_s, wall_s = self._rounds(calls, round_trip)
        speedup, low, _ = speedup_interval(ref_ms, cand_ms)
        repeat = second_timing_needed(speedup, low, options)
        if not repeat:
            return ref_ms, cand_ms, cpu_s, wall_s, None, True
        with _timed_outputs_checked():
            ref2, cand2, cpu2, wall2 = self._rounds(calls, round_trip)
        speedup2, low2, _ = speedup_interval(ref2, cand2)
        reproduced = second_timing_agrees(repeat, speedup, speedup2, low2, options)
        return ref_ms + ref2, cand_ms + cand2, cpu_s + cpu2, wall_s + wall2, repeat, reproduced

    def _against_compile(self, timing: TimingResult) -> None:
        folder = os.path.join(self.eval_dir, "compile_baseline")
        os.mkdir(folder)
        compile_ms, cached = self.pipeline.compile_baseline_ms(self.job, self.device, self.mode, folder)
        if compile_ms:
            timing.compile_ms, timing.compile_baseline_cached = round(compile_ms, 6), cached
            timing.speedup_vs_compile = round(compile_ms / max(timing.candidate.median_ms, 1e-9), 4)

    def _rounds(self, calls: int, round_trip: float) -> tuple[list[float], list[float], float, float]:
        """Timed batches, alternating which side goes first; per-call times less the fixed round trip."""
        options = self.options
        ref_ms: list[float] = []
        cand_ms: list[float] = []
        cpu_s = wall_s = spent = 0.0
        least = min(5, options.timing_trials)
        started = time.monotonic()
        for i in range(options.timing_trials):
            record = self._next_batch(calls, candidate_first=i % 2 == 1)
            self._require_own_kernels(record)
            clocked_ms = record.candidate_ms
            if record.cpu_ns_exact:  # its cgroup counted every thread to the ns: work past 'done' is charged
                charged = charged_batch_ms(clocked_ms, record.candidate_cpu_s, options.threads)
                self.past_clock_ms += charged - clocked_ms
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
            if self._samples_decide() and precise_enough(ref_ms, cand_ms, options):
                break
        return ref_ms, cand_ms, cpu_s, wall_s

    def _samples_decide(self) -> bool:
        """Whether the instruction pointers sampled so far can decide the own-code verdict. A fast task's
        timing was precise after a few batches of ~10 ms, whose samples (one per ms of CPU time, a third in
        glue) were too few: the candidate's in-process profile then decided, forgeable and noisy under load
        (honest tiny kernels judged `untracked_compute` in CI). More of the same timed batches decide it,
        within `timing_trials` and the time budget; the candidate cannot tell them apart."""
        return not self.watch.judges_own_code() or own_code.decides(self.watch.evidence,
                                                                    self.options.max_torch_share)

    def _next_batch(self, calls: int, candidate_first: bool = False) -> _Batch:
        prepared = self.prepared.pop(0) if self.prepared else None
        seeds = prepared.seeds if prepared else self.seeds(calls)
        return self.batch(seeds, [False] * calls, candidate_first, prepared=prepared)

    def _prepare_inputs(self, calls: int, count: int) -> None:
        """The input sets of the timing's first batches, made by the reference now, as far as memory allows:
        they stay in its own memory until their batch (the candidate still maps empty buffers, filled while
        it is frozen). On the H100 making them was half the slot's time for small tasks."""
        # the batch under way beside the prepared ones, all within what one batch may use
        count = min(count, self._memory_budget() // max(calls * self._bytes_per_call(), 1) - 1)
        for _ in range(max(count, 0)):
            self.batches += 1
            number, seeds = self.batches, self.seeds(calls)
            self.to_reference(m.MakeInputs(number, seeds, [False] * calls))
            inputs, fd = self._reference_inputs(number)
            self.prepared.append(_Prepared(number, seeds, inputs, fd))

    def _release_prepared(self) -> None:
        """Prepared batches the timing did not need (it stopped early, or ended the evaluation)."""
        for prepared in self.prepared:
            if prepared.fd is not None:
                os.close(prepared.fd)
            try:
                self.reference.send(m.Release(prepared.number))
            except Died:
                pass
        self.prepared = []

    def _calls_per_batch(self, round_trip_ms: float = 0.0) -> int:
        """Calls that fill a timed batch's target time, by the reference's time in the first batch (the
        candidate cannot inflate it), less the batch's fixed round trip where it is known."""
        first = self.first_batch
        per_call = max((first.reference_ms - round_trip_ms) / first.calls, 1e-4)
        target_ms = self.options.timing_batch_ms or (25.0 if self.device == "cuda" else 10.0)
        calls = int(min(self.options.max_calls_per_batch, max(1, round(target_ms / per_call))))
        return self._calls_that_fit(calls)

    def _round_trip_ms(self) -> float:
        """The fixed cost of a batch (messages, the harness's bookkeeping), measured on the reference's side:
        the candidate cannot inflate what is taken off its own times."""
        times = []
        for i in range(12):
            start = time.perf_counter_ns()
            self.to_reference(m.RunBatch(-1 - i))
            try:
                self.reference.receive(time.monotonic() + 30)
            except (TimeoutError, Died):
                raise end(rules.JUDGE_FAILED, "the reference process did not answer") from None
            times.append((time.perf_counter_ns() - start) / 1e6)
        return median(times[2:])  # the first two warm the path

    def _calls_that_fit(self, calls: int, share: float = 0.4) -> int:
        """Calls per batch that fit in the memory a batch may use."""
        return max(1, min(calls, self._memory_budget(share) // max(self._bytes_per_call(), 1)))

    def _bytes_per_call(self) -> int:
        """What one call holds: its input set INPUT_COPIES times and two sets of outputs (the reference's and
        the candidate's)."""
        return INPUT_COPIES * self.ready.input_bytes + 2 * self.ready.output_bytes

    def _memory_budget(self, share: float = 0.4) -> int:
        """The memory a batch may use: a share of the device's free memory (the CPU's is a flat 1 GiB)."""
        return (1 << 30) if self.device == "cpu" else int(share * (self.ready.device_memory_bytes or 8 << 30))

    def _check_cores(self, timing: TimingResult, cpu_s: float, wall_s: float) -> None:
        if self.device != "cpu" or wall_s <= 0:
            return
        ratio = cpu_s / wall_s
        timing.cpu_time_ratio = round(ratio, 3)
        allowed = self.options.threads * self.options.max_cpu_time_ratio
        # A cgroup counts to the ns; /proc/PID/stat in clock ticks: then judge only once there are enough.
        if (self.watch.cgroup is not None or wall_s > 0.25) and ratio > allowed:
            raise end(rules.EXTRA_CORES, f"the candidate's processes used {ratio:.2f} cores' worth of CPU "
                                         "time during its timed calls; the reference gets "
                                         f"{self.options.threads}")

    def _roofline(self, timing: TimingResult) -> None:
        from kernelgym.evaluation.roofline import Peaks, TaskCost, floor_ms

        ready = self.ready
        if not ready.peaks or ready.flops is None:
            return
        cost = TaskCost(float(ready.flops), float(ready.min_bytes))
        peaks = {k: v for k, v in ready.peaks.items() if k in Peaks.__dataclass_fields__}
        floor, bound = floor_ms(cost, Peaks(**peaks))
        timing.flops, timing.min_bytes = cost.flops, cost.min_bytes
        timing.floor_ms, timing.bound = round(floor, 6), bound
        if timing.candidate and timing.candidate.median_ms > 0:
            timing.roofline_fraction = round(floor / timing.candidate.median_ms, 4)

    def _candidate_cpu_s(self) -> float:
        """The candidate tree's CPU time so far: its cgroup's (to the ns, exited threads included), or the
        sum of its live processes' /proc/PID/stat (clock ticks) where no cgroup could be made."""
        if self.device != "cpu":
            return 0.0
        return self.watch.cpu_ns() / 1e9 if self.watch.cgroup is not None else self.candidate.cpu_seconds()

    def candidate_pids(self) -> list[int]:
        return [pid for pid in self.candidate.tree() if pid not in self.candidate.helpers]

    # own code (CPU) -------------------------------------------------------------------------------------
    def own_code(self) -> bool:
        """Whether the solution's own compiled code did the work, from the instruction pointers sampled in
        every candidate batch by this process (nothing the candidate reports is used). False when the
        samples are too few to decide: they are kept in the result, and the in-process profile decides."""
        evidence = self.watch.evidence
        self.result.profile = ProfileResult(
            coverage=round(evidence.share(own_code.OWN), 4),
            own_kernel_calls=self.first_batch.own_kernel_calls,
            samples=evidence.total, sampled_shares=evidence.summary(), top_files=evidence.top_paths(),
            top_ops=evidence.top_torch_ms())
        if not own_code.decides(evidence, self.options.max_torch_share):
            self.result.static.warnings.append(f"own code: {evidence.total} samples, too few to decide; "
                                               "the in-process profile decided")
            return False
        found = own_code.judge(evidence, self.options.max_torch_share)
        if found is not None:
            rule, message = found
            raise end(rules.TORCH_COMPUTE if rule == "torch" else rules.UNTRACKED_COMPUTE, message)
        return True

    # profile ------------------------------------------------------------------------------------------------
    def profile(self) -> None:
        self.stage = "profile"
        started = time.monotonic()
        # Without a timing stage, as many calls as a timed batch would hold: one tiny call measures mostly
        # noise, which on a loaded machine read as untracked work in an honest backward (CI: 0.148 ms, hack).
        timed_calls = self.result.timing.calls_per_batch if self.result.timing else None
        calls = timed_calls or self._calls_per_batch()
        with _timed_outputs_checked():
            record = self.batch(self.seeds(calls), [False] * calls, profile=True)
        data = record.profile
        profile = ProfileResult(
            coverage=data.get("coverage"), own_kernel_calls=int(data.get("own_kernel_calls", 0)),
            top_ops=[(str(k), float(v)) for k, v in data.get("top_ops", [])],
            heavy_torch_ops=[str(k) for k in data.get("heavy_torch_ops", [])],
        )
        sampled = self.result.profile  # samples too few to decide: still shown beside the profile's word
        if sampled is not None:
            profile.samples, profile.sampled_shares, profile.top_files = (
                sampled.samples, sampled.sampled_shares, sampled.top_files)
        self.result.profile = profile
        self.result.stage_s["profile"] = round(time.monotonic() - started, 3)
        found = judge_profile(data, calls, self.job.backend, self.options)
        if found is not None:
            raise end(*found)
        if record.launches is not None:
            self._judge_launches(record.launches, data)

    def _judge_launches(self, launches: LaunchCounts, data: dict) -> None:
        """The launches seen from outside, beside the candidate's own profile: recorded always; deciding
        only with `launch_rules` (not yet checked on a GPU host against honest solutions)."""
        self.result.profile.launches = launches.to_dict()
        if not launches.available:
            self.result.static.warnings.append(f"launch evidence: {launches.reason}; the candidate's own "
                                               "profile decided")
            return
        found = judge_launches(launches, data)
        if found is None:
            return
        rule, message = found
        if not self.options.launch_rules:
            self.result.static.warnings.append(f"launch evidence (not deciding): {message}")
            return
        raise end(rules.KERNEL_NOT_CALLED if rule == "not_own" else rules.TORCH_COMPUTE, message)

    # ncu ----------------------------------------------------------------------------------------------------
    def ncu(self) -> None:
        """Hardware counters per kernel, after the verdict (they inform; they never change it)."""
        from kernelgym.evaluation import ncu

        result = self.result
        if result.profile is None:
            result.profile = ProfileResult()
        if self.device != "cuda":
            result.profile.ncu_note = "ncu: Nsight Compute profiles GPU kernels; this ran on the CPU"
            return
        started = time.monotonic()
        job_dir = os.path.join(self.eval_dir, "ncu")
        os.mkdir(job_dir)
        spec = {"task_source": self.job.task_source, "solution_source": self.job.solution_source,
                "dtype": self.job.dtype, "init_seed": self.child_job.init_seed,
                "input_seed": self.seeds(1)[0], "perturb": self.job.perturb}
        with locks.device_lock(self.device):
            found, note = ncu.collect(job_dir, spec, self.pipeline.sandbox, self.options.ncu_timeout_s)
        result.profile.kernels, result.profile.ncu_note = found, note
        result.stage_s["ncu"] = round(time.monotonic() - started, 3)


@contextlib.contextmanager
def _timed_outputs_checked():
    """A wrong output after correctness passed: the candidate behaves differently when it matters."""
    try:
        yield
    except Mismatch as mismatch:
        raise end(rules.OUTPUTS_CHANGED, f"call {mismatch.call + 1} of a later batch returned wrong outputs "
                                         f"({mismatch.trial.message})") from None


def _tree_memory_bytes(sandbox) -> int | None:
    """One memory limit for the candidate's whole tree: its per-process limit, at most half the host's
    memory, so that no tree of children can exhaust the host (whose OOM kills are read as the judge's)."""
    if sandbox.tree_memory_limit_mb:
        return sandbox.tree_memory_limit_mb << 20
    if not sandbox.memory_limit_mb:
        return None
    try:
        host = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (OSError, ValueError):
        host = 0
    limit = sandbox.memory_limit_mb << 20
    return min(limit, host // 2) if host else limit


def evaluation_cores(threads: int, slot: int, spread: bool = False) -> set[int]:
    """The cores a reference and its candidate share: as many as the evaluation's threads, the next ones for
    the pool's next worker (by index: picked by pid, two workers could share a core and time each other).
    spread: a GPU evaluation where the pool keeps a core for timing (they are timed there): every core the
    worker may use, so that the two sides' start-up (each builds the task's model on the CPU) runs side by
    side rather than on one shared core."""
    available = sorted(os.sched_getaffinity(0))
    if spread:
        return set(available)
    start = (slot * threads) % len(available)
    return {available[(start + i) % len(available)] for i in range(min(threads, len(available)))}


def _device_label(device: str, threads: int) -> str:
    if device == "cuda":
        return "cuda"
    import platform

    return f"cpu ({platform.processor() or platform.machine()}), {threads} thread(s)"


def _no_timing_reason(mode: str, options: EvalOptions) -> str:
    if mode == "interpret":
        return "timing unavailable: no GPU, so the Triton kernels ran in the interpreter (correctness only)"
    if not options.timing:
        return "timing disabled by the caller"
    return "timing unavailable"


def trim_log(log: str, max_lines: int = 30) -> str:
    """The compiler lines that matter: errors first, with the line after each for context."""
    lines = [ln for ln in log.splitlines() if ln.strip()]
    important = [i for i, ln in enumerate(lines) if "error" in ln.lower()]
    if not important:
        return "\n".join(lines[-max_lines:])
    keep: list[int] = []
    for i in important:
        for j in (i, i + 1, i + 2):
            if j < len(lines) and j not in keep:
                keep.append(j)
    return "\n".join(lines[j] for j in keep[:max_lines])
