"""A bench's output folder: run.json (what was run; a rerun must be the same run) and results.jsonl (one
line per finished episode, fsynced, a torn last line cut off), from which a rerun learns what is left."""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from kernelgym.agents.baselines.common import episode_key
from kernelgym.agents.bench_config import BenchConfig, BenchError
from kernelgym.agents.bench_plan import BenchPlan
from kernelgym.agents.report import episode_judged

# Fields that define a run: a rerun into the same folder must agree on these (tasks and samples may grow).
IDENTITY = ("env", "suite", "policy", "baseline", "baseline_options", "backend", "size", "turns", "reward",
            "eval_options", "shapes", "dtype")


class ResultsFile:
    """Append-only JSONL of finished episodes; safe against kills (each line is flushed and fsynced)."""

    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()
        self.repaired = self._cut_torn_tail()

    def _cut_torn_tail(self) -> bool:
        if not self.path.exists():
            return False
        with open(self.path, "rb+") as f:
            data = f.read()
            if not data or data.endswith(b"\n"):
                return False
            f.truncate(data.rfind(b"\n") + 1)  # the last line never finished: that episode runs again
            return True

    def read(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        records: list[dict[str, Any]] = []
        seen: dict[str, int] = {}
        with open(self.path, encoding="utf-8") as f:
            for line in f:
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a damaged line (not the tail): its episode is missing and will run again
                key = record.get("key") or episode_key(record["task_id"], int(record.get("sample", 0)))
                if key not in seen:
                    seen[key] = len(records)
                    records.append(record)
                elif not episode_judged(records[seen[key]]):  # a later run judged what the judge failed
                    records[seen[key]] = record
        return records

    def append(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False, default=str) + "\n"
        with self._lock, open(self.path, "a", encoding="utf-8") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._+-]+", "_", text).strip("_")[:80] or "run"


def default_out(config: BenchConfig) -> Path:
    options = (f"__{config.shapes}" if config.shapes != "shown" else "") + \
        (f"__{config.dtype}" if config.dtype else "")
    tasks = _slug(Path(config.suite).name) if config.suite else _slug(config.env)
    return Path("runs") / "bench" / f"{tasks}__{_slug(config.policy)}__{config.baseline}{options}"


def _check_identity(path: Path, current: dict[str, Any]) -> None:
    if not path.exists():
        return
    previous = json.loads(path.read_text())
    different = {k: (previous.get(k), current.get(k)) for k in IDENTITY if previous.get(k) != current.get(k)}
    if different:
        detail = "; ".join(f"{k}: {a!r} then, {b!r} now" for k, (a, b) in different.items())
        raise BenchError(f"{path.parent} holds a different run ({detail}); "
                         "use another --out to start a new one")


def record_run(out: Path, config: BenchConfig, plan: BenchPlan, policy: Any, command: str | None) -> None:
    """Write run.json, after checking that a run already in `out` is the same run."""
    run_info = {**{k: v for k, v in asdict(config).items() if k != "out"}, "turns": plan.turns,
                "env_ids": plan.env_ids, "policy_name": getattr(policy, "name", config.policy),
                "command": command, "tasks_selected": plan.task_list(), "tasks_left_out": plan.left_out}
    _check_identity(out / "run.json", run_info)
    (out / "run.json").write_text(json.dumps(run_info, indent=2, default=str))


def pending_episodes(results: ResultsFile, chosen: Sequence[str], samples: int,
                     stop_after: int | None) -> tuple[list[tuple[str, int]], int]:
    """The (task id, sample) pairs still to run, and how many are already finished."""
    done = {r["key"] for r in results.read() if "key" in r and episode_judged(r)}  # not judged: run again
    keys = [(t, s) for t in chosen for s in range(samples)]
    todo = [k for k in keys if episode_key(*k) not in done]
    skipped = len(keys) - len(todo)
    return (todo[:stop_after] if stop_after is not None else todo), skipped

