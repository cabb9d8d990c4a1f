"""JSONL trajectories: one line per turn, grouped into episodes by `episode_id`.

A line per turn (rather than per episode) means a crash or a kill mid-episode loses at most the turn in
flight, and several processes (async vector envs) can append to one file: each line is written whole,
under an advisory lock.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

try:  # POSIX only; elsewhere one process per file is assumed
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None

SCHEMA = 1


class TrajectoryWriter:
    def __init__(self, path: str | os.PathLike):
        self.path = Path(path).expanduser()
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, record: dict[str, Any]) -> None:
        line = json.dumps({"schema": SCHEMA, **record}, ensure_ascii=False, default=_plain) + "\n"
        # Opened per write: cheap next to an evaluation, and nothing is left buffered if the process dies.
        with open(self.path, "a", encoding="utf-8") as f:
            if fcntl is not None:
                fcntl.flock(f, fcntl.LOCK_EX)
            try:
                f.write(line)
                f.flush()
            finally:
                if fcntl is not None:
                    fcntl.flock(f, fcntl.LOCK_UN)


def _plain(value: Any) -> Any:
    if hasattr(value, "tolist"):  # numpy scalars and arrays
        return value.tolist()
    if hasattr(value, "value"):  # enums
        return value.value
    return str(value)


def read_turns(path: str | os.PathLike) -> Iterator[dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def read_episodes(path: str | os.PathLike) -> list[dict[str, Any]]:
    """Episodes in the order they started: {episode_id, task_id, seed, ..., turns: [...], total_reward}."""
    episodes: dict[str, dict[str, Any]] = {}
    for turn in read_turns(path):
        episode = episodes.setdefault(turn["episode_id"], {
            key: turn.get(key)
            for key in ("episode_id", "env_id", "task_id", "seed", "backend", "size", "reward_name")
        } | {"turns": []})
        episode["turns"].append(turn)
    for episode in episodes.values():
        episode["turns"].sort(key=lambda t: t["turn"])
        episode["total_reward"] = sum(t["reward"] for t in episode["turns"])
        last = episode["turns"][-1]
        episode["terminated"], episode["truncated"] = last["terminated"], last["truncated"]
        episode["best_speedup"] = last.get("best_speedup", 0.0)
    return list(episodes.values())
