"""Faults of the judge, never the candidate's: a result that spoils its worker, the answer the pool gives
when the judge failed, and the pool's count of such faults (its checks for a full disk or a run of the
kernel's OOM killer are EvalPool's own, in pool.py)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from kernelgym.evaluation.job import EvalJob
from kernelgym.evaluation.result import EvalResult, Verdict
from kernelgym.evaluation.rules import Reason


def spoiled(result: EvalResult) -> bool:
    """The judge failed, not the candidate (e.g. the worker's own process touched the CUDA driver, so forked
    processes can no longer use the GPU): the worker is replaced and the evaluation judged again."""
    return result.verdict is Verdict.INFRASTRUCTURE_ERROR


def failed_result(job: EvalJob, verdict: Verdict, reason: str) -> EvalResult:
    """`reason` is "rule: message" with a rule of the catalogue (kernelgym.evaluation.rules)."""
    return EvalResult(job.task_id, job.backend, job.size, verdict, [Reason.parse(reason)])


@dataclass
class InfraStats:
    """What the pool did about faults of the judge, over its lifetime (read by
    benchmarks/judge_trust/soak.py)."""

    rejudged: int = 0  # evaluations run again after an infrastructure fault
    not_judged: int = 0  # evaluations answered `infrastructure_error` once the re-runs were spent
    causes: Counter = field(default_factory=Counter)  # rule of each fault ("worker_crash", "disk_full", ...)


def rule_of(reason: str) -> str:
    """The rule of a reason (the pipeline's and the pool's are typed alike)."""
    return Reason.parse(reason).rule

