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


class LateMismatch(Outcome):
    """`outputs_changed` until replayed: a wrong output after correctness passed, with what a replay needs,
    the model's init seed and the wrong call's input seed (evaluation/pipeline.py decides)."""

    def __init__(self, finding: Reason, init_seed: int, input_seed: int):
        super().__init__(finding)
        self.init_seed, self.input_seed = init_seed, input_seed
