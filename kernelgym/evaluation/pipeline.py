"""The evaluation pipeline, run in kernelgym's trusted worker process (which never imports candidate code).

static check -> reference (own process) -> build + load -> correctness -> timing -> profile -> verdict.
Each stage returns early with a verdict; `reasons` names every rule that decided it.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
import time
from dataclasses import dataclass, field

import kernelgym.kernels as kernels
from kernelgym import backends
from kernelgym.evaluation.compare import tolerance
from kernelgym.evaluation.options import EvalOptions
from kernelgym.evaluation.result import (
    BuildResult, CorrectnessResult, EvalResult, LoadResult, ProfileResult, StaticResult, TimingResult, TrialResult,
    Verdict,
)
from kernelgym.evaluation.static import static_check
from kernelgym.evaluation.timing import TimingConfig, speedup_interval, stats
from kernelgym.workers import protocol
from kernelgym.workers.child import INPUT_SETS_FOR_TIMING, SPOT_CHECKS, ChildJob, run_candidate, run_reference
from kernelgym.workers.process import Died, EvalProcess
from kernelgym.workers.sandbox import SandboxConfig

@dataclass
class EvalJob:
    """One evaluation as the pool hands it to a worker (plain data)."""

    task_id: str
    task_source: str  # at the chosen size
    dtype: str
    atol: float | None
    rtol: float | None
    perturb: str
    solution_source: str
    backend: str
    size: str
    options: EvalOptions = field(default_factory=EvalOptions)


class _Outcome(Exception):
    """Ends the pipeline early with a verdict."""

    def __init__(self, verdict: Verdict, *reasons: str):
        super().__init__(verdict.value)
        self.verdict = verdict
        self.reasons = list(reasons)


# the pipeline -------------------------------------------------------------------------------------------

class Pipeline:
    """Evaluates jobs one at a time inside a worker. Holds the worker's knowledge of its machine."""

    def __init__(self, work_root: str, sandbox: SandboxConfig, has_gpu: bool):
        from kernelgym.evaluation.baselines import BaselineCache

        self.work_root = work_root
        self.sandbox = sandbox
        self.has_gpu = has_gpu
        from kernelgym.evaluation.roofline import PeaksCache

        self.baselines = BaselineCache(kernels.cache_root() / "baselines.json")
        self.peaks = PeaksCache(kernels.cache_root() / "peaks.json")

    def run(self, job: EvalJob) -> EvalResult:
        started = time.monotonic()
        result = EvalResult(task_id=job.task_id, backend=job.backend, size=job.size, verdict=Verdict.OK)
        eval_dir = tempfile.mkdtemp(prefix="eval-", dir=self.work_root)
        os.chmod(eval_dir, 0o711)  # an unprivileged candidate must reach its own folder inside, not list others
        try:
            self._stages(job, result, eval_dir)
        except _Outcome as outcome:
            result.verdict = outcome.verdict
            result.reasons.extend(outcome.reasons)
        finally:
            shutil.rmtree(eval_dir, ignore_errors=True)
        result.wall_s = round(time.monotonic() - started, 3)
        return result

    def _stages(self, job: EvalJob, result: EvalResult, eval_dir: str) -> None:
        backend = backends.get(job.backend)
        options = job.options
        if options.baseline_only:
            return self._baseline(job, result, eval_dir, backend)
        result.static = static_check(job.solution_source, backend, job.dtype)
        if not result.static.passed:
            raise _Outcome(_static_verdict(result.static), *result.static.reasons)
        device, mode = self._placement(backend)
        atol, rtol = tolerance(job.dtype, job.atol, job.rtol)
        child_job = self._child_job(job, device, mode)
        started = time.monotonic()
        reference = self._spawn(run_reference, child_job, eval_dir, "reference")
        # The candidate's process starts (fork, sandbox, CUDA context) while the reference computes; it waits
        # for "go" before it times anything, so the two never share the device while one is measured. Not
        # while the reference measures the machine's peaks (once per machine): those must be measured alone.
        measuring_peaks = child_job.roofline and child_job.mode == "run" and child_job.cached_peaks is None
        candidate = None if measuring_peaks else self._spawn(run_candidate, child_job, eval_dir, "candidate")
        try:
            judge = self._await_reference(reference, child_job, options)
        except _Outcome:
            if candidate is not None:
                candidate.close()
            raise
        candidate = candidate or self._spawn(run_candidate, child_job, eval_dir, "candidate")
        result.stage_s["reference"] = round(time.monotonic() - started, 3)
        try:
            if child_job.timing:
                try:
                    candidate.send("go")
                except Died:  # it already ended; the session reads why
                    pass
            self._candidate(job, child_job, _Judge(judge, atol, rtol, options.timeout_s), result, candidate, mode)
        finally:
            judge.close()
        if options.ncu:
            self._ncu(job, child_job, result, eval_dir, device)

    def _ncu(self, job: EvalJob, child_job: ChildJob, result: EvalResult, eval_dir: str, device: str) -> None:
        """Hardware counters per kernel, after the verdict (they inform; they never change it)."""
        from kernelgym.evaluation import ncu
        from kernelgym.workers.locks import device_lock

        if result.profile is None:
            result.profile = ProfileResult()
        if device != "cuda":
            result.profile.ncu_note = "ncu: Nsight Compute profiles GPU kernels; this evaluation ran on the CPU"
            return
        started = time.monotonic()
        job_dir = os.path.join(eval_dir, "ncu")
        os.mkdir(job_dir)
        spec = {"task_source": job.task_source, "solution_source": job.solution_source, "dtype": job.dtype,
                "init_seed": child_job.init_seed, "input_seed": child_job.trial_seeds[0], "perturb": job.perturb}
        with device_lock(device):  # kernel replays would disturb another evaluation's timing
            found, note = ncu.collect(job_dir, spec, self.sandbox, job.options.ncu_timeout_s)
        result.profile.kernels, result.profile.ncu_note = found, note
        result.stage_s["ncu"] = round(time.monotonic() - started, 3)

    def _placement(self, backend: backends.Backend) -> tuple[str, str]:
        if backend.device == "cuda" and self.has_gpu:
            return "cuda", "run"
        if backend.device == "cuda":
            return "cpu", backend.without_gpu
        return "cpu", "run"

    def _child_job(self, job: EvalJob, device: str, mode: str) -> ChildJob:
        options = job.options
        rng = secrets.SystemRandom() if options.seed is None else __import__("random").Random(options.seed)
        n = options.correctness_trials
        perturbed = [i >= n - options.perturbed_trials and job.perturb != "none" for i in range(n)]
        return ChildJob(
            task_source=job.task_source, solution_source=job.solution_source, backend=job.backend, device=device,
            mode=mode, dtype=job.dtype, init_seed=rng.randrange(2**31), trial_seeds=[rng.randrange(2**31) for _ in range(n)],
            perturbed=perturbed, perturb=job.perturb, timing=options.timing and mode == "run",
            timing_config=TimingConfig(trials=options.timing_trials, warmup=options.warmup,
                                       budget_s=options.timing_budget_s, subtract_sync_cost=options.subtract_sync_cost),
            profile=options.profile, threads=options.threads,
            compile_baseline=options.compile_baseline and mode == "run" and options.timing,
            cached_peaks=self._cached_peaks(device, options.threads),
            cached_compile_ms=self.baselines.get(self._baseline_key(job, device)) if options.compile_baseline else None,
        )

    def _cached_peaks(self, device: str, threads: int) -> dict | None:
        from dataclasses import asdict

        from kernelgym.evaluation.baselines import fingerprint

        peaks = self.peaks.get(fingerprint(device, threads))
        return asdict(peaks) if peaks else None

    def _baseline_key(self, job: EvalJob, device: str) -> str:
        from kernelgym.evaluation.baselines import fingerprint
        from kernelgym.tasks.task import content_hash

        return f"{content_hash(job.task_source)[:24]}|{job.dtype}|{fingerprint(device, job.options.threads)}"

    # baselines -------------------------------------------------------------------------------------------
    def _baseline(self, job: EvalJob, result: EvalResult, eval_dir: str, backend: backends.Backend) -> None:
        """Reference times per task and fingerprint, cached: `kernelgym baseline` and compile baselines."""
        from kernelgym.workers.child import run_baseline

        options = job.options
        device, mode = self._placement(backend)
        child_job = self._child_job(job, device, mode)
        key = self._baseline_key(job, device)
        eager_ms, compile_ms = self.baselines.get("eager|" + key), self.baselines.get(key)
        cached = eager_ms is not None and (compile_ms is not None or not options.compile_baseline)
        if not cached or options.refresh_baseline:
            child_job.compile_baseline = options.compile_baseline
            child = EvalProcess(run_baseline, child_job, eval_dir, self.sandbox, device == "cuda")
            try:
                child.recv(time.monotonic() + 60)  # hello
                kind, meta, _ = child.recv(time.monotonic() + options.timeout_s + (300 if options.compile_baseline else 0))
            except TimeoutError:
                raise _Outcome(Verdict.TIMEOUT, "baseline_timeout: timing the reference ran past its limit") from None
            except Died:
                raise _Outcome(Verdict.CRASH, f"reference_crashed: {child.death()}") from None
            finally:
                child.close()
            if kind != "baseline":
                raise _Outcome(Verdict.RUNTIME_ERROR, f"reference_failed: {meta.get('message', kind)[:300]}")
            eager_ms = stats(meta["eager_ms"]).median_ms
            self.baselines.put("eager|" + key, eager_ms)
            if meta.get("compile_ms"):
                compile_ms = stats(meta["compile_ms"]).median_ms
                self.baselines.put(key, compile_ms)
        result.reasons.append("baseline_only: the reference was timed, no candidate was evaluated")
        result.timing = TimingResult(available=True, device=device, baseline="eager", compile_ms=compile_ms,
                                     compile_baseline_cached=cached and not options.refresh_baseline)
        result.timing.reference = stats([eager_ms])

    # reference -------------------------------------------------------------------------------------------
    def _spawn(self, target, child_job: ChildJob, eval_dir: str, name: str) -> EvalProcess:
        folder = os.path.join(eval_dir, name)
        os.mkdir(folder)
        return EvalProcess(target, child_job, folder, self.sandbox, child_job.device == "cuda")

    def _await_reference(self, child: EvalProcess, child_job: ChildJob, options: EvalOptions) -> EvalProcess:
        deadline = time.monotonic() + options.timeout_s + 60
        try:
            child.recv(deadline)  # hello
            kind, meta, _ = child.recv(deadline)
            if kind == "error":
                raise _Outcome(Verdict.RUNTIME_ERROR, f"reference_failed: the task's reference raised {meta['message'][:300]}")
            child.facts = meta
            if meta.get("peaks") and not child_job.cached_peaks:
                from kernelgym.evaluation.baselines import fingerprint
                from kernelgym.evaluation.roofline import Peaks

                self.peaks.put(fingerprint(child_job.device, child_job.threads), Peaks(**meta["peaks"]))
            return child
        except TimeoutError:
            child.close()
            raise _Outcome(Verdict.TIMEOUT, "reference_timeout: the task's reference ran past its limit") from None
        except Died:
            child.close()
            raise _Outcome(Verdict.CRASH, f"reference_crashed: {child.death()}") from None
        except _Outcome:
            child.close()
            raise

    # candidate -------------------------------------------------------------------------------------------
    def _candidate(self, job, child_job, judge, result, child: EvalProcess, mode) -> None:
        options = job.options
        session = _Session(self, child, job, child_job, judge, result, mode)
        try:
            session.converse(options)
        except TimeoutError:
            raise _Outcome(Verdict.TIMEOUT, f"timeout: the {session.stage} stage ran past its limit") from None
        except Died:
            raise _Outcome(Verdict.CRASH, f"crash: the candidate's process {child.death()} during {session.stage}") from None
        finally:
            result.stage_s[session.stage] = round(time.monotonic() - session.stage_started, 3)
            child.close()
            result.output_tail = child.output_tail()


def _static_verdict(static: StaticResult) -> Verdict:
    contract_rules = ("syntax_error", "empty_source", "source_too_large", "no_model_new", "no_forward")
    if all(r.split(":")[0] in contract_rules for r in static.reasons):
        return Verdict.COMPILE_ERROR
    return Verdict.HACK


class _Judge:
    """The reference process, which holds the expected outputs and compares candidate outputs with them."""

    def __init__(self, child: EvalProcess, atol: float, rtol: float, timeout_s: float):
        self.child, self.atol, self.rtol, self.timeout_s = child, atol, rtol, timeout_s

    def compare(self, trial: int, meta: dict, blobs: list[bytes]) -> TrialResult:
        outputs = meta.get("outputs", [])
        if not isinstance(outputs, list) or len(outputs) != len(blobs):
            return TrialResult(trial, False, False, "malformed outputs message")
        try:
            protocol.send(self.child.sock, "compare", {"trial": trial, "outputs": outputs, "atol": self.atol,
                                                       "rtol": self.rtol, "scale": float(meta.get("scale", 1.0))},
                          blobs)
            kind, data, _ = self.child.recv(time.monotonic() + self.timeout_s + 60)
        except (TimeoutError, Died, OSError):
            raise _Outcome(Verdict.CRASH, "judge_failed: the reference process did not answer a comparison") from None
        return TrialResult(**data)


class _Session:
    """The conversation with one candidate process, stage by stage."""

    def __init__(self, pipeline, child, job, child_job, judge, result, mode):
        self.pipeline, self.child, self.job, self.child_job = pipeline, child, job, child_job
        self.judge, self.result, self.mode = judge, result, mode
        self.stage = "start"
        self.compile_ms = child_job.cached_compile_ms
        self.build_s = 0.0
        self.cached = True
        self.stage_started = time.monotonic()

    def _deadline(self) -> float:
        options = self.job.options
        limit = options.build_timeout_s if self.stage == "build" else options.timeout_s
        return self.stage_started + limit

    def next(self) -> tuple[str, dict, list[bytes]]:
        while True:
            kind, meta, blobs = self.child.recv(self._deadline())
            if kind == "stage":
                now = time.monotonic()
                self.result.stage_s[self.stage] = round(now - self.stage_started, 3)
                self.stage = str(meta.get("name", "?"))
                self.stage_started = now
                continue
            if kind == "build":
                self._build(meta)
                continue
            if kind == "compile_baseline":
                self.compile_ms = float(meta.get("ms", 0.0)) or None
                if self.compile_ms:
                    key = self.pipeline._baseline_key(self.job, self.child_job.device)
                    self.pipeline.baselines.put(key, self.compile_ms)
                continue
            if kind == "error":
                self._error(meta)
            return kind, meta, blobs

    def _build(self, meta: dict) -> None:
        if meta.get("language") == "torch_ext":
            return self._build_extension(meta)
        if meta.get("language") == "triton_module":
            return self._build_triton_module(meta)
        request = kernels.BuildRequest(str(meta.get("language")), str(meta.get("source")),
                                       tuple(str(f) for f in meta.get("flags", [])))
        if request.language not in ("cpp", "cuda") or not set(request.flags) <= _allowed_flags(request.language):
            self.child.send("build_failed", {"message": "unsupported build request (flags are fixed by kernelgym)"})
            return
        started = time.monotonic()
        existed = kernels.library_path(request).exists()
        try:
            built = kernels.compile_request(request, timeout_s=max(1.0, self._deadline() - time.monotonic()))
            self.child.send("built", {"path": str(built)})
        except kernels.BuildError as exc:
            self.child.send("build_failed", {"message": str(exc), "log": exc.log})
        self.build_s += time.monotonic() - started
        self.cached = self.cached and existed

    def _build_extension(self, meta: dict) -> None:
        from kernelgym import torch_ext

        started = time.monotonic()
        try:
            request = torch_ext.ExtensionRequest.from_meta(meta)
            existed = torch_ext.is_built(request)
            folder = torch_ext.build(request)
            self.child.send("built", {"path": str(folder)})
            self.cached = self.cached and existed
        except kernels.BuildError as exc:
            self.child.send("build_failed", {"message": str(exc), "log": exc.log})
        self.build_s += time.monotonic() - started

    def _build_triton_module(self, meta: dict) -> None:
        from kernelgym import triton_build

        started = time.monotonic()
        try:
            self.child.send("built", {"path": str(triton_build.build(triton_build.ModuleRequest.from_meta(meta)))})
        except kernels.BuildError as exc:
            self.child.send("build_failed", {"message": str(exc), "log": exc.log})
        self.build_s += time.monotonic() - started

    def _error(self, meta: dict) -> None:
        kind, stage = meta.get("kind"), meta.get("stage", self.stage)
        message = str(meta.get("message", ""))
        where = "; ".join(meta.get("frames", []))
        if kind == "compile" or (stage == "load" and self.result.build is None and "BuildError" in message):
            self.result.build = BuildResult(False, round(self.build_s, 3), False, log=trim_log(str(meta.get("log") or message)))
            raise _Outcome(Verdict.COMPILE_ERROR, f"compile_error: {message.splitlines()[0][:300] if message else 'build failed'}")
        if kind == "cuda":
            raise _Outcome(Verdict.CRASH, f"cuda_error: {message[:300]} (during {stage}; the worker process is discarded)")
        if kind == "contract":
            raise _Outcome(Verdict.RUNTIME_ERROR, f"contract: {message}")
        if stage == "load":
            self.result.build = BuildResult(True, round(self.build_s, 3), self.cached)
            self.result.load = LoadResult(False, error=message[:2000])
        label = "out_of_memory" if kind == "oom" else f"{stage}_error"
        raise _Outcome(Verdict.RUNTIME_ERROR, f"{label}: {message[:500]}" + (f" [{where}]" if where else ""))

    def converse(self, options: EvalOptions) -> None:
        kind, meta, _ = self.next()  # hello
        self.result.static.warnings.extend(meta.get("notes", []))
        kind, meta, _ = self.next()
        if kind != "loaded":
            raise _Outcome(Verdict.CRASH, f"protocol: unexpected {kind!r} before load")
        load_started = time.monotonic()
        self.result.build = BuildResult(True, round(self.build_s, 3), self.cached, runnable=self.mode != "compile")
        self.result.load = LoadResult(True, round(time.monotonic() - load_started, 3))
        if self.mode == "compile":
            self.next()
            raise _Outcome(Verdict.RUNTIME_ERROR, "no_gpu: the CUDA code compiled, but this machine has no GPU to run it")
        self._correctness()
        if not self.child_job.timing:
            self.child.send("stop")
            self.result.timing = TimingResult(False, reason=_no_timing_reason(self.mode, options))
            return
        self.child.send("time")
        self._timing(options)
        if options.profile:
            kind, meta, _ = self.next()
            self._profile(meta, options)
        self.next()  # done

    def _correctness(self) -> None:
        job = self.child_job
        result = CorrectnessResult(passed=False, atol=self.judge.atol, rtol=self.judge.rtol)
        self.result.correctness = result
        for i in range(len(job.trial_seeds)):
            kind, meta, blobs = self.next()
            if kind != "outputs":
                raise _Outcome(Verdict.CRASH, f"protocol: unexpected {kind!r} during correctness")
            facts = meta.get("facts", {})
            self._integrity(facts)
            trial = self.judge.compare(i, meta, blobs)
            result.trials.append(trial)
            if not trial.passed:
                raise _Outcome(Verdict.INCORRECT, f"incorrect: trial {i + 1}{' (perturbed inputs)' if trial.perturbed else ''}: {trial.message}")
        result.passed = True

    @staticmethod
    def _untampered(meta: dict) -> None:
        changed = [str(name) for name in meta.get("tampered", [])]
        if changed:
            raise _Outcome(Verdict.HACK, f"tampering: the candidate replaced {', '.join(changed[:3])} in its process")

    def _integrity(self, facts: dict) -> None:
        self._untampered(facts)
        if facts.get("inputs_modified"):
            raise _Outcome(Verdict.HACK, "inputs_modified: forward changed its inputs")
        if facts.get("aliases_input"):
            raise _Outcome(Verdict.HACK, "output_aliases_input: an output shares storage with an input")
        if facts.get("threads_after", 0) > 0:
            raise _Outcome(Verdict.HACK, "background_thread: threads were still running after forward returned")
        extra = int(facts.get("os_threads_extra", 0))
        if self.child_job.device == "cpu" and extra > self.child_job.threads - 1:
            raise _Outcome(Verdict.HACK, f"extra_threads: {extra} more OS threads than the {self.child_job.threads} "
                                         "allowed were running after forward (helper threads or extra cores)")
        if facts.get("precision_lowered"):
            raise _Outcome(Verdict.HACK, "precision_downgrade: TF32 or reduced-precision matmul was switched on")
        if facts.get("own_kernel_calls", 1) == 0:
            raise _Outcome(Verdict.HACK, f"kernel_not_called: forward ran none of the solution's {self.job.backend} kernels")

    def _timing(self, options: EvalOptions) -> None:
        kind, meta, _ = self.next()
        self._untampered(meta)
        if self.mode == "run" and int(meta.get("own_kernel_calls", 1)) < int(meta.get("candidate_calls", 0)):
            raise _Outcome(Verdict.HACK, "kernel_not_called: some timed calls ran none of the solution's kernels")
        rounds = [_round(r) for r in meta["rounds"]]
        ref_times, cand_times = self._conservative(*rounds[-1], meta.get("pre_ref_ms") or [])
        speedup, low, high = speedup_interval(ref_times, cand_times)
        remeasured = False
        if speedup > options.implausible_speedup:
            self.child.send("again")
            kind, meta, _ = self.next()
            ref2, cand2 = self._conservative(*_round(meta["rounds"][-1]), meta.get("pre_ref_ms") or [])
            speedup2, low2, high2 = speedup_interval(ref2, cand2)
            remeasured = True
            if abs(speedup2 - speedup) / speedup > options.reproduce_tolerance:
                self.result.reasons.append(f"not_reproduced: speedup {speedup:.2f}x then {speedup2:.2f}x")
                low = min(low, low2)
            ref_times, cand_times, speedup, low, high = ref2, cand2, speedup2, min(low, low2), high2
        self.child.send("verify")
        pre_ref = meta.get("pre_ref_ms") or []
        timing = TimingResult(
            available=True, device=str(meta.get("device", "")), candidate=stats(cand_times), reference=stats(ref_times),
            speedup=round(speedup, 4), speedup_ci_low=round(low, 4), speedup_ci_high=round(high, 4),
            remeasured=remeasured, sync_cost_ms=meta.get("sync_cost_ms"),
            reference_pre_import_ms=float(sorted(pre_ref)[len(pre_ref) // 2]) if pre_ref else None,
        )
        timing.verified = low > options.threshold and not any(r.startswith("not_reproduced") for r in self.result.reasons)
        self._roofline(timing)
        if self.compile_ms:
            timing.compile_ms = round(self.compile_ms, 6)
            timing.speedup_vs_compile = round(self.compile_ms / max(timing.candidate.median_ms, 1e-9), 4)
            timing.compile_baseline_cached = self.child_job.cached_compile_ms is not None
        self.result.timing = timing
        checks = SPOT_CHECKS + min(len(self.child_job.trial_seeds), INPUT_SETS_FOR_TIMING)
        for _ in range(checks):
            kind, meta, blobs = self.next()
            if kind != "outputs":
                raise _Outcome(Verdict.CRASH, f"protocol: unexpected {kind!r} during the timing checks")
            scale = float(meta.get("scale", 1.0))
            if "spot_check" in meta and not (scale != 1.0 and abs(scale - 1.0) <= 1e-3):
                raise _Outcome(Verdict.HACK, "forged_check: a spot check came back without its input scaling")
            trial = self.judge.compare(int(meta.get("trial", 0)), meta, blobs)
            self.child.send("compared")
            if not trial.passed:
                timing.verified = False
                when = "a timed call" if "spot_check" in meta else "after timing, forward"
                raise _Outcome(Verdict.HACK, f"outputs_changed: {when} returned wrong outputs ({trial.message})")
        if pre_ref:
            before = float(sorted(pre_ref)[len(pre_ref) // 2])
            after = timing.reference.median_ms
            if before > 0 and after / before > options.reference_slowdown_limit and after - before > 0.05:
                timing.verified = False
                raise _Outcome(Verdict.HACK, f"reference_slowed: the reference took {after:.3f} ms after the candidate was imported, {before:.3f} ms before")

    def _roofline(self, timing: TimingResult) -> None:
        from kernelgym.evaluation.roofline import Peaks, TaskCost, floor_ms

        facts = getattr(self.judge.child, "facts", {}) or {}
        if not facts.get("peaks") or facts.get("flops") is None:
            return
        cost = TaskCost(float(facts["flops"]), float(facts["min_bytes"]))
        floor, bound = floor_ms(cost, Peaks(**facts["peaks"]))
        timing.flops, timing.min_bytes, timing.floor_ms, timing.bound = cost.flops, cost.min_bytes, round(floor, 6), bound
        if timing.candidate and timing.candidate.median_ms > 0:
            timing.roofline_fraction = round(floor / timing.candidate.median_ms, 4)

    @staticmethod
    def _conservative(ref_times: list[float], cand_times: list[float], pre_ref: list[float]):
        """Reference times scaled down to the clean measurement (taken before the candidate was imported)
        when that was faster: a candidate that slows torch down in its process gains nothing."""
        if not pre_ref or not ref_times:
            return ref_times, cand_times
        clean = sorted(pre_ref)[len(pre_ref) // 2]
        interleaved = sorted(ref_times)[len(ref_times) // 2]
        if 0 < clean < interleaved:
            ref_times = [t * clean / interleaved for t in ref_times]
        return ref_times, cand_times

    def _profile(self, meta: dict, options: EvalOptions) -> None:
        self._untampered(meta)
        profile = ProfileResult(
            coverage=meta.get("coverage"), own_kernel_calls=int(meta.get("own_kernel_calls", 0)),
            top_ops=[(str(k), float(v)) for k, v in meta.get("top_ops", [])],
            heavy_torch_ops=[str(k) for k in meta.get("heavy_torch_ops", [])],
        )
        self.result.profile = profile
        share = float(meta.get("torch_compute_share", 0.0))
        heavy_called = [str(op) for op in meta.get("heavy_ops_called", [])]
        if heavy_called:
            if self.result.timing:
                self.result.timing.verified = False
            raise _Outcome(Verdict.HACK, f"torch_compute: forward left the heavy work to PyTorch ({', '.join(heavy_called[:3])})")
        untracked_ms = float(meta.get("untracked_ms", 0.0))
        if untracked_ms > options.min_untracked_ms and float(meta.get("untracked_share", 0.0)) > options.max_untracked_share:
            if self.result.timing:
                self.result.timing.verified = False
            raise _Outcome(Verdict.HACK, f"untracked_compute: {untracked_ms:.3g} ms of forward ran in neither the "
                                         "solution's own kernels nor PyTorch (another library, or hidden work)")
        if share > options.max_torch_share:
            if self.result.timing:
                self.result.timing.verified = False
            heavy = ", ".join(profile.heavy_torch_ops[:3]) or "PyTorch ops"
            raise _Outcome(Verdict.HACK, f"torch_compute: {share:.0%} of the candidate's time is PyTorch compute ({heavy}), not its own kernels")


def _round(r: dict) -> tuple[list[float], list[float]]:
    return [float(x) for x in r["ref_ms"]], [float(x) for x in r["cand_ms"]]


def _no_timing_reason(mode: str, options: EvalOptions) -> str:
    if mode == "interpret":
        return "timing unavailable: no GPU, so the Triton kernels ran in the interpreter (correctness only)"
    if not options.timing:
        return "timing disabled by the caller"
    return "timing unavailable"


def _allowed_flags(language: str) -> set[str]:
    base = set(kernels.CUDA_FLAGS if language == "cuda" else kernels.CPP_FLAGS)
    extra = {"-ffast-math", "-funroll-loops", "-O2", "-mavx2", "-mfma", "--use_fast_math", "-lcublas", "-Xptxas", "-v", "-lineinfo"}
    return base | extra


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

