"""Evaluation: the pipeline of named stages, their results, and `evaluate()` on a shared pool."""

from __future__ import annotations

import atexit
import os
import threading

from kernelgym.evaluation.options import EvalOptions
from kernelgym.evaluation.result import EvalResult, Verdict

_default_pool = None
_default_lock = threading.Lock()


def _forget_inherited_pool() -> None:
    # A forked child (e.g. an AsyncVectorEnv worker) inherits this object, whose sockets lead to the parent's
    # workers: it must start its own pool (and the lock may have been held at the fork).
    global _default_pool, _default_lock
    _default_pool = None
    _default_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_inherited_pool)


def default_pool():
    """The process-wide pool that `evaluate()` and the environments share (created on first use)."""
    global _default_pool
    with _default_lock:
        if _default_pool is None or _default_pool._closed:
            from kernelgym.workers.pool import EvalPool

            _default_pool = EvalPool()
            atexit.register(_default_pool.close)
        return _default_pool


def evaluate(task, source, backend: str = "cpp", size: str | None = None, pool=None, **options) -> EvalResult:
    """Evaluate one solution source for a task (a Task, a task id or a problem file's path)."""
    if isinstance(task, str):
        from kernelgym.tasks import resolve_task

        task = resolve_task(task)
    from kernelgym.backends import get as get_backend

    if (size or ("cpu" if get_backend(backend).device == "cpu" else None)) == "cpu":
        from kernelgym.tasks.cpu_size import with_cpu_size

        task = with_cpu_size(task)  # a task that ships only its GPU size (KernelBench) gets a derived one
    return (pool or default_pool()).evaluate(task, source, backend=backend, size=size, **options)


__all__ = ["EvalOptions", "EvalResult", "Verdict", "default_pool", "evaluate"]
