"""kernelgym: multi-turn Gymnasium environments for LLM agents that write GPU kernels.

`import kernelgym` is light (no LLM library is loaded) and registers the environment ids.
"""

from __future__ import annotations

from kernelgym._lazy import lazy_getattr

__version__ = "0.1.0"

# The ids' registration is light (no torch, no LLM library); an ImportError there is a bug and must show.
from kernelgym.envs.registration import register_envs
from kernelgym.errors import KernelGymError
from kernelgym.tasks import Task, TaskSet

_LAZY = {
    "evaluate": "kernelgym.workers.evaluate",
    "EvalResult": "kernelgym.evaluation.result",
    "Verdict": "kernelgym.evaluation.result",
    "EvalOptions": "kernelgym.evaluation.options",
    "EvalPool": "kernelgym.workers.pool",
    "PoolConfig": "kernelgym.workers.pool",
}


__getattr__ = lazy_getattr("kernelgym", _LAZY)

register_envs()

__all__ = ["EvalOptions", "EvalPool", "EvalResult", "KernelGymError", "PoolConfig", "Task", "TaskSet",
           "Verdict", "__version__", "evaluate"]
