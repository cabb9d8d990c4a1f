"""Stage 1, static: the solution's source read against the backend's contract, before any process starts
(the checks themselves are evaluation/static.py)."""

from __future__ import annotations

from kernelgym.evaluation.outcome import Outcome
from kernelgym.evaluation.rules import Reason
from kernelgym.evaluation.state import Evaluation
from kernelgym.evaluation.static import static_check


def static(ev: Evaluation) -> None:
    ev.result.static = static_check(ev.job.solution_source, ev.backend, ev.job.dtype)
    if not ev.result.static.passed:
        raise Outcome(Reason.parse(ev.result.static.reasons[0]))
