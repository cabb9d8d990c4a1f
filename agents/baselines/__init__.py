"""Prompting baselines: one_shot, best_of_n, refine, kforge, davinci (skills from the library).
Each has a config dataclass and
`run_episode(env, policy, task_id, config, sample=, seed=) -> EpisodeRecord`; `run` loops over tasks."""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from typing import Any

from kernelgym.agents.baselines.common import EpisodeRecord, TurnRecord, episode_key
from kernelgym.errors import ConfigError, did_you_mean

BASELINES = ("one_shot", "best_of_n", "refine", "kforge", "davinci")
CONFIGS = {"one_shot": "OneShotConfig", "best_of_n": "BestOfNConfig", "refine": "RefineConfig",
           "kforge": "KForgeConfig", "davinci": "DavinciConfig"}


def get(name: str):
    """The baseline's module (with `run_episode`, `NAME` and its config class)."""
    if name not in BASELINES:
        raise ConfigError(f"unknown baseline {name!r}; choose from "
                          f"{', '.join(BASELINES)}.{did_you_mean(name, BASELINES)}")
    return importlib.import_module(f"kernelgym.agents.baselines.{name}")


def make_config(name: str, **options: Any):
    return getattr(get(name), CONFIGS[name])(**options)


def run(name: str, env, policy, task_ids: Iterable[str] | None = None, config: Any = None, *,
        samples: int = 1, seed: int | None = None) -> list[EpisodeRecord]:
    """Episodes of baseline `name` on `env` for each task (default: all the env's tasks) and sample."""
    module = get(name)
    ids = list(task_ids) if task_ids is not None else [t.id for t in env.unwrapped.tasks]
    records = []
    for task_id in ids:
        for sample in range(samples):
            records.append(module.run_episode(env, policy, task_id, config, sample=sample,
                                              seed=None if seed is None else seed + sample))
    return records


__all__ = ["BASELINES", "EpisodeRecord", "TurnRecord", "episode_key", "get", "make_config", "run"]
