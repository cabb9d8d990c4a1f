"""The flat error vocabulary of kernelgym.

These are for programming and configuration mistakes made by the *caller* (an unknown task id, a missing
KernelBench checkout). A bad *submission* is never an exception: it is data, an `EvalResult` with a verdict.
"""

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
