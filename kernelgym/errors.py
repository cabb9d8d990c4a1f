"""The flat error vocabulary of kernelgym.

These are for programming and configuration mistakes made by the *caller* (an unknown task id, a missing
KernelBench checkout). A bad *submission* is never an exception: it is data, an `EvalResult` with a verdict.
Errors defined next to the code that raises them (`kernels.BuildError`, `workers.protocol.ProtocolError`,
`agents.bench_config.BenchError`, `agents.policies.openai_compat.EndpointError`) derive from `KernelGymError`
too, so `except KernelGymError` catches everything kernelgym raises on purpose.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from kernelgym._shadow import check_not_shadowed

# Every kernelgym module imports this one: the first to load under a `kernelgym` folder that hides the
# package (see kernelgym/_shadow.py) says so here.
check_not_shadowed()


class KernelGymError(Exception):
    """Base of every error kernelgym raises on purpose."""


class TaskNotFoundError(KernelGymError, LookupError):
    """No task matches the given id or path."""


class TaskFormatError(KernelGymError, ValueError):
    """A task file is not a valid KernelBench-format problem."""


class SuiteUnavailableError(KernelGymError):
    """A task source (KernelBench checkout, Hugging Face dataset) cannot be found or read."""


class BackendNotFoundError(KernelGymError, LookupError):
    """No backend is registered under the given name."""


class ConfigError(KernelGymError, ValueError):
    """An option has a value kernelgym cannot use."""


class PoolClosedError(KernelGymError, RuntimeError):
    """An evaluation was submitted to a pool that has been closed."""


class ActionError(KernelGymError, TypeError):
    """An environment was given an action that is not text (a reply must be a str)."""


def did_you_mean(name: str, known: Iterable[str], *, limit: int = 3) -> str:
    """' Did you mean 'x'?' (or 'x' or 'y') for the known names closest to `name`; '' when none is close."""
    close = difflib.get_close_matches(str(name), list(dict.fromkeys(known)), n=limit, cutoff=0.6)
    if not close:
        return ""
    return " Did you mean " + " or ".join(repr(c) for c in close) + "?"
