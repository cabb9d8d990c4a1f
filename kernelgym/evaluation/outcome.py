"""How a stage ends an evaluation early: with a finding of the rules catalogue."""

from __future__ import annotations

from kernelgym.evaluation import rules
from kernelgym.evaluation.result import TrialResult
from kernelgym.evaluation.rules import Reason, reason


class Outcome(Exception):
    """Ends the pipeline early with a verdict."""

    def __init__(self, finding: Reason):
        super().__init__(str(finding))
        self.finding = finding


def end(rule: rules.Rule, message: str = "") -> Outcome:
    return Outcome(reason(rule, message))


class Mismatch(Exception):
    """A call whose outputs the reference found wrong (which call, and how)."""

    def __init__(self, call: int, trial: TrialResult):
        super().__init__(trial.message)
        self.call, self.trial = call, trial
