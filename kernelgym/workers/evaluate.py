"""`kernelgym.evaluate()`: one solution judged on the process-wide pool."""

from __future__ import annotations

from kernelgym.evaluation.result import EvalResult
from kernelgym.workers.pool import default_pool


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
