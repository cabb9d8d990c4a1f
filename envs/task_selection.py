"""The tasks an environment samples from: a suite, a KernelBench checkout (or its Hugging Face dataset in the
local cache), or the caller's own, narrowed by level, ids and filter; read at construction, so that a missing
suite or a task that cannot be built fails there and never at a step."""

from __future__ import annotations

import inspect
import os
from collections.abc import Iterable

from kernelgym.envs.config import EnvConfig
from kernelgym.errors import ConfigError, SuiteUnavailableError
from kernelgym.tasks import Task, TaskSet, from_hf_dataset, kernelbench, load_suite
from kernelgym.tasks.level4 import without_unbuildable


def _hf_dataset_cached() -> bool:
    home = os.environ.get("HF_HOME", os.path.join(os.path.expanduser("~"), ".cache", "huggingface"))
    hub = os.environ.get("HF_HUB_CACHE", os.path.join(home, "hub"))
    data = os.environ.get("HF_DATASETS_CACHE", os.path.join(home, "datasets"))
    candidates = [os.path.join(hub, "datasets--ScalingIntelligence--KernelBench"),
                  os.path.join(data, "ScalingIntelligence___kernel_bench")]
    return any(os.path.isdir(p) for p in candidates)


def _kernelbench_tasks(config: EnvConfig) -> list[Task]:
    """A checkout (kwarg, then $KERNELBENCH_ROOT), else the HF dataset if it is in the local cache."""
    try:
        return list(kernelbench(config.kernelbench_root, config.level))
    except SuiteUnavailableError as missing:
        if config.kernelbench_root is None and _hf_dataset_cached():
            try:
                return list(from_hf_dataset(level=config.level))
            except SuiteUnavailableError:
                pass
        raise missing from None


def select_tasks(config: EnvConfig, tasks: TaskSet | Iterable[Task] | None = None) -> list[Task]:
    """The tasks an environment samples from, read now so that a missing suite fails at construction."""
    if tasks is not None:
        found = list(tasks)
    elif config.suite == "kernelbench":
        found = _kernelbench_tasks(config)
    else:
        found = list(load_suite(config.suite, level=config.level, kernelbench_root=config.kernelbench_root))
    if config.level is not None:
        found = [t for t in found if t.level == config.level]
    if not found:
        where = config.suite if tasks is None else "the given tasks"
        raise SuiteUnavailableError(f"no tasks in {where}"
                                    + (f" at level {config.level}" if config.level else ""))
    chosen = TaskSet.of(found, config.suite)
    if config.task_ids:
        chosen = chosen.filter(ids=config.task_ids)
    if callable(config.task_filter):
        chosen = chosen.filter(config.task_filter)
    elif isinstance(config.task_filter, dict):
        try:
            chosen = chosen.filter(**config.task_filter)
        except TypeError as error:  # an unknown key: name the ones TaskSet.filter takes
            known = ", ".join(p for p in inspect.signature(TaskSet.filter).parameters if p != "self")
            raise ConfigError(f"task_filter={config.task_filter!r}: {error}; its keys are those of "
                              f"TaskSet.filter ({known})") from None
    elif config.task_filter is not None:
        raise ConfigError("task_filter must be a dict of TaskSet.filter arguments or a predicate")
    # Level 4's models need transformers and a causal-LM class per architecture: a problem that cannot be
    # built is named here, at construction, never at its first step.
    selected = without_unbuildable(chosen, named=bool(config.task_ids))
    if not selected:
        raise ConfigError(f"no task matches task_ids={config.task_ids!r}, task_filter={config.task_filter!r} "
                          f"among {len(found)} tasks (e.g. {found[0].id})")
    return selected

