"""The evaluation pipeline: one job in, one `EvalResult` out, inside kernelgym's trusted worker process.

A job is one evaluation (evaluation/judge.py runs its stages), then, where asked, its correctness again at
held-out shapes; or the reference timed alone for a baseline (evaluation/reference_alone.py). A stage that
ends the evaluation early gives the verdict and the reason; whatever happens, the result comes back.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
import time

from kernelgym.evaluation import rules
from kernelgym.evaluation.job import EvalJob
from kernelgym.evaluation.judge import evaluate
from kernelgym.evaluation.machine import Machine, ReplayedSeeds, seed_source
from kernelgym.evaluation.outcome import LateMismatch, Outcome, end
from kernelgym.evaluation.reference_alone import baseline
from kernelgym.evaluation.result import EvalResult, Verdict
from kernelgym.evaluation.rules import Reason, reason
from kernelgym.workers.sandbox import SandboxConfig


class Pipeline:
    """Evaluates jobs one at a time inside a worker."""

    def __init__(self, work_root: str, sandbox: SandboxConfig, has_gpu: bool, slot: int = 0,
                 spares: bool = False, timing_core: int | None = None):
        self.work_root = work_root
        self.has_gpu = has_gpu
        self.machine = Machine(work_root, sandbox, has_gpu, slot, spares, timing_core)

    def start_spares(self, threads: int) -> None:
        """A worker's first pair of processes, forked before its first job, on its evaluations' cores."""
        spares = self.machine.spares
        if spares is not None:
            spares.refill(self.machine.evaluation_cores("cuda" if spares.uses_gpu else "cpu", threads))

    def close(self) -> None:
        if self.machine.spares is not None:
            self.machine.spares.close()

    def run(self, job: EvalJob) -> EvalResult:
        started = time.monotonic()
        result = EvalResult(task_id=job.task_id, backend=job.backend, size=job.size, verdict=Verdict.OK)
        eval_dir = tempfile.mkdtemp(prefix="eval-", dir=self.work_root)
        os.chmod(eval_dir, 0o711)
        try:
            if job.options.baseline_only:
                baseline(self.machine, job, result, eval_dir)
            else:
                evaluate(self.machine, job, result, eval_dir)
                if job.options.shapes == "heldout" and job.shape_limits and result.verdict is Verdict.OK:
                    self._heldout_shapes(job, result, eval_dir)
        except Outcome as outcome:
            if isinstance(outcome, LateMismatch):
                outcome = self._replayed(job, result, outcome, eval_dir)
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

    def _replayed(self, job: EvalJob, result: EvalResult, late: LateMismatch, eval_dir: str) -> Outcome:
        """A wrong output after correctness passed, decided by the wrong call's input set (and the model's
        seed) replayed as the first call of fresh processes, where nothing is cached or counted yet, and
        whose new memory is filled with garbage (a read of an output never written, y += a + b into
        torch.empty, is right on fresh zeroed pages and wrong on recycled ones: charged `hack` 6 times in 8
        on the GPU host). Right there: the candidate behaved differently once it counted
        (`outputs_changed`). Wrong there too: the kernel's own bug on inputs or memory the correctness
        trials did not draw (`incorrect`: an honest NaN where a == b was charged `outputs_changed`)."""
        replay = EvalResult(task_id=job.task_id, backend=job.backend, size=job.size, verdict=Verdict.OK)
        folder = os.path.join(eval_dir, "replay")
        os.mkdir(folder)
        said = late.finding.message
        try:
            evaluate(self.machine, _correctness_only(job, trials=1, perturbed=0), replay, folder,
                     seeds=ReplayedSeeds([late.init_seed, late.input_seed]))
        except Outcome as outcome:
            if outcome.finding.rule != rules.INCORRECT.name:
                return late  # the replay ended otherwise (a crash, a timeout): no evidence either way
            if result.correctness is not None and replay.correctness is not None:
                result.correctness.passed = False
                result.correctness.trials += replay.correctness.trials
            return end(rules.INCORRECT, f"{said}; the same input set was wrong again as the first call of "
                                        "fresh processes: a bug on inputs the correctness trials did not "
                                        "draw")
        return end(rules.OUTPUTS_CHANGED, f"{said}; the same input set was right as the first call of fresh "
                                          "processes")

    def _heldout_shapes(self, job: EvalJob, result: EvalResult, eval_dir: str) -> None:
        """Correctness again at shapes the prompt never showed, drawn here within the task's limits, each in
        processes of its own (the constants change the init arguments as well as the inputs)."""
        from kernelgym.tasks.task import draw_shape_variant, substitute_constants

        started = time.monotonic()
        rng = seed_source(job.options)
        checks = _correctness_only(job, trials=2, perturbed=min(1, job.options.perturbed_trials))
        result.heldout_shapes = []
        for index in range(job.options.heldout_variants):
            values = draw_shape_variant(job.task_source, job.shape_limits, rng)
            shape = ", ".join(f"{name}={value}" for name, value in values.items())
            variant = dataclasses.replace(checks, task_source=substitute_constants(job.task_source, values),
                                          shape_limits={})
            checked = EvalResult(task_id=job.task_id, backend=job.backend, size=job.size, verdict=Verdict.OK)
            folder = os.path.join(eval_dir, f"heldout-{index}")
            os.mkdir(folder)
            try:
                evaluate(self.machine, variant, checked, folder)
            except Outcome as outcome:
                result.heldout_shapes.append({"constants": values, "passed": False})
                finding = outcome.finding
                said = f"held-out shape {shape}: {finding.rule}: {finding.message}"
                if finding.verdict in (Verdict.INCORRECT, Verdict.RUNTIME_ERROR, Verdict.CRASH):
                    raise end(rules.HELDOUT_SHAPE, said) from None
                raise Outcome(Reason(finding.rule, said)) from None
            result.heldout_shapes.append({"constants": values, "passed": True})
        result.stage_s["heldout_shapes"] = round(time.monotonic() - started, 3)


def _correctness_only(job: EvalJob, trials: int, perturbed: int) -> EvalJob:
    """The job judged for correctness alone, at its shown shapes (held-out shapes, a replay): no timing,
    profile, launch watch or counters."""
    options = dataclasses.replace(job.options, shapes="shown", timing=False, profile=False, ncu=False,
                                  launch_evidence=False, compile_baseline=False, correctness_trials=trials,
                                  perturbed_trials=perturbed)
    return dataclasses.replace(job, options=options)


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
