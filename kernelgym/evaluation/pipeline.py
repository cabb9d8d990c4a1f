"""The evaluation pipeline: one job in, one `EvalResult` out, inside kernelgym's trusted worker process.

A job is one evaluation (evaluation/stages.py runs its stages), then, where asked, its correctness again at
held-out shapes; or the reference timed alone for a baseline. A stage that ends the evaluation early gives
the verdict and the reason; whatever happens, the result comes back.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time

from kernelgym import backends, kernels
from kernelgym.evaluation import rules
from kernelgym.evaluation.job import EvalJob
from kernelgym.evaluation.outcome import Outcome, end
from kernelgym.evaluation.result import EvalResult, TimingResult, Verdict
from kernelgym.evaluation.rules import Reason, reason
from kernelgym.evaluation.stages import Evaluation, seed_source
from kernelgym.evaluation.timing import TimingConfig, stats
from kernelgym.workers import locks
from kernelgym.workers.child import ChildJob
from kernelgym.workers.process import Died, EvalProcess
from kernelgym.workers.sandbox import SandboxConfig
from kernelgym.workers.spares import Spares

# the pipeline -------------------------------------------------------------------------------------------

class Pipeline:
    """Evaluates jobs one at a time inside a worker. Holds the worker's knowledge of its machine."""

    def __init__(self, work_root: str, sandbox: SandboxConfig, has_gpu: bool, slot: int = 0,
                 spares: bool = False, timing_core: int | None = None):
        from kernelgym.evaluation.baselines import BaselineCache
        from kernelgym.evaluation.roofline import Peaks, RecordCache, TaskCost

        self.work_root = work_root
        self.sandbox = sandbox
        self.has_gpu = has_gpu
        self.slot = slot  # the worker's index in its pool: concurrent workers time on different cores
        self.timing_core = timing_core  # GPU: where the slot's holder runs its timed batches (nothing else)
        self.baselines = BaselineCache(kernels.cache_root() / "baselines.json")
        self.peaks = RecordCache(kernels.cache_root() / "peaks.json", Peaks)
        self.costs = RecordCache(kernels.cache_root() / "task_costs.json", TaskCost)
        self.spares = Spares(work_root, sandbox, uses_gpu=has_gpu) if spares else None

    def evaluation_cores(self, device: str, threads: int) -> set[int]:
        """The cores an evaluation's two processes share on this worker (stages.evaluation_cores)."""
        from kernelgym.evaluation.stages import evaluation_cores

        return evaluation_cores(threads, self.slot, spread=device == "cuda" and self.timing_core is not None)

    def start_spares(self, threads: int) -> None:
        """A worker's first pair of processes, forked before its first job, on its evaluations' cores."""
        if self.spares is not None:
            self.spares.refill(self.evaluation_cores("cuda" if self.spares.uses_gpu else "cpu", threads))

    def close(self) -> None:
        if self.spares is not None:
            self.spares.close()

    def run(self, job: EvalJob) -> EvalResult:
        started = time.monotonic()
        result = EvalResult(task_id=job.task_id, backend=job.backend, size=job.size, verdict=Verdict.OK)
        eval_dir = tempfile.mkdtemp(prefix="eval-", dir=self.work_root)
        os.chmod(eval_dir, 0o711)
        try:
            if job.options.baseline_only:
                self._baseline(job, result, eval_dir)
            else:
                Evaluation(self, job, result, eval_dir).run()
                if job.options.shapes == "heldout" and job.shape_limits and result.verdict is Verdict.OK:
                    self._heldout_shapes(job, result, eval_dir)
        except Outcome as outcome:
            result.verdict = outcome.finding.verdict or Verdict.CRASH
            finding = _dtype_named(outcome.finding, job)
            if result.candidate_oom_kills:
                finding = Reason(finding.rule, f"{finding.message} ({result.candidate_oom_kills} of the "
                                               "candidate's processes were killed at its memory limit)")
            result.reasons.append(finding)
            if result.timing is not None and result.verdict is not Verdict.OK:
                result.timing.verified = False
        finally:
            shutil.rmtree(eval_dir, ignore_errors=True)
        if self.has_gpu and _cuda_initialized_here():
            # Evidence in this trusted process, never the candidate's word: forked processes can no longer
            # use the GPU, so the verdict is the judge's failure and the worker must be replaced.
            result.verdict = Verdict.INFRASTRUCTURE_ERROR
            result.reasons.append(reason(rules.JUDGE_FAILED, "the worker's own process initialized CUDA"))
        # The reasons that decided the verdict first, informational ones (a contended timing...) after them.
        result.reasons.sort(key=lambda r: Reason.parse(r).verdict is not result.verdict)
        result.wall_s = round(time.monotonic() - started, 3)
        return result

    def _heldout_shapes(self, job: EvalJob, result: EvalResult, eval_dir: str) -> None:
        """Correctness again at shapes the prompt never showed, drawn here within the task's limits, each in
        processes of its own (the constants change the init arguments as well as the inputs)."""
        import dataclasses

        from kernelgym.tasks.task import draw_shape_variant, substitute_constants

        started = time.monotonic()
        rng = seed_source(job.options)
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
                Evaluation(self, variant, checked, folder).run()
            except Outcome as outcome:
                result.heldout_shapes.append({"constants": values, "passed": False})
                finding = outcome.finding
                said = f"held-out shape {shape}: {finding.rule}: {finding.message}"
                if finding.verdict in (Verdict.INCORRECT, Verdict.RUNTIME_ERROR, Verdict.CRASH):
                    raise end(rules.HELDOUT_SHAPE, said) from None
                raise Outcome(Reason(finding.rule, said)) from None
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

    def cost_key(self, job: EvalJob) -> str:
        from kernelgym.tasks.task import content_hash

        return f"{content_hash(job.task_source)[:24]}|{job.dtype}|{'backward' if job.backward else 'forward'}"

    def fingerprint(self, device: str, threads: int) -> str:
        from kernelgym.evaluation.baselines import fingerprint

        return fingerprint(device, threads)

    def child_job(self, job: EvalJob, device: str, mode: str, seed_source) -> ChildJob:
        from dataclasses import asdict

        options = job.options
        peaks = self.peaks.get(self.peaks_key(device, options.threads, job.dtype))
        cost = self.costs.get(self.cost_key(job))
        return ChildJob(
            task_source=job.task_source, solution_source=job.solution_source, backend=job.backend,
            device=device,
            mode=mode, dtype=job.dtype, init_seed=seed_source.randrange(2**31), perturb=job.perturb,
            threads=options.threads, cached_peaks=asdict(peaks) if peaks else None,
            cached_cost=asdict(cost) if cost else None,
            timing_config=TimingConfig(trials=options.timing_trials, budget_s=options.timing_budget_s,
                                       subtract_sync_cost=options.subtract_sync_cost),
            backward=job.backward,
        )

    # baselines: the reference timed alone, in its own (trusted) process ----------------------------------
    def _baseline(self, job: EvalJob, result: EvalResult, eval_dir: str) -> None:
        options = job.options
        device, mode = self.placement(backends.get(job.backend))
        rng = seed_source(options)
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
                raise end(rules.TIMEOUT, "timing the reference alone ran past its limit")
            if kind != "baseline":
                raise end(rules.REFERENCE_FAILED, str(meta.get("message", kind))[:300])
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
        rng = seed_source(job.options)
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

        with locks.timing_slot(device):
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
