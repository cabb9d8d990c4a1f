"""A folder of generated solutions in KernelBench's layouts, matched to the tasks they answer.

Two layouts are read (both may be mixed in one folder, searched recursively):
- KernelBench's run folder: `level_1_problem_19_sample_0_kernel.py` (problem = the task file's number);
- one folder per level named like the task files: `level1/19_ReLU.py` (sample 0), or
  `level1/19_ReLU_sample_2.py`.
Other `.py` files are listed as unmatched, so nothing in the folder is silently skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from kernelgym.tasks.task import Task

_RUN_FILE = re.compile(r"^level_(?P<level>\d+)_problem_(?P<pid>\d+)_sample_(?P<sample>\d+)_kernel\.py$")
_TASK_FILE = re.compile(r"^(?P<pid>\d+)_(?P<rest>.+?)(?:_sample_(?P<sample>\d+))?\.py$")
_LEVEL_DIR = re.compile(r"^level_?(?P<level>\d+)$")


@dataclass
class Generation:
    path: Path
    level: int | None
    problem_id: int | None
    sample: int = 0
    task: Task | None = None
    problem: str = ""  # why no task matched, when none did

    @property
    def key(self) -> str:
        return f"{self.task.id if self.task else self.path.name}#{self.sample}"


def _parse(path: Path) -> tuple[int | None, int | None, int]:
    run = _RUN_FILE.match(path.name)
    if run:
        return int(run["level"]), int(run["pid"]), int(run["sample"])
    named = _TASK_FILE.match(path.name)
    level_dir = next((m for p in reversed(path.parent.parts) if (m := _LEVEL_DIR.match(p))), None)
    if named and level_dir:
        return int(level_dir["level"]), int(named["pid"]), int(named["sample"] or 0)
    return None, None, 0


def find_generations(folder: str | Path, tasks: list[Task], level: int | None = None) -> list[Generation]:
    """Every solution file under `folder`, each matched to its task by (level, problem number)."""
    root = Path(folder)
    by_key = {(t.level, t.problem_id): t for t in tasks}
    found: list[Generation] = []
    for path in sorted(root.rglob("*.py")):
        if path.name.startswith((".", "_")) or path.name.endswith("_prompt.py"):
            continue
        lv, pid, sample = _parse(path)
        if level is not None and lv is not None and lv != level:
            continue
        item = Generation(path, lv, pid, sample)
        if lv is None:
            item.problem = (
                "not a KernelBench generation name (level_<L>_problem_<P>_sample_<S>_kernel.py, "
                "or level<L>/<P>_<name>.py)"
            )
        elif (lv, pid) not in by_key:
            item.problem = f"no task of level {lv} with problem number {pid} in the suite"
        else:
            item.task = by_key[(lv, pid)]
        found.append(item)
    return sorted(found, key=lambda g: (g.level or 0, g.problem_id or 0, g.sample, str(g.path)))


def missing_tasks(generations: list[Generation], tasks: list[Task], level: int | None = None) -> list[Task]:
    """Tasks (of the levels the folder answers, or `level`) that no file answers: KernelBench counts them
    as not correct."""
    levels = {level} if level is not None else {g.level for g in generations if g.task is not None}
    answered = {g.task.id for g in generations if g.task is not None}
    return [t for t in tasks if t.level in levels and t.id not in answered]
