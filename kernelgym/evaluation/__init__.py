"""Evaluation: the pipeline of named stages, their results and the rules that decide the verdicts.

`kernelgym.evaluate()` runs one on the shared pool (workers/evaluate.py).
"""

from __future__ import annotations

from kernelgym.evaluation.options import EvalOptions
from kernelgym.evaluation.result import EvalResult
from kernelgym.evaluation.verdict import Verdict

__all__ = ["EvalOptions", "EvalResult", "Verdict"]
