"""The task set of a bench: its environment ids (a family expands to its levels, a task source to the levels
it has), the tasks they offer, those a `--tasks` spec and the policy select, those a folder's checks leave
out, and the number of turns; fixed before the first episode (`plan_bench`)."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelgym.agents.bench_config import DEFAULT_ENV, SUITE_ENVS, BenchConfig, BenchError
from kernelgym.errors import did_you_mean


def expand_env_ids(spec: str) -> list[str]:
    """'KernelGym-v0' or 'KernelGym' -> its registered levels; 'A,B' -> both; an id -> itself."""
    import gymnasium as gym

    import kernelgym  # noqa: F401 - registers the ids

    ids: list[str] = []
    for part in [p.strip() for p in spec.split(",") if p.strip()]:
        if part in gym.registry:
            ids.append(part)
            continue
        family = re.sub(r"-v\d+$", "", part)
        levels = sorted(i for i in gym.registry if re.fullmatch(rf"{re.escape(family)}-L\d+-v\d+", i))
        if not levels:
            known = sorted({re.sub(r"-L\d+-v\d+$", "", i) for i in gym.registry if "-L" in i and
                            i.startswith(("KernelGym", "KernelBench"))})
            hint = did_you_mean(part, [*known, *(i for i in gym.registry if i.startswith(tuple(known)))])
            raise BenchError(f"unknown environment {part!r}; use an id like KernelGym-L1-v0 or a family "
                             f"({', '.join(known)}) for all its levels.{hint}")
        ids += levels
    return ids


def bench_env_ids(config: BenchConfig) -> list[str]:
    """The env ids a bench runs: `config.env`'s, or those of `config.suite` (within an --env given too)."""
    if config.suite is None:
        return expand_env_ids(config.env)
    if config.suite in SUITE_ENVS:
        return expand_env_ids(SUITE_ENVS[config.suite])
    from kernelgym.tasks import load_suite
    from kernelgym.tasks.folders import is_folder_source
    from kernelgym.tasks.loaders import read_path

    # a folder's bad files are listed by plan_bench: read without the warning
    tasks = read_path(config.suite).tasks if is_folder_source(config.suite) else \
        load_suite(config.suite, kernelbench_root=config.kernelbench_root)
    levels = sorted({t.level for t in tasks})
    if not levels:
        raise BenchError(f"--suite {config.suite} holds no task that can be read (kernelgym tasks check "
                         f"{config.suite} says why)")
    ids = [f"KernelGym-L{level}-v0" for level in levels]
    if config.env != DEFAULT_ENV:  # --env KernelGym-L2-v0 --suite DIR: level 2 of DIR
        ids = [i for i in expand_env_ids(config.env) if i in ids]
    if not ids:
        raise BenchError(f"--suite {config.suite} has no tasks at the levels of --env {config.env}")
    return ids


def _matches(task_id: str, pattern: str) -> bool:
    short = task_id.split("/", 1)[1] if "/" in task_id else task_id
    if any(c in pattern for c in "*?["):
        return fnmatch.fnmatchcase(task_id, pattern) or fnmatch.fnmatchcase(short, pattern)
    return pattern in task_id


def select(task_ids: Sequence[str], spec: str, policy: Any) -> list[str]:
    spec = (spec or "auto").strip()
    if spec == "all":
        return list(task_ids)
    if spec in ("auto", "covered"):
        covers = getattr(policy, "covers", None)
        if covers is None:
            if spec == "covered":
                raise BenchError("--tasks covered needs a policy that declares its tasks (replay)")
            return list(task_ids)
        return [t for t in task_ids if covers(t)]
    patterns = [p.strip() for p in spec.split(",") if p.strip()]
    return [t for t in task_ids if any(_matches(t, p) for p in patterns)]


@dataclass
class BenchPlan:
    """What a bench runs, fixed before the first episode (and recorded in run.json)."""

    env_ids: list[str]
    tasks: dict[str, tuple[str, Any]]  # task id -> (env id, Task), every task the envs offer
    chosen: list[str]  # the selected task ids, in order
    turns: int
    env_kwargs: dict[str, Any]  # for gym.make, max_turns included
    left_out: list[dict[str, str]] = field(default_factory=list)  # a folder's unfit tasks and files, and why

    def task_list(self) -> list[dict[str, Any]]:
        return [{"id": t, "level": self.tasks[t][1].level, "category": self.tasks[t][1].category,
                 "env": self.tasks[t][0]} for t in self.chosen]


def _env_kwargs(config: BenchConfig, out: Path, pool: Any) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"backend": config.backend, "size": config.size, "pool": pool,
                              "reward": config.reward, "trajectory_path": str(out / "trajectories.jsonl")}
    if config.kernelbench_root:
        kwargs["kernelbench_root"] = config.kernelbench_root
    if config.eval_options:
        kwargs["eval_options"] = dict(config.eval_options)
    if config.shapes != "shown":
        kwargs["shapes"] = config.shapes
    if config.dtype:
        kwargs["dtype"] = config.dtype
    if config.suite is not None and config.suite not in SUITE_ENVS:
        kwargs["suite"] = config.suite
    return kwargs


def _offered_tasks(env_ids: Sequence[str], env_kwargs: dict[str, Any]) -> dict[str, tuple[str, Any]]:
    """Every task of the environments, by id (the first environment offering an id wins)."""
    import gymnasium as gym

    tasks: dict[str, tuple[str, Any]] = {}
    for env_id in env_ids:
        probe = gym.make(env_id, **{**env_kwargs, "trajectory_path": None})
        for task in probe.unwrapped.tasks:
            tasks.setdefault(task.id, (env_id, task))
        probe.close()
    return tasks


def _turns(config: BenchConfig, policy: Any, chosen: list[str]) -> int:
    if config.turns is not None:
        return config.turns
    if config.baseline == "one_shot":
        return 1
    suggest = getattr(policy, "suggested_turns", None)
    return int(suggest(chosen)) if suggest else 4


def plan_bench(config: BenchConfig, env_ids: list[str], policy: Any, out: Path, pool: Any) -> BenchPlan:
    """Resolve the tasks and the number of turns; fails before any episode runs."""
    import warnings  # here: run_bench and _report name their list of warnings so

    env_kwargs = _env_kwargs(config, out, pool)
    with warnings.catch_warnings():  # a folder's unreadable files: listed in left_out instead
        warnings.simplefilter("ignore")
        tasks = _offered_tasks(env_ids, env_kwargs)
    left_out = _unfit(config, tasks)
    chosen = select([t for t in tasks if t not in {entry["id"] for entry in left_out}], config.tasks, policy)
    if not chosen:
        raise BenchError(f"no task of {config.suite or config.env} matches --tasks {config.tasks!r}")
    turns = _turns(config, policy, chosen)
    return BenchPlan(env_ids, tasks, chosen, turns, {**env_kwargs, "max_turns": turns}, left_out)


def _unfit(config: BenchConfig, offered: dict[str, Any]) -> list[dict[str, str]]:
    """A folder's tasks that `kernelgym tasks check` fails (the reference raises, its output is constant, ...)
    and its files that are not tasks: a bench leaves them out. The built-in suites are checked by tests."""
    from kernelgym.tasks.check import check_task
    from kernelgym.tasks.folders import is_folder_source
    from kernelgym.tasks.loaders import read_path

    if config.suite is None or not is_folder_source(config.suite):
        return []
    bad = [{"id": b.path, "reason": b.error} for b in read_path(config.suite).bad_files]
    checks = [check_task(task, [config.size]) for _, task in offered.values()]
    return bad + [{"id": c.name, "reason": c.reason} for c in checks if not c.ok]

