"""The evaluation pipeline, run in kernelgym's trusted worker process (which never imports candidate code).

static -> reference -> build + load -> correctness -> timing -> profile -> verdict, each stage a method that
returns or ends the evaluation with a `Reason` from the rules catalogue (evaluation/rules.py). The
conversation with the two evaluation processes is typed (workers/messages.py, whose docstring shows it).

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
import tempfile
import time
from dataclasses import dataclass, field

from kernelgym import backends, kernels
from kernelgym.evaluation import own_code, rules
from kernelgym.evaluation.compare import tolerance
from kernelgym.evaluation.job import EvalJob
from kernelgym.evaluation.options import EvalOptions
from kernelgym.evaluation.own_code import CandidateWatch
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
from kernelgym.evaluation.timing import Laps, TimingConfig, speedup_interval, stats
from kernelgym.stats import median
from kernelgym.workers import locks
from kernelgym.workers import messages as m
from kernelgym.workers.candidate_side import run_candidate
from kernelgym.workers.child import ChildJob
from kernelgym.workers.process import Died, EvalProcess
from kernelgym.workers.readback import Readback, slot_size
from kernelgym.workers.reference_side import run_reference
from kernelgym.workers.sandbox import SandboxConfig

ARENA_MARK = "kernelgym-inputs"
READ_ATTEMPTS = 10  # reads of a batch's outputs until one is made with no candidate thread running


class _Outcome(Exception):
    """Ends the pipeline early with a verdict."""

    def __init__(self, finding: Reason):
        super().__init__(str(finding))
        self.finding = finding


def _end(rule: rules.Rule, message: str = "") -> _Outcome:
    return _Outcome(reason(rule, message))


_BATCH_PARTS = ("inputs", "map", "run", "check")


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


# the pipeline -------------------------------------------------------------------------------------------

class Pipeline:
    """Evaluates jobs one at a time inside a worker. Holds the worker's knowledge of its machine."""

    def __init__(self, work_root: str, sandbox: SandboxConfig, has_gpu: bool, slot: int = 0):
        from kernelgym.evaluation.baselines import BaselineCache
        from kernelgym.evaluation.roofline import PeaksCache

        self.work_root = work_root
        self.sandbox = sandbox
        self.has_gpu = has_gpu
        self.slot = slot  # the worker's index in its pool: concurrent workers time on different cores
        self.baselines = BaselineCache(kernels.cache_root() / "baselines.json")
        self.peaks = PeaksCache(kernels.cache_root() / "peaks.json")

    def run(self, job: EvalJob) -> EvalResult:
        started = time.monotonic()
        result = EvalResult(task_id=job.task_id, backend=job.backend, size=job.size, verdict=Verdict.OK)
        eval_dir = tempfile.mkdtemp(prefix="eval-", dir=self.work_root)
        os.chmod(eval_dir, 0o711)
        try:
            if job.options.baseline_only:
                self._baseline(job, result, eval_dir)
            else:
                _Evaluation(self, job, result, eval_dir).run()
                if job.options.shapes == "heldout" and job.shape_limits and result.verdict is Verdict.OK:
                    self._heldout_shapes(job, result, eval_dir)
        except _Outcome as outcome:
            result.verdict = outcome.finding.verdict or Verdict.CRASH
            result.reasons.append(_dtype_named(outcome.finding, job))
            if result.timing is not None and result.verdict is not Verdict.OK:
                result.timing.verified = False
        finally:
            shutil.rmtree(eval_dir, ignore_errors=True)
        if self.has_gpu and _cuda_initialized_here():
            # Evidence in this trusted process, never the candidate's word: forked processes can no longer
            # use the GPU, so the verdict is the judge's failure and the worker must be replaced.
            result.verdict = Verdict.INFRASTRUCTURE_ERROR
            result.reasons.append(reason(rules.JUDGE_FAILED, "the worker's own process initialized CUDA"))
        result.wall_s = round(time.monotonic() - started, 3)
        return result

    def _heldout_shapes(self, job: EvalJob, result: EvalResult, eval_dir: str) -> None:
        """Correctness again at shapes the prompt never showed, drawn here within the task's limits, each in
        processes of its own (the constants change the init arguments as well as the inputs)."""
        import dataclasses

        from kernelgym.tasks.task import draw_shape_variant, substitute_constants

        started = time.monotonic()
        rng = _seed_source(job.options)
        options = dataclasses.replace(job.options, shapes="shown", timing=False, profile=False, ncu=False,
                                      compile_baseline=False, correctness_trials=2,
                                      perturbed_trials=min(1, job.options.perturbed_trials))
        result.heldout_shapes = []
        for index in range(job.options.heldout_variants):
            values = draw_shape_variant(job.task_source, job.shape_limits, rng)
            shape = ", ".join(f"{name}={value}" for name, value in values.items())
            variant = dataclasses.replace(job, task_source=substitute_constants(job.task_source, values),
                                          options=options, shape_limits={})
            checked = EvalResult(task_id=job.task_id, backend=job.backend, size=job.size, verdict=Verdict.OK)
            folder = os.path.join(eval_dir, f"heldout-{index}")
            os.mkdir(folder)
            try:
                _Evaluation(self, variant, checked, folder).run()
            except _Outcome as outcome:
                result.heldout_shapes.append({"constants": values, "passed": False})
                finding = outcome.finding
                said = f"held-out shape {shape}: {finding.rule}: {finding.message}"
                if finding.verdict in (Verdict.INCORRECT, Verdict.RUNTIME_ERROR, Verdict.CRASH):
                    raise _end(rules.HELDOUT_SHAPE, said) from None
                raise _Outcome(Reason(finding.rule, said)) from None
            result.heldout_shapes.append({"constants": values, "passed": True})
        result.stage_s["heldout_shapes"] = round(time.monotonic() - started, 3)

    def placement(self, backend: backends.Backend) -> tuple[str, str]:
        if backend.device == "cuda" and self.has_gpu:
            return "cuda", "run"
        if backend.device == "cuda":
            return "cpu", backend.without_gpu
        return "cpu", "run"

    def peaks_key(self, device: str, threads: int, dtype: str) -> str:
        """Peaks per machine, and per dtype beside float32 (a bf16 matmul peaks far higher on a GPU)."""
        key = self.fingerprint(device, threads)
        return key if dtype == "float32" else f"{key}|{dtype}"

    def fingerprint(self, device: str, threads: int) -> str:
        from kernelgym.evaluation.baselines import fingerprint

        return fingerprint(device, threads)

    def child_job(self, job: EvalJob, device: str, mode: str, seed_source) -> ChildJob:
        from dataclasses import asdict

        options = job.options
        peaks = self.peaks.get(self.peaks_key(device, options.threads, job.dtype))
        return ChildJob(
            task_source=job.task_source, solution_source=job.solution_source, backend=job.backend,
            device=device,
            mode=mode, dtype=job.dtype, init_seed=seed_source.randrange(2**31), perturb=job.perturb,
            threads=options.threads, cached_peaks=asdict(peaks) if peaks else None,
            timing_config=TimingConfig(trials=options.timing_trials, budget_s=options.timing_budget_s,
                                       subtract_sync_cost=options.subtract_sync_cost),
            backward=job.backward,
        )

    # baselines: the reference timed alone, in its own (trusted) process ----------------------------------
    def _baseline(self, job: EvalJob, result: EvalResult, eval_dir: str) -> None:
        options = job.options
        device, mode = self.placement(backends.get(job.backend))
        rng = _seed_source(options)
        child_job = self.child_job(job, device, mode, rng)
        child_job.trial_seeds = [rng.randrange(2**31) for _ in range(3)]
        child_job.perturbed = [False] * 3
        key = self.baseline_key(job, device)
        eager_ms, compile_ms = self.baselines.get("eager|" + key), self.baselines.get(key)
        cached = eager_ms is not None and (compile_ms is not None or not options.compile_baseline)
        if not cached or options.refresh_baseline:
            child_job.compile_baseline = options.compile_baseline
            kind, meta = self._time_reference_alone(child_job, eval_dir, device,
                                                    options.timeout_s
                                                    + (300 if options.compile_baseline else 0))
            if kind == "timeout":
                raise _end(rules.TIMEOUT, "timing the reference alone ran past its limit")
            if kind != "baseline":
                raise _end(rules.REFERENCE_FAILED, str(meta.get("message", kind))[:300])
            eager_ms = stats(meta["eager_ms"]).median_ms
            self.baselines.put("eager|" + key, eager_ms)
            if meta.get("compile_ms"):
                compile_ms = stats(meta["compile_ms"]).median_ms
                self.baselines.put(key, compile_ms)
        result.reasons.append(reason(rules.BASELINE_ONLY,
                                     "the reference was timed, no candidate was evaluated"))
        result.timing = TimingResult(available=True, device=device, baseline="eager", compile_ms=compile_ms,
                                     compile_baseline_cached=cached and not options.refresh_baseline)
        result.timing.reference = stats([eager_ms])


    def baseline_key(self, job: EvalJob, device: str) -> str:
        from kernelgym.tasks.task import content_hash

        fingerprint = self.fingerprint(device, job.options.threads)
        return f"{content_hash(job.task_source)[:24]}|{job.dtype}|{fingerprint}"

    def compile_baseline_ms(self, job: EvalJob, device: str, mode: str,
                            eval_dir: str) -> tuple[float | None, bool]:
        """torch.compile of the reference, timed alone in the reference's own process; cached per task and
        fingerprint. (ms or None, whether it came from the cache)."""
        key = self.baseline_key(job, device)
        cached = self.baselines.get(key)
        if cached is not None:
            return cached, True
        rng = _seed_source(job.options)
        child_job = self.child_job(job, device, mode, rng)
        child_job.trial_seeds, child_job.perturbed = [rng.randrange(2**31) for _ in range(3)], [False] * 3
        child_job.compile_baseline = True
        kind, meta = self._time_reference_alone(child_job, eval_dir, device, job.options.timeout_s + 300)
        if kind != "baseline" or not meta.get("compile_ms"):
            return None, False
        self.baselines.put("eager|" + key, stats(meta["eager_ms"]).median_ms)
        compile_ms = stats(meta["compile_ms"]).median_ms
        self.baselines.put(key, compile_ms)
        return compile_ms, False

    def _time_reference_alone(self, child_job: ChildJob, eval_dir: str, device: str, limit_s: float):
        from kernelgym.workers import protocol
        from kernelgym.workers.reference_side import run_baseline

        with _timing_slot(device):
            child = EvalProcess(run_baseline, child_job, eval_dir, self.sandbox, device == "cuda")
            try:
                child.hello(time.monotonic() + 60)
                child.sock.settimeout(limit_s)
                kind, meta, _ = protocol.recv(child.sock)
                return kind, meta
            except (TimeoutError, OSError, protocol.ProtocolError, Died):
                return "timeout", {}
            finally:
                child.close()


def _dtype_named(finding: Reason, job: EvalJob) -> Reason:
    """A failure of a run in another dtype than the task's own says so: a kernel written for float32 alone
    reads or writes half-precision tensors as floats."""
    if not job.options.dtype or job.dtype == "float32" or finding.verdict not in (
            Verdict.INCORRECT, Verdict.RUNTIME_ERROR, Verdict.CRASH):
        return finding
    return Reason(finding.rule, f"{finding.message} (this run's float inputs, parameters and outputs are "
                                f"{job.dtype}: dtype={job.options.dtype!r})")


def _cuda_initialized_here() -> bool:
    import torch

    return bool(torch.cuda.is_initialized())


def _seed_source(options: EvalOptions):
    import random

    return secrets.SystemRandom() if options.seed is None else random.Random(options.seed)


# one evaluation ---------------------------------------------------------------------------------------------

class _Evaluation:
    """The stages of one evaluation, in order; each returns or raises _Outcome."""

    def __init__(self, pipeline: Pipeline, job: EvalJob, result: EvalResult, eval_dir: str):
        self.pipeline, self.job, self.result, self.eval_dir = pipeline, job, result, eval_dir
        self.options = job.options
        self.backend = backends.get(job.backend)
        self.device, self.mode = pipeline.placement(self.backend)
        self.rng = _seed_source(self.options)
        self.child_job = pipeline.child_job(job, self.device, self.mode, self.rng)
        self.atol, self.rtol = tolerance(job.dtype, job.atol, job.rtol)
        self.reference: EvalProcess | None = None
        self.candidate: EvalProcess | None = None
        self.ready: m.Ready | None = None
        self.readback = Readback() if self.device == "cpu" else None
        self.batches = 0
        # Seconds of every batch's parts so far (inputs made, inputs mapped, both sides run, outputs checked):
        # the timing stage reports its own share, which is what holds the GPU's slot.
        self.batch_parts_s = dict.fromkeys(_BATCH_PARTS, 0.0)
        self.build_s, self.cached = 0.0, True
        self.stage = "load"  # the stage under way, named in timeouts and crashes
        self.cores = _cores(self.options.threads, pipeline.slot)  # the reference's and the candidate's
        # issue 28: the candidate's cgroup and the samples of its batches, taken from outside
        self.watch = CandidateWatch(self.device == "cpu", native=self.backend.device == "cpu")

    def run(self) -> None:
        try:
            self.static()
            self.start_reference()
            self.load_candidate()
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
            self.watch.close()
            if self.candidate is not None:
                self.result.output_tail = self.candidate.output_tail()
        if self.options.ncu and self.result.verdict is Verdict.OK:
            self.ncu()

    # static -------------------------------------------------------------------------------------------
    def static(self) -> None:
        self.result.static = static_check(self.job.solution_source, self.backend, self.job.dtype)
        if not self.result.static.passed:
            raise _Outcome(Reason.parse(self.result.static.reasons[0]))

    # reference --------------------------------------------------------------------------------------------
    def _spawn(self, target, name: str) -> EvalProcess:
        folder = os.path.join(self.eval_dir, name)
        os.mkdir(folder)
        joins = self.watch.make_cgroup(self.cores) if target is run_candidate else None
        return EvalProcess(target, self.child_job, folder, self.pipeline.sandbox, self.device == "cuda",
                           cores=self.cores, cgroup_files=joins)

    def start_reference(self) -> None:
        started = time.monotonic()
        self.reference = self._spawn(run_reference, "reference")
        job = self.child_job
        measuring_peaks = job.roofline and self.mode == "run" and job.cached_peaks is None
        if not measuring_peaks:  # the candidate's start-up (CUDA context, imports) overlaps the reference's
            self.candidate = self._spawn(run_candidate, "candidate")
        deadline = time.monotonic() + self.options.timeout_s + 60
        try:
            self.reference.hello(deadline)
            self.result.stage_s["reference_hello"] = round(time.monotonic() - started, 3)
            msg, _, _ = self.reference.receive(deadline)
        except TimeoutError:
            raise _end(rules.TIMEOUT, "the task's reference ran past its limit") from None
        except Died:
            raise _end(rules.JUDGE_FAILED, f"the reference process {self.reference.death()}") from None
        if isinstance(msg, m.Failed):
            raise _end(rules.REFERENCE_FAILED, f"the task's reference raised {msg.message[:300]}")
        if not isinstance(msg, m.Ready):
            raise _end(rules.JUDGE_FAILED, f"the reference process said {msg.kind!r}")
        self.ready = msg
        for part, seconds in (msg.startup_s or {}).items():
            if isinstance(seconds, int | float):
                self.result.stage_s[f"reference_{part}"] = round(float(seconds), 3)
        if msg.peaks and not self.child_job.cached_peaks:
            from kernelgym.evaluation.roofline import Peaks

            key = self.pipeline.peaks_key(self.device, self.options.threads, self.job.dtype)
            self.pipeline.peaks.put(key, Peaks(**msg.peaks))
        self.result.stage_s["reference"] = round(time.monotonic() - started, 3)

    # sending: a dead candidate is its own crash; a dead reference is the judge's failure -------------------
    def to_candidate(self, message: m.Message, fds=()) -> None:
        try:
            self.candidate.send(message, fds=fds)
        except Died:
            death = self.candidate.death()
            raise _end(rules.CRASH, f"the candidate's process {death} during {self.stage}") from None

    def to_reference(self, message: m.Message, fds=()) -> None:
        try:
            self.reference.send(message, fds=fds)
        except Died:
            raise _end(rules.JUDGE_FAILED, f"the reference process {self.reference.death()}") from None

    # the candidate's messages -------------------------------------------------------------------------------
    def receive(self, expected: type[m.Message], stage: str, limit_s: float) -> m.Message:
        """The candidate's next message of the expected type; build requests are served on the way."""
        deadline = time.monotonic() + limit_s
        while True:
            try:
                msg, _, fds = self.candidate.receive(deadline)
            except TimeoutError:
                raise _end(rules.TIMEOUT, f"the {stage} stage ran past its limit") from None
            except Died:
                raise _end(rules.CRASH,
                           f"the candidate's process {self.candidate.death()} during {stage}") from None
            for fd in fds:
                os.close(fd)
            if isinstance(msg, m.Build):  # a build gets the build limit in any stage, beside the stage's own
                started = time.monotonic()
                self.build(msg, started + self.options.build_timeout_s)
                deadline += time.monotonic() - started
            elif isinstance(msg, m.Failed):
                self.failed(msg)
            elif isinstance(msg, expected):
                return msg
            else:
                raise _end(rules.PROTOCOL, f"unexpected {msg.kind!r} during {stage}")

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
            raise _end(rules.COMPILE_ERROR, first)
        if msg.error_kind == "cuda":
            raise _end(rules.CUDA_ERROR, f"{msg.message[:300]} (during {stage}; the process is discarded)")
        if msg.error_kind == "contract":
            raise _end(rules.CONTRACT, msg.message)
        where = "; ".join(msg.frames)
        text = msg.message[:500] + (f" [{where}]" if where else "")
        if stage in ("load", "init"):
            self.result.build = BuildResult(True, round(self.build_s, 3), self.cached)
            self.result.load = LoadResult(False, error=msg.message[:2000])
            raise _end(rules.LOAD_ERROR, text)
        raise _end(rules.OUT_OF_MEMORY if msg.error_kind == "oom" else rules.RUNTIME_ERROR, text)

    # build + load -------------------------------------------------------------------------------------------
    def load_candidate(self) -> None:
        started = time.monotonic()
        if self.candidate is None:
            self.candidate = self._spawn(run_candidate, "candidate")
        try:
            hello = self.candidate.hello(time.monotonic() + 120)
        except (TimeoutError, Died):
            raise _end(rules.CRASH, "the candidate's process did not start") from None
        self.result.static.warnings.extend(hello.notes)
        self.result.static.warnings.extend(self.watch.check_joined())
        self.receive(m.Loaded, "load", self.options.build_timeout_s)
        self.result.build = BuildResult(True, round(self.build_s, 3), self.cached,
                                        runnable=self.mode != "compile")
        self.result.load = LoadResult(True, round(time.monotonic() - started - self.build_s, 3))
        self.result.stage_s["load"] = round(time.monotonic() - started, 3)
        if self.mode == "compile":
            raise _end(rules.NO_GPU, "the CUDA code compiled, but this machine has no GPU to run it")
        self.to_candidate(m.Construct(self.ready.init_args, self.child_job.init_seed))
        self.receive(m.Constructed, "init", self.options.timeout_s)
        if self.build_s > self.result.build.build_s:  # built in __init__ (many models' answers do)
            self.result.build = BuildResult(True, round(self.build_s, 3), self.cached)

    # batches ------------------------------------------------------------------------------------------------
    def batch(self, seeds: list[int], perturbed: list[bool], candidate_first: bool = False,
              profile: bool = False) -> _Batch:
        """One batch of fresh input sets through both sides, timed by this process, every output checked."""
        self.batches += 1
        record = _Batch(self.batches, len(seeds))
        part = Laps(self.batch_parts_s).lap
        self.to_reference(m.MakeInputs(record.number, seeds, perturbed))
        inputs, fd = self._reference_inputs(record.number)
        part("inputs")
        try:
            if inputs.ipc:  # GPU: the candidate maps the reference's input sets before the clock starts
                self.candidate.thaw()
                self.to_candidate(m.RunBatch(record.number, ipc=inputs.ipc, map_only=True))
                self.receive(m.BatchDone, self.stage, self.options.timeout_s)
            part("map")
            order = ("candidate", "reference") if candidate_first else ("reference", "candidate")
            done = None
            for side in order:
                if side == "reference":
                    self._hold_candidate()
                    record.reference_ms = self._run_reference(record.number, inputs, fd)
                else:
                    self.candidate.thaw()
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

    def _hold_candidate(self) -> None:
        """The candidate is frozen whenever the reference runs. They share cores (and the GPU), so a live
        candidate, a thread that spins or launches kernels while its own process waits, would slow the
        reference and look faster. (GPU work it queued before the freeze still runs: see threat-model.md.)"""
        if not self.candidate.frozen:
            self.candidate.freeze()

    def _reference_inputs(self, number: int) -> tuple[m.Inputs, int | None]:
        try:
            msg, _, fds = self.reference.receive(time.monotonic() + self.options.timeout_s + 60)
        except (TimeoutError, Died):
            raise _end(rules.JUDGE_FAILED, "the reference process did not make the inputs") from None
        if isinstance(msg, m.Failed) and msg.error_kind == "oom":
            raise _end(rules.TOO_LARGE, f"the task's inputs do not fit: {msg.message[:200]}")
        if not isinstance(msg, m.Inputs) or msg.batch != number:
            raise _end(rules.JUDGE_FAILED, f"the reference process said {msg.kind!r}")
        return msg, (fds[0] if fds else None)

    def _run_reference(self, number: int, inputs: m.Inputs, fd: int | None) -> float:
        message = m.RunBatch(number, layout=inputs.layout)
        self.watch.start_reference(self.reference.main_pid)  # the same timer interrupts as the candidate
        start = time.perf_counter_ns()
        self.to_reference(message, fds=[fd] if fd is not None else ())
        try:
            msg, _, _ = self.reference.receive(time.monotonic() + self.options.timeout_s + 60)
        except (TimeoutError, Died):
            raise _end(rules.JUDGE_FAILED, "the reference process did not finish a batch") from None
        elapsed = (time.perf_counter_ns() - start) / 1e6
        self.watch.discard()
        if not isinstance(msg, m.BatchDone):
            raise _end(rules.JUDGE_FAILED,
                       f"the reference failed on a batch: {getattr(msg, 'message', msg.kind)[:300]}")
        return elapsed

    def _run_candidate(self, record: _Batch, inputs: m.Inputs, fd: int | None, profile: bool) -> m.BatchDone:
        message = m.RunBatch(record.number, layout=inputs.layout, ipc=inputs.ipc, profile=profile)
        cpu_before = self._candidate_cpu_s()
        if self.watch.judges_own_code():
            self.watch.start(self.candidate_pids(), self.cores)
        start = time.perf_counter_ns()
        self.to_candidate(message, fds=[fd] if fd is not None else ())
        done = self.receive(m.BatchDone, self.stage, self.options.timeout_s)
        record.candidate_ms = (time.perf_counter_ns() - start) / 1e6
        self.done_at = time.perf_counter_ns()
        if self.device == "cpu":
            # Frozen at 'done': a thread still writing now leaves its outputs unfinished for the read below.
            self.candidate.freeze()
            record.candidate_cpu_s = self._candidate_cpu_s() - cpu_before
            record.cpu_ns_exact = self.watch.cgroup is not None
            self.watch.take(record.candidate_cpu_s)
            outside = self.candidate.cpus_seen() - self.cores
            if outside:  # the kernel's own record: a thread was allowed on, or ran on, another core
                raise _end(rules.EXTRA_CORES, f"the candidate's threads reached cores {sorted(outside)}, "
                                              f"beyond the {len(self.cores)} the reference gets")
        record.own_kernel_calls, record.profile = int(done.own_kernel_calls), dict(done.profile or {})
        record.backward_kernel_calls = int(done.backward_kernel_calls)
        if done.precision_lowered:
            raise _end(rules.PRECISION_DOWNGRADE, "TF32 or reduced-precision matmul was switched on"
                       if self.job.dtype == "float32" else
                       f"half-precision reductions were switched on for a {self.job.dtype} run")
        return done

    def _check(self, record: _Batch, done: m.BatchDone, fd: int | None, inputs_ipc: list | None) -> None:
        """Every call's outputs, read from the frozen candidate (CPU) or mapped by the reference (GPU),
        checked by the reference in one exchange; the candidate stays frozen until the answer."""
        try:
            if len(done.outputs) != record.calls:
                raise _end(rules.OUTPUTS_UNREADABLE, f"{len(done.outputs)} outputs for {record.calls} calls")
            if self.device == "cpu":
                outputs, fds = self._outputs_from_frozen(done, fd), [self.readback.fd]
            else:
                outputs, fds = _refuse_aliased_inputs(done.outputs, inputs_ipc), []
            self.to_reference(m.Compare(record.number, outputs, self.atol, self.rtol), fds=fds)
            try:
                answer, _, _ = self.reference.receive(time.monotonic() + self.options.timeout_s + 60)
            except (TimeoutError, Died):
                raise _end(rules.JUDGE_FAILED, "the reference process did not answer a comparison") from None
        finally:
            self.candidate.thaw()
        if not isinstance(answer, m.Compared):
            raise _end(rules.JUDGE_FAILED, f"the reference process said {answer.kind!r}")
        if self.device != "cpu" and answer.last_checked_ns:
            self.readback_lag_ms = (answer.last_checked_ns - self.done_at) / 1e6
        if answer.inputs_modified:
            raise _end(rules.INPUTS_MODIFIED, "forward wrote into its input tensors")
        trial = TrialResult(**answer.trial)
        if trial.lowered_precision:
            raise _end(rules.PRECISION_LOST, f"call {answer.call + 1}: {trial.message}")
        if not trial.passed:
            self.failed_trial = (answer.call, trial)
            raise _Mismatch(answer.call, trial)

    def _outputs_from_frozen(self, done: m.BatchDone, fd: int | None) -> list[list[dict]]:
        """CPU: the input arena as the kernel's page tables show it, then every output copied out, while no
        thread of the candidate runs: if one spent time on a CPU during the read (a stop still pending),
        the read is made again once the stops have landed. Whatever the read finds against a candidate that
        died meanwhile is a crash: a killed process loses its mappings and memory before it is a zombie."""
        try:
            return self._read_frozen(done, fd)
        except _Outcome:
            self._crash_if_dead()
            raise

    def _read_frozen(self, done: m.BatchDone, fd: int | None) -> list[list[dict]]:
        for _ in range(READ_ATTEMPTS):
            before = self.candidate.on_cpu_ns()
            try:
                arena = self._arena(fd)
                written = self.candidate.written_pages(arena)
            except OSError as exc:
                raise _end(rules.OUTPUTS_UNREADABLE,
                           f"the candidate's memory could not be inspected ({exc})") from None
            if written:
                raise _end(rules.INPUTS_MODIFIED, "forward wrote into its input tensors")
            outputs = self._read_outputs(done, arena)
            if self.candidate.on_cpu_ns() == before:
                return outputs
            self.candidate.wait_stopped(1.0)
        raise _end(rules.OUTPUTS_UNREADABLE, "the candidate's threads kept running while its outputs were "
                                             "read")

    def _crash_if_dead(self) -> None:
        if not self.candidate.alive():
            raise _end(rules.CRASH, f"the candidate's process {self.candidate.death()} during {self.stage}")

    def _arena(self, fd: int | None) -> list[tuple[int, int]]:
        """Where this batch's input arena is mapped in the candidate: the sealed file's own pages, privately
        and whole (a mapping of another file under its name, or a hole, would hide writes to the inputs)."""
        if fd is None:
            return []
        sealed = os.fstat(fd)
        mine = [(lo, hi, perms) for lo, hi, perms, inode in self.candidate.mappings_of(ARENA_MARK)
                if inode == sealed.st_ino]
        if sealed.st_size and (sum(hi - lo for lo, hi, _ in mine) < sealed.st_size
                               or any(perms[3:4] != "p" for _, _, perms in mine)):
            raise _end(rules.INPUTS_MODIFIED, "forward unmapped, replaced or shared its input buffers")
        return [(lo, hi) for lo, hi, _ in mine]

    def _read_outputs(self, done: m.BatchDone, arena: list[tuple[int, int]]) -> list[list[dict]]:
        """Each output copied out of the candidate's memory into the readback buffer the reference maps,
        after every description was checked (how many, how large, where)."""
        planned = [self._planned(metas, arena) for metas in done.outputs]
        sizes = [item["nbytes"] for call in planned for item in call if "ptr" in item]
        self.readback.reset(sum(slot_size(n) for n in sizes))
        return [[self._read_one(item) for item in call] for call in planned]

    def _planned(self, metas, arena: list[tuple[int, int]]) -> list[dict]:
        expected = int(self.ready.outputs_per_call)
        if not isinstance(metas, list) or len(metas) != expected:
            count = len(metas) if isinstance(metas, list) else "no list of"
            return [{"error": f"forward returned {count} outputs, expected {expected}"}]
        # A call's outputs are read up to twice the reference's bytes: a float64 answer to a float32 task
        # still reaches the comparison, which names the dtype; anything larger is no answer.
        room, planned = 2 * int(self.ready.output_bytes), []
        for meta in metas:
            item = _described(meta)
            if "ptr" in item:
                room -= item["nbytes"]
                if room < 0:
                    item = {"error": "its outputs are over twice the size of the reference's"}
                elif any(lo < item["ptr"] + max(item["nbytes"], 1) and item["ptr"] < hi for lo, hi in arena):
                    raise _end(rules.OUTPUT_ALIASES_INPUT, "an output shares memory with an input")
            planned.append(item)
        return planned

    def _read_one(self, item: dict) -> dict:
        if "ptr" not in item:
            return item
        offset, slot = self.readback.take(item["nbytes"])
        try:
            self.candidate.read_into(item["ptr"], slot)
        except (OSError, ValueError, OverflowError) as exc:
            raise _end(rules.OUTPUTS_UNREADABLE, f"an output could not be read ({exc})") from None
        finally:
            slot.release()
        return {"dtype": item["dtype"], "shape": item["shape"], "offset": offset, "nbytes": item["nbytes"]}

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
            except _Mismatch as mismatch:
                call = first + mismatch.call
                trial = mismatch.trial
                trial.index, trial.perturbed = call, perturbed[call]
                result.trials.append(trial)
                which = " (perturbed inputs)" if trial.perturbed else ""
                raise _end(rules.INCORRECT, f"trial {call + 1}{which}: {trial.message}") from None
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
        need = per_batch * (3 * ready.input_bytes + 2 * ready.output_bytes)
        free = ready.device_memory_bytes
        if free and need > free:
            raise _end(rules.TOO_LARGE, f"one call needs about {need / 2**30:.1f} GiB with the judge's "
                                        f"copies; the device has {free / 2**30:.1f} GiB")

    def _require_own_kernels(self, record: _Batch) -> None:
        """The candidate's own count of calls into its kernels: on the CPU only where perf events are
        refused (the samples decide otherwise); the backward's count as it was."""
        counted_inside = self.device == "cpu" and not self.watch.judges_own_code()
        if counted_inside and record.own_kernel_calls < record.calls:
            raise _end(rules.KERNEL_NOT_CALLED, "forward ran the solution's kernels "
                                                f"{record.own_kernel_calls} time(s) in {record.calls} calls")
        # Counted in the candidate's process by the same wrappers as above (native loaders, Triton launches).
        counted = self.device == "cpu" or self.job.backend == "triton"
        if self.job.backward and counted and 0 <= record.backward_kernel_calls < record.calls:
            raise _end(rules.BACKWARD_NOT_OWN, "autograd's backward ran the solution's kernels "
                                               f"{record.backward_kernel_calls} time(s) in {record.calls} "
                                               "calls: the backward was left to PyTorch")

    # timing -------------------------------------------------------------------------------------------------
    def timing(self) -> None:
        self.stage = "timing"
        started = time.monotonic()
        options = self.options
        parts_before = dict(self.batch_parts_s)
        with _timing_slot(self.device, self.result.stage_s):  # one evaluation at a time measures
            self._hold_candidate()  # the round trip, taken off both sides' times, is measured undisturbed
            round_trip = self._round_trip_ms()
            per_call = max((self.first_batch.reference_ms - round_trip) / self.first_batch.calls, 1e-4)
            target_ms = options.timing_batch_ms or (25.0 if self.device == "cuda" else 10.0)
            calls = int(min(options.max_calls_per_batch, max(1, round(target_ms / per_call))))
            calls = self._calls_that_fit(calls)
            with _timed_outputs_checked():
                for _ in range(options.warmup):
                    self.batch(self.seeds(calls), [False] * calls)
                ref_ms, cand_ms, cpu_s, wall_s = self._rounds(calls, round_trip)
            speedup, low, high = speedup_interval(ref_ms, cand_ms)
            remeasured, reproduced = False, True
            repeat = second_timing_needed(speedup, low, options)
            if repeat:
                with _timed_outputs_checked():
                    ref2, cand2, cpu2, wall2 = self._rounds(calls, round_trip)
                speedup2, low2, _ = speedup_interval(ref2, cand2)
                remeasured = True
                reproduced = second_timing_agrees(repeat, speedup, speedup2, low2, options)
                ref_ms, cand_ms, cpu_s, wall_s = ref_ms + ref2, cand_ms + cand2, cpu_s + cpu2, wall_s + wall2
                speedup, low, high = speedup_interval(ref_ms, cand_ms)
        timing = TimingResult(
            available=True, device=_device_label(self.device, options.threads), candidate=stats(cand_ms),
            reference=stats(ref_ms), speedup=round(speedup, 4), speedup_ci_low=round(low, 4),
            speedup_ci_high=round(high, 4), remeasured=remeasured, round_trip_ms=round(round_trip, 4),
            calls_per_batch=calls, batches=len(cand_ms),
            readback_lag_ms=getattr(self, "readback_lag_ms", None),
        )
        timing.verified = low > options.threshold and reproduced
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
            record = self.batch(self.seeds(calls), [False] * calls, candidate_first=i % 2 == 1)
            self._require_own_kernels(record)
            ref_ms.append(max(record.reference_ms - round_trip, 1e-6) / calls)
            cand_ms.append(max(record.candidate_ms - round_trip, 1e-6) / calls)
            cpu_s += record.candidate_cpu_s
            wall_s += record.candidate_ms / 1e3
            spent += max(record.reference_ms, record.candidate_ms) / 1e3
            # The budget is the measured time per side; the stage's wall time (fresh inputs, the checks of
            # every output) is held to a few times that. The GPU's slot is held meanwhile, so a timing also
            # stops once it is precise enough to decide the verdict and the reward.
            if i + 1 >= least and (spent > options.timing_budget_s
                                   or time.monotonic() - started > 3 * options.timing_budget_s
                                   or precise_enough(ref_ms, cand_ms, options)):
                break
        return ref_ms, cand_ms, cpu_s, wall_s

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
                raise _end(rules.JUDGE_FAILED, "the reference process did not answer") from None
            times.append((time.perf_counter_ns() - start) / 1e6)
        return median(times[2:])  # the first two warm the path

    def _calls_that_fit(self, calls: int, share: float = 0.4) -> int:
        """Calls per batch that fit: each holds an input set (and, on the GPU, the reference's private copy)
        and two sets of outputs (the reference's and the candidate's)."""
        ready = self.ready
        per_call = 3 * ready.input_bytes + 2 * ready.output_bytes
        budget = (1 << 30) if self.device == "cpu" else int(share * (ready.device_memory_bytes or 8 << 30))
        return max(1, min(calls, budget // max(per_call, 1)))

    def _check_cores(self, timing: TimingResult, cpu_s: float, wall_s: float) -> None:
        if self.device != "cpu" or wall_s <= 0:
            return
        ratio = cpu_s / wall_s
        timing.cpu_time_ratio = round(ratio, 3)
        allowed = self.options.threads * self.options.max_cpu_time_ratio
        # A cgroup counts to the ns; /proc/PID/stat in clock ticks: then judge only once there are enough.
        if (self.watch.cgroup is not None or wall_s > 0.25) and ratio > allowed:
            raise _end(rules.EXTRA_CORES, f"the candidate's processes used {ratio:.2f} cores' worth of CPU "
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
            raise _end(rules.TORCH_COMPUTE if rule == "torch" else rules.UNTRACKED_COMPUTE, message)
        return True

    # profile ------------------------------------------------------------------------------------------------
    def profile(self) -> None:
        self.stage = "profile"
        started = time.monotonic()
        calls = (self.result.timing.calls_per_batch if self.result.timing else None) or 1
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
        if profile.own_kernel_calls == 0:
            raise _end(rules.KERNEL_NOT_CALLED,
                       f"the profiled calls ran none of the solution's {self.job.backend} kernels")
        heavy = [str(op) for op in data.get("heavy_ops_called", [])]
        if heavy:
            raise _end(rules.TORCH_COMPUTE,
                       f"forward left the heavy work to PyTorch ({', '.join(heavy[:3])})")
        untracked = float(data.get("untracked_ms", 0.0)) / calls
        untracked_share = float(data.get("untracked_share", 0.0))
        if untracked > self.options.min_untracked_ms and untracked_share > self.options.max_untracked_share:
            raise _end(rules.UNTRACKED_COMPUTE, f"{untracked:.3g} ms of each call ran in neither the "
                                                "solution's own kernels nor PyTorch (another library, or "
                                                "hidden work)")
        share = float(data.get("torch_compute_share", 0.0))
        if share > self.options.max_torch_share:
            ops = ", ".join(profile.heavy_torch_ops[:3]) or "PyTorch ops"
            raise _end(rules.TORCH_COMPUTE, f"{share:.0%} of the candidate's time is PyTorch compute "
                                            f"({ops}), not its own kernels")

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


def _refuse_aliased_inputs(outputs: list, inputs_ipc: list | None) -> list:
    """GPU outputs travel as IPC handles: one naming an allocation the reference exported for the inputs
    is an input handed back (A10), whatever the candidate's process says of it."""
    sent = {item["ipc"].get("handle") for call in inputs_ipc or [] for item in call
            if isinstance(item, dict) and isinstance(item.get("ipc"), dict)}
    for call in outputs:
        for meta in call if isinstance(call, list) else []:
            if not isinstance(meta, dict):
                continue
            ipc = meta.get("ipc")
            if meta.get("aliases_input") is True or (isinstance(ipc, dict) and ipc.get("handle") in sent):
                raise _end(rules.OUTPUT_ALIASES_INPUT, "an output shares memory with an input")
    return outputs


def _described(meta) -> dict:
    """An output as the candidate described it, in plain checked numbers, or an error that says why not."""
    if not isinstance(meta, dict):
        return {"error": "the output is not described"}
    if "error" in meta or "ptr" not in meta:
        return {"error": str(meta.get("error", "the output is not readable"))[:300]}
    try:
        item = {"ptr": int(meta["ptr"]), "nbytes": int(meta["nbytes"]), "dtype": str(meta["dtype"]),
                "shape": [int(s) for s in meta["shape"]]}
    except (KeyError, TypeError, ValueError):
        return {"error": "the output's description is malformed"}
    if item["ptr"] < 0 or item["nbytes"] < 0 or any(s < 0 for s in item["shape"]):
        return {"error": "the output's description is malformed"}
    return item


@contextlib.contextmanager
def _timing_slot(device: str, stage_s: dict | None = None):
    """A GPU is one shared device: concurrent evaluations would time each other's kernels. On the CPU each
    worker's processes are pinned to cores of their own, so timing runs concurrently there. Seconds spent
    waiting for the slot and holding it go to `stage_s` (the slot's busy share is measured from them)."""
    if device != "cuda":
        yield
        return
    asked = time.monotonic()
    with locks.device_lock(device):
        got = time.monotonic()
        try:
            yield
        finally:
            if stage_s is not None:
                for key, seconds in (("slot_wait", got - asked), ("slot_held", time.monotonic() - got)):
                    stage_s[key] = round(stage_s.get(key, 0.0) + seconds, 3)


@contextlib.contextmanager
def _timed_outputs_checked():
    """A wrong output after correctness passed: the candidate behaves differently when it matters."""
    try:
        yield
    except _Mismatch as mismatch:
        raise _end(rules.OUTPUTS_CHANGED, f"call {mismatch.call + 1} of a later batch returned wrong outputs "
                                          f"({mismatch.trial.message})") from None


class _Mismatch(Exception):
    def __init__(self, call: int, trial: TrialResult):
        super().__init__(trial.message)
        self.call, self.trial = call, trial


def _cores(threads: int, slot: int) -> set[int]:
    """The cores a reference and its candidate share: as many as the evaluation's threads, the next ones for
    the pool's next worker (by index: picked by pid, two workers could share a core and time each other)."""
    available = sorted(os.sched_getaffinity(0))
    start = (slot * threads) % len(available)
    return {available[(start + i) % len(available)] for i in range(min(threads, len(available)))}


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
