"""Judge a folder of generations (KernelBench's layouts) on one pool: one row per file, then a summary.

`kernelgym eval --suite ... --level N DIR` is the command; this module holds what it does, so that it can
be called from Python too. The summary follows KernelBench: fast_p is the share of all (task, sample)
pairs whose solution is correct with a speedup above p, where tasks of the judged levels without any file
and files that could not be judged count as not correct; the geometric mean is over correct solutions.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelgym.errors import KernelGymError
from kernelgym.tasks.generations import Generation, find_generations, missing_tasks

FAST_P = (0.0, 1.0, 1.5, 2.0)
ROW_FIELDS = (
    "verdict",
    "correct",
    "speedup",
    "verified_speedup",
    "runtime_ms",
    "ref_runtime_ms",
    "reasons",
    "size",
    "backend",
    "wall_s",
)


@dataclass
class FolderEvalConfig:
    suite: str = "bundled"  # bundled, kernelbench, hf, or a path to problem files
    level: int | None = None
    kernelbench_root: str | None = None
    backend: str = "cpp"
    size: str | None = None  # None: gpu where candidates run on a GPU, else cpu
    timeout_s: float = 60.0
    workers: int = 1
    options: dict[str, Any] = field(default_factory=dict)  # more EvalOptions (shapes, dtype, ...)


@dataclass
class FolderEvalOutcome:
    rows: list[dict[str, Any]]
    missing: list[str]  # ids of tasks no file answers
    summary: dict[str, Any] = field(default_factory=dict)


def _row(gen: Generation, **values: Any) -> dict[str, Any]:
    return {
        "solution": str(gen.path),
        "task_id": gen.task.id if gen.task else None,
        "level": gen.level,
        "problem_id": gen.problem_id,
        "sample": gen.sample,
        **values,
    }


def _result_row(gen: Generation, result) -> dict[str, Any]:
    data = result.to_dict()
    values = {k: data.get(k) for k in ROW_FIELDS}
    values["verified_speedup"] = result.verified_speedup
    return _row(gen, **values)


def _chosen_size(config: FolderEvalConfig) -> str:
    from kernelgym.backends import get
    from kernelgym.workers.pool import has_gpu

    if config.size:
        return config.size
    return "gpu" if get(config.backend).device == "cuda" and has_gpu() else "cpu"


def judge_folder(
    folder: str | Path,
    config: FolderEvalConfig,
    on_row: Callable[[dict[str, Any]], None] | None = None,
    on_start: Callable[[int], None] | None = None,
) -> FolderEvalOutcome:
    """Judge every generation under `folder`; `on_row` sees each row as it is finished."""
    from kernelgym.tasks import load_suite
    from kernelgym.tasks.cpu_size import with_cpu_size
    from kernelgym.workers.pool import EvalPool

    tasks = list(load_suite(config.suite, level=config.level, kernelbench_root=config.kernelbench_root))
    generations = find_generations(folder, tasks, config.level)
    if not generations:
        raise KernelGymError(f"{folder} holds no solution files (.py)")
    size = _chosen_size(config)
    rows: list[dict[str, Any]] = []

    def finish(row: dict[str, Any]) -> None:
        rows.append(row)
        if on_row is not None:
            on_row(row)

    if on_start is not None:
        on_start(len(generations))
    runnable: list[tuple[Generation, Any, bytes]] = []
    for gen in generations:
        if gen.task is None:
            finish(_row(gen, verdict=None, correct=False, error=gen.problem))
            continue
        try:
            runnable.append(
                (gen, with_cpu_size(gen.task) if size == "cpu" else gen.task, gen.path.read_bytes())
            )
        except (KernelGymError, OSError) as exc:
            finish(_row(gen, verdict=None, correct=False, error=str(exc)))
    if runnable:  # a pool starts worker processes: only when there is something to judge
        with EvalPool(workers=config.workers) as pool:
            pending: list[tuple[Generation, Future]] = [
                (
                    gen,
                    pool.submit(task, source, backend=config.backend, size=size, timeout_s=config.timeout_s,
                                **config.options),
                )
                for gen, task, source in runnable
            ]
            for gen, future in pending:
                finish(_result_row(gen, future.result()))
    missing = [t.id for t in missing_tasks(generations, tasks, config.level)]
    order = {str(g.path): i for i, g in enumerate(generations)}
    rows.sort(key=lambda r: order[r["solution"]])
    return FolderEvalOutcome(rows, missing, summarize_rows(rows, missing))


def summarize_rows(rows: list[dict[str, Any]], missing: list[str]) -> dict[str, Any]:
    """Verdict counts, correct, fast_p (missing tasks and unjudged files count as not correct), geomean."""
    from kernelgym.agents.report import fast_p, geomean

    expected = len(rows) + len(missing)
    verdicts = Counter(r["verdict"] or "not_judged" for r in rows)
    speeds = [r["speedup"] for r in rows if r.get("correct") and _finite(r.get("speedup"))]
    return {
        "solutions": len(rows),
        "missing_tasks": len(missing),
        "expected": expected,
        "verdicts": dict(verdicts.most_common()),
        "ok": verdicts.get("ok", 0),
        "correct": sum(bool(r.get("correct")) for r in rows),
        "fast_p": {f"{p:g}": fast_p(rows, expected, p) for p in FAST_P},
        "fast_1_verified": fast_p(rows, expected, 1.0, verified=True),
        "geomean_speedup": geomean(speeds),
    }


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value) and value > 0
