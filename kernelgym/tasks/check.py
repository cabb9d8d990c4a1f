"""`kernelgym tasks check`: is each task of a source fit to be judged? A finding per task and unreadable file.

A task is checked by running its reference at the cpu size the CPU judge uses (declared in its metadata,
else derived: kernelgym.tasks.cpu_size) and, when its metadata declares sizes, also at its gpu size (the
file's own constants), timing it at the cpu size, and putting it through the degenerate-task screen
(screen.py). The reference runs in this process, as the screen's does: a task's reference is trusted code.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from kernelgym.tasks.task import Task

# The judge runs the reference dozens of times per verdict (correctness trials, then timing): a forward that
# takes longer than this at the cpu size makes every turn minutes long.
SLOW_CPU_S = 1.0


@dataclass
class TaskCheck:
    """One task's finding (`name` is its id), or an unreadable file's (`name` is its path)."""

    name: str
    reason: str = ""  # empty when the task is fit to be judged
    task: Task | None = None

    @property
    def ok(self) -> bool:
        return not self.reason

    def line(self) -> str:
        return f"ok    {self.name}" if self.ok else f"FAIL  {self.name}: {self.reason}"

    def to_dict(self) -> dict:
        return {"id": self.name, "ok": self.ok, "reason": self.reason}


def check_task(task: Task, sizes: Sequence[str] | None = None) -> TaskCheck:
    """Run the reference at `sizes` (default: each the task declares, and the cpu size), time it at the cpu
    size, screen it."""
    from kernelgym.tasks.cpu_size import SizeUnavailableError, reference_ms, with_cpu_size
    from kernelgym.tasks.screen import screen_task

    # A file without metadata declares no size: its own constants may be a GPU's (KernelBench's are up to
    # GBs), so only its derived cpu size runs here.
    sizes = list(sizes or (["cpu", "gpu"] if task.has_size("cpu") else ["cpu"]))
    try:
        sized = with_cpu_size(task) if "cpu" in sizes else task
    except SizeUnavailableError as exc:
        return TaskCheck(task.id, str(exc), task)
    for size in sizes:
        try:
            ms = reference_ms(sized.source_at(size))
        except Exception as exc:  # noqa: BLE001 - a reference that fails is this check's finding
            if size == "gpu" and isinstance(exc, MemoryError):  # over 1 GiB of inputs and parameters: the
                continue  # size is meant for a GPU's memory, not this process's
            return TaskCheck(task.id, f"reference raises at the {size} size: {type(exc).__name__}: "
                                      f"{str(exc)[:200]}", task)
        if size == "cpu" and ms > SLOW_CPU_S * 1000:
            slow = f"too slow at the cpu size ({ms / 1000:.1f} s a forward, over {SLOW_CPU_S:g} s)"
            return TaskCheck(task.id, f"{slow}: give it smaller cpu constants (KERNELGYM sizes)", task)
    screen = screen_task(sized, "cpu" if "cpu" in sizes else sizes[0])
    if not screen.passed:
        return TaskCheck(task.id, "; ".join(screen.flags) or screen.error, task)
    return TaskCheck(task.id, "", task)


def check_source(source: str, *, level: int | None = None, kernelbench_root: str | None = None,
                 sizes: Sequence[str] | None = None) -> list[TaskCheck]:
    """Every task of a source checked, and for a folder each file that could not be read as a task."""
    from kernelgym.tasks.folders import is_folder_source
    from kernelgym.tasks.loaders import load_suite, read_path

    if is_folder_source(source):
        read = read_path(source, level)
        tasks, bad = read.tasks, [TaskCheck(os.path.relpath(b.path), b.error) for b in read.bad_files]
    else:
        tasks, bad = list(load_suite(source, level=level, kernelbench_root=kernelbench_root)), []
    return bad + [check_task(t, sizes) for t in tasks]
