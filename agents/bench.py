"""The bench runner: episodes of a baseline with a policy over a task set, resumable, then the report.

Output folder:
- run.json — what was run (checked on resume: the same command continues, a different one is refused)
- results.jsonl — one line per finished episode, appended with flush + fsync as each one ends, keyed by
  (task id, sample index); a rerun skips the keys already there, so an interrupted run loses at most the
  episodes that were in flight, and a torn last line (a kill mid-write) is cut off on the next start
- trajectories.jsonl — the environment's per-turn log (prompts, replies, feedback, results)
- errors.jsonl — episodes that raised (a policy or endpoint failure); they are retried by the next run
- report.md, speedups.png, tensorboard/ — see kernelgym.agents.report
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kernelgym.agents import baselines
from kernelgym.agents.baselines.common import EpisodeRecord, episode_key
from kernelgym.agents.report import episode_judged

# Fields that define a run: a rerun into the same folder must agree on these (tasks and samples may grow).
IDENTITY = ("env", "policy", "baseline", "baseline_options", "backend", "size", "turns", "reward", "eval_options")


class BenchError(RuntimeError):
    pass


@dataclass
class BenchConfig:
    env: str = "KernelGym-v0"  # an id, a comma list of ids, or a family without level (all its levels)
    policy: str = "replay:cpp+cheats"
    baseline: str = "refine"
    backend: str = "cpp"
    size: str = "cpu"
    tasks: str = "auto"  # auto (what the policy covers, else all), all, or comma-separated globs / substrings
    samples: int = 1
    turns: int | None = None  # None: the policy's suggestion (replay: its files per task), else 4
    concurrency: int = 1  # episodes in flight (each with its own env; all share one evaluation pool)
    eval_workers: int | None = None  # evaluation worker processes (default: concurrency)
    out: str | None = None  # default: runs/bench/<env>__<policy>__<baseline>
    reward: str = "speedup"
    seed: int = 0
    kernelbench_root: str | None = None
    baseline_options: dict[str, Any] = field(default_factory=dict)
    eval_options: dict[str, Any] = field(default_factory=dict)  # more EvalOptions for the judge (timing_trials, ...)
    tensorboard: bool = True


@dataclass
class BenchOutcome:
    out_dir: Path
    records: list[dict[str, Any]]
    summary: dict[str, Any]
    ran: int  # episodes run by this call
    skipped: int  # episodes already finished by an earlier call
    errors: list[dict[str, Any]]
    files: dict[str, Any]


# the task set ----------------------------------------------------------------------------------------------

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
            raise BenchError(f"unknown environment {part!r}; use an id like KernelGym-L1-v0 or a family "
                             f"({', '.join(known)}) for all its levels")
        ids += levels
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


# the results file ---------------------------------------------------------------------------------------------

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
    return Path("runs") / "bench" / f"{_slug(config.env)}__{_slug(config.policy)}__{config.baseline}"


def _check_identity(path: Path, current: dict[str, Any]) -> None:
    if not path.exists():
        return
    previous = json.loads(path.read_text())
    different = {k: (previous.get(k), current.get(k)) for k in IDENTITY if previous.get(k) != current.get(k)}
    if different:
        detail = "; ".join(f"{k}: {a!r} then, {b!r} now" for k, (a, b) in different.items())
        raise BenchError(f"{path.parent} holds a different run ({detail}); use another --out to start a new one")


# running -------------------------------------------------------------------------------------------------------

def run_bench(config: BenchConfig, *, policy: Any = None, progress: bool = True, console=None,
              command: str | None = None, stop_after: int | None = None,
              on_episode: Callable[[dict[str, Any]], None] | None = None) -> BenchOutcome:
    """Run (or continue) a bench and write its report. `policy` overrides `config.policy`'s spec with an
    object (its name is still config.policy); `stop_after` ends the run after that many new episodes."""
    import gymnasium as gym
    from kernelgym.agents.policies import make_policy
    from kernelgym.agents.report import print_table, summarize, write_report

    from kernelgym.workers.pool import EvalPool

    module = baselines.get(config.baseline)  # a typo fails here, before a model loads
    baseline_config = baselines.make_config(config.baseline, **config.baseline_options)
    if config.samples < 1 or config.concurrency < 1:
        raise BenchError("--samples and --concurrency must be at least 1")
    env_ids = expand_env_ids(config.env)
    out = Path(config.out) if config.out else default_out(config)
    out.mkdir(parents=True, exist_ok=True)
    own_policy = policy is None
    policy = policy if policy is not None else make_policy(config.policy)
    pool = EvalPool(workers=config.eval_workers or config.concurrency)
    try:
        env_kwargs: dict[str, Any] = {"backend": config.backend, "size": config.size, "pool": pool,
                                      "reward": config.reward, "trajectory_path": str(out / "trajectories.jsonl")}
        if config.kernelbench_root:
            env_kwargs["kernelbench_root"] = config.kernelbench_root
        if config.eval_options:
            env_kwargs["eval_options"] = dict(config.eval_options)
        tasks: dict[str, tuple[str, Any]] = {}  # task id -> (env id, Task)
        for env_id in env_ids:
            probe = gym.make(env_id, **{**env_kwargs, "trajectory_path": None})
            for task in probe.unwrapped.tasks:
                tasks.setdefault(task.id, (env_id, task))
            probe.close()
        chosen = select(list(tasks), config.tasks, policy)
        if not chosen:
            raise BenchError(f"no task of {config.env} matches --tasks {config.tasks!r}")
        turns = config.turns
        if turns is None:
            suggest = getattr(policy, "suggested_turns", None)
            turns = 1 if config.baseline == "one_shot" else int(suggest(chosen)) if suggest else 4
        env_kwargs["max_turns"] = turns
        task_list = [{"id": t, "level": tasks[t][1].level, "category": tasks[t][1].category, "env": tasks[t][0]}
                     for t in chosen]
        run_info = {**{k: v for k, v in asdict(config).items() if k not in ("out",)}, "turns": turns,
                    "env_ids": env_ids, "policy_name": getattr(policy, "name", config.policy),
                    "command": command, "tasks_selected": task_list}
        _check_identity(out / "run.json", run_info)
        (out / "run.json").write_text(json.dumps(run_info, indent=2, default=str))

        results = ResultsFile(out / "results.jsonl")
        done = {r["key"] for r in results.read() if "key" in r and episode_judged(r)}  # not judged: run again
        todo = [(t, s) for t in chosen for s in range(config.samples) if episode_key(t, s) not in done]
        if stop_after is not None:
            todo = todo[:stop_after]
        skipped = sum(episode_key(t, s) in done for t in chosen for s in range(config.samples))
        errors: list[dict[str, Any]] = []
        local = threading.local()
        errors_lock = threading.Lock()
        made: list[Any] = []

        def env_for(env_id: str):  # one env per thread and id: an env runs one episode at a time
            envs = getattr(local, "envs", None)
            if envs is None:
                envs = local.envs = {}
            if env_id not in envs:
                envs[env_id] = gym.make(env_id, **env_kwargs)
                with errors_lock:
                    made.append(envs[env_id])
            return envs[env_id]

        def one(task_id: str, sample: int) -> dict[str, Any] | None:
            env_id = tasks[task_id][0]
            env = env_for(env_id)
            try:
                record: EpisodeRecord = module.run_episode(env, policy, task_id, baseline_config, sample=sample,
                                                           seed=config.seed + sample)
            except Exception as exc:  # noqa: BLE001 - a failed episode is logged and retried by the next run, never half-kept
                entry = {"key": episode_key(task_id, sample), "task_id": task_id, "sample": sample,
                         "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc(limit=8),
                         "time": time.time()}
                with errors_lock:
                    errors.append(entry)
                    with open(out / "errors.jsonl", "a", encoding="utf-8") as f:
                        f.write(json.dumps(entry) + "\n")
                return None
            data = record.to_dict()
            data.update(env_id=env_id, policy=config.policy, backend=config.backend, size=config.size,
                        max_turns=turns, time=time.time(),
                        episode_id=getattr(getattr(env.unwrapped, "_episode", None), "id", None))
            results.append(data)
            if on_episode is not None:
                on_episode(data)
            return data

        try:
            ran = _execute(todo, one, config.concurrency, progress, console, skipped)
        finally:
            for env in made:
                env.close()
        records = results.read()
        summary = summarize(records, task_list, config.samples)
        meta = {"command": command, "env": config.env, "policy": config.policy, "baseline": config.baseline,
                "backend": config.backend, "size": config.size, "turns": turns, "samples": config.samples,
                "concurrency": config.concurrency}
        files = write_report(summary, out, meta=meta, tensorboard=config.tensorboard)
        (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
        if progress:
            print_table(summary, console)
            if errors:
                _print(console, f"{len(errors)} episode(s) failed (see {out / 'errors.jsonl'}); rerun to retry them")
            _print(console, f"report: {files['report']}")
        return BenchOutcome(out, records, summary, ran, skipped, errors, files)
    finally:
        if own_policy and hasattr(policy, "close"):
            policy.close()
        pool.close()


def _print(console, text: str) -> None:
    if console is None:
        from rich.console import Console

        console = Console()
    console.print(text)


def _execute(todo, one, concurrency: int, progress: bool, console, skipped: int) -> int:
    """Run `one(task, sample)` for each item on `concurrency` threads, with a rich progress bar."""
    if not todo:
        if progress:
            _print(console, f"nothing to run: all {skipped} episode(s) already finished")
        return 0
    bar = None
    if progress:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                       TimeElapsedColumn(), TextColumn("{task.fields[status]}"), console=console)
        bar.start()
        job = bar.add_task("bench", total=len(todo) + skipped, completed=skipped, status="")
    stats = {"correct": 0, "failed": 0, "ran": 0}

    def finished(data: dict[str, Any] | None) -> None:
        stats["ran"] += 1
        if data is None:
            stats["failed"] += 1
        elif data.get("correct"):
            stats["correct"] += 1
        if bar is not None:
            status = f"correct {stats['correct']}/{stats['ran']}" + (f", errors {stats['failed']}" if stats["failed"] else "")
            bar.update(job, advance=1, status=status)

    executor = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="kernelgym-bench")
    try:
        pending = set()
        items = iter(todo)
        for item in items:  # keep at most `concurrency` in flight, so an interrupt leaves little half-done
            pending.add(executor.submit(one, *item))
            if len(pending) >= concurrency:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for f in done:
                    finished(f.result())
        for f in pending:
            finished(f.result())
    except KeyboardInterrupt:
        if progress:
            _print(console, "interrupted: finishing the episodes in flight (they are kept); Ctrl-C again abandons them")
        raise
    finally:
        executor.shutdown(wait=True, cancel_futures=True)
        if bar is not None:
            bar.stop()
    return stats["ran"]
