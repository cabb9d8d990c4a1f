"""TaskSet: a lazy, composable sequence of tasks (`head`, `shuffle`, `filter`)."""

from __future__ import annotations

import fnmatch
import random
from collections.abc import Callable, Iterable, Iterator

from kernelgym.errors import TaskNotFoundError, did_you_mean
from kernelgym.tasks.task import Task


class TaskSet:
    """Tasks are read only when the set is iterated; every operation returns a new set."""

    def __init__(self, load: Callable[[], Iterable[Task]], description: str = "tasks"):
        self._load = load
        self.description = description
        self._cache: list[Task] | None = None

    @classmethod
    def of(cls, tasks: Iterable[Task], description: str = "tasks") -> TaskSet:
        fixed = list(tasks)
        return cls(lambda: fixed, description)

    def _tasks(self) -> list[Task]:
        if self._cache is None:
            self._cache = list(self._load())
        return self._cache

    def __iter__(self) -> Iterator[Task]:
        return iter(self._tasks())

    def __len__(self) -> int:
        return len(self._tasks())

    def __bool__(self) -> bool:
        return len(self) > 0

    def __repr__(self) -> str:
        return f"TaskSet({self.description})"

    def ids(self) -> list[str]:
        return [t.id for t in self]

    def get(self, task_id: str) -> Task:
        """Look a task up by full id (`bundled/L1/19_ReLU`) or by an unambiguous suffix (`L1/19_ReLU`)."""
        exact = [t for t in self if t.id == task_id]
        if exact:
            return exact[0]
        matches = [t for t in self if t.id.endswith("/" + task_id) or t.id.split("/", 1)[-1] == task_id]
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            raise TaskNotFoundError(f"{task_id!r} is ambiguous: {[t.id for t in matches][:5]}")
        known = [name for t in self for name in (t.id, t.id.split("/", 1)[-1])]
        raise TaskNotFoundError(f"no task {task_id!r} in {self.description}.{did_you_mean(task_id, known)}")

    def __getitem__(self, key: int | str) -> Task:
        return self.get(key) if isinstance(key, str) else self._tasks()[key]

    def head(self, n: int) -> TaskSet:
        return TaskSet(lambda: self._tasks()[:n], f"{self.description}.head({n})")

    def shuffle(self, seed: int) -> TaskSet:
        def load() -> list[Task]:
            tasks = list(self._tasks())
            random.Random(seed).shuffle(tasks)
            return tasks

        return TaskSet(load, f"{self.description}.shuffle({seed})")

    def filter(
        self,
        predicate: Callable[[Task], bool] | None = None,
        *,
        level: int | Iterable[int] | None = None,
        category: str | Iterable[str] | None = None,
        name: str | None = None,
        ids: Iterable[str] | None = None,
    ) -> TaskSet:
        """Keep tasks matching every given criterion; `name` is a case-insensitive glob or substring."""
        levels = {level} if isinstance(level, int) else set(level) if level is not None else None
        categories = {category} if isinstance(category, str) else set(category) if category else None
        wanted_ids = set(ids) if ids is not None else None

        def keep(task: Task) -> bool:
            if levels is not None and task.level not in levels:
                return False
            if categories is not None and task.category not in categories:
                return False
            if name is not None and not _name_matches(task.name, name):
                return False
            if wanted_ids is not None and not any(task.id == i or task.id.endswith("/" + i)
                                                  for i in wanted_ids):
                return False
            return predicate is None or predicate(task)

        return TaskSet(lambda: [t for t in self._tasks() if keep(t)], f"{self.description}.filter()")

    def __add__(self, other: TaskSet) -> TaskSet:
        return TaskSet(lambda: [*self._tasks(), *other._tasks()], f"{self.description}+{other.description}")


def _name_matches(name: str, pattern: str) -> bool:
    name, pattern = name.lower(), pattern.lower()
    if any(ch in pattern for ch in "*?["):
        return fnmatch.fnmatch(name, pattern)
    return pattern in name
