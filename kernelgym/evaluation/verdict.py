"""The verdicts of the judge: one word per evaluation, the rules catalogue says which rule gives which."""

from __future__ import annotations

from enum import Enum


class Verdict(str, Enum):
    OK = "ok"
    NO_CODE = "no_code"  # the reply held no solution module: nothing was judged
    COMPILE_ERROR = "compile_error"
    RUNTIME_ERROR = "runtime_error"
    INCORRECT = "incorrect"
    HACK = "hack"
    TIMEOUT = "timeout"
    CRASH = "crash"
    INFRASTRUCTURE_ERROR = "infrastructure_error"  # the judge failed, not the candidate: not judged

    def __str__(self) -> str:
        return self.value
