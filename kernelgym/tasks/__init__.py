"""Tasks: the Task dataclass, lazy task sets and the loaders for every source of problems."""

from kernelgym.tasks.loaders import (
    bundled,
    bundled_backward,
    from_hf_dataset,
    from_path,
    kernelbench,
    load_suite,
    resolve_task,
)
from kernelgym.tasks.task import Task, content_hash, task_from_source
from kernelgym.tasks.taskset import TaskSet

__all__ = [
    "Task", "TaskSet", "bundled", "bundled_backward", "content_hash", "from_hf_dataset", "from_path",
    "kernelbench", "load_suite", "resolve_task", "task_from_source",
]
