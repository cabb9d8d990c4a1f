"""kernelgym: multi-turn Gymnasium environments for LLM agents that write GPU kernels.

`import kernelgym` is light (no LLM library is loaded) and registers the environment ids.
"""

from __future__ import annotations

__version__ = "0.1.0"

from kernelgym.errors import KernelGymError
from kernelgym.tasks import Task, TaskSet

_LAZY = {
    "evaluate": "kernelgym.evaluation",
    "EvalResult": "kernelgym.evaluation.result",
    "Verdict": "kernelgym.evaluation.result",
    "EvalOptions": "kernelgym.evaluation.options",
    "EvalPool": "kernelgym.workers.pool",
    "PoolConfig": "kernelgym.workers.pool",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'kernelgym' has no attribute {name!r}")


def _register() -> None:
    try:
        from kernelgym.envs.registration import register_envs
    except ImportError:  # the environments are not written yet in this checkout
        return
    register_envs()


_register()

__all__ = ["EvalOptions", "EvalPool", "EvalResult", "KernelGymError", "PoolConfig", "Task", "TaskSet", "Verdict",
           "__version__", "evaluate"]
