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
from kernelgym.agents.eta import TimedPolicy, eta_after_first_reply, eta_warning
from kernelgym.agents.report import episode_judged
from kernelgym.errors import KernelGymError, did_you_mean

# Fields that define a run: a rerun into the same folder must agree on these (tasks and samples may grow).
IDENTITY = ("env", "suite", "policy", "baseline", "baseline_options", "backend", "size", "turns", "reward",
            "eval_options", "shapes", "dtype")
# Task sources with env ids of their own: `--suite NAME` benches these ids. Any other source (`hf`, a folder)
# is benched through the KernelGym-L<N>-v0 ids of the levels it has, with the source passed to gym.make.
SUITE_ENVS = {"bundled": "KernelGym-v0", "kernelbench": "KernelBench-v0", "backward": "KernelGym-Backward-v0",
              "curriculum": "KernelGym-Curriculum-v0"}
DEFAULT_ENV = "KernelGym-v0"


class BenchError(KernelGymError, RuntimeError):
    """A bench that cannot run as asked (unknown environment, no matching task, another run's folder)."""


@dataclass
class BenchConfig:
    env: str = DEFAULT_ENV  # an id, a comma list of ids, or a family without level (all its levels)
    # a task source instead of (or within) env: a suite name, `hf`, or a folder of task files
    suite: str | None = None
    policy: str = "replay:cpp+cheats"
    baseline: str = "refine"
    backend: str = "cpp"
    size: str = "cpu"
    tasks: str = "auto"  # auto (what the policy covers, else all), all, or comma-separated globs / substrings
    samples: int = 1
    turns: int | None = None  # None: the policy's suggestion (replay: its files per task), else 4
    concurrency: int = 1  # episodes in flight (each with its own env; all share one evaluation pool)
    # evaluation worker processes (default: concurrency; on Ray: the cluster's)
    eval_workers: int | None = None
    evaluator: str = "local"  # local (an EvalPool here) or ray[://ADDRESS] (kernelgym.distributed)
    out: str | None = None  # default: runs/bench/<env>__<policy>__<baseline>
    reward: str = "speedup"
    seed: int = 0
    kernelbench_root: str | None = None
    baseline_options: dict[str, Any] = field(default_factory=dict)
    eval_options: dict[str, Any] = field(default_factory=dict)  # more EvalOptions for the judge
    tensorboard: bool = True
    shapes: str = "shown"  # "heldout": correctness also at shapes the judge draws (EnvConfig.shapes)
    dtype: str | None = None  # "bf16", "fp16", "fp32": the run's float dtype (EnvConfig.dtype)


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


# the results file -------------------------------------------------------------------------------------------

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


# running ----------------------------------------------------------------------------------------------------

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


def validate(config: BenchConfig) -> None:
    """Every argument that can be checked without a model or a worker, checked before any work starts."""
    import dataclasses

    from kernelgym.evaluation.options import EvalOptions

    module = baselines.get(config.baseline)
    config_class = getattr(module, baselines.CONFIGS[config.baseline])
    known = [f.name for f in dataclasses.fields(config_class)]
    unknown = sorted(set(config.baseline_options) - set(known))
    if unknown:
        hint = did_you_mean(unknown[0], known)
        raise BenchError(f"unknown -o key(s) {unknown} for --baseline {config.baseline} "
                         f"({config_class.__name__}); known: {', '.join(known)}.{hint}")
    baselines.make_config(config.baseline, **config.baseline_options)  # the values, as the baseline checks
    EvalOptions.from_kwargs(**config.eval_options)  # an unknown --eval-option key, named with the known ones
    EvalOptions.from_kwargs(shapes=config.shapes, **({"dtype": config.dtype} if config.dtype else {}))
    if config.seed < 0:
        raise BenchError(f"--seed must be 0 or more (seeds are numpy's), not {config.seed}")
    if config.samples < 1 or config.concurrency < 1:
        raise BenchError("--samples and --concurrency must be at least 1")
    if config.turns is not None and config.turns < 1:
        raise BenchError(f"--turns must be at least 1, not {config.turns}")


def check_policy(policy: Any, progress: bool, console) -> None:
    """A policy that talks to an endpoint answers one request first (`check()`), so a dead endpoint is one
    line now rather than a failure per episode later."""
    check = getattr(policy, "check", None)
    if not callable(check):
        return
    started = time.monotonic()
    warning = check()
    if progress:
        seconds = time.monotonic() - started
        _print(console, f"endpoint {getattr(policy, 'url', '')} answered in {seconds:.1f} s")
        if warning:
            _print(console, f"[yellow]warning:[/yellow] {warning}")


def _record_run(out: Path, config: BenchConfig, plan: BenchPlan, policy: Any, command: str | None) -> None:
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


class EpisodeRunner:
    """Runs one episode of the baseline per call, from any of the bench's threads.

    Each thread keeps its own env per env id (an env runs one episode at a time). A finished episode is
    appended to the results file; one that raises is logged to errors.jsonl and left for the next run.
    """

    def __init__(self, config: BenchConfig, plan: BenchPlan, policy: Any, results: ResultsFile, out: Path,
                 on_episode: Callable[[dict[str, Any]], None] | None = None, console: Any = False):
        self.config, self.plan, self.policy = config, plan, policy
        self.module = baselines.get(config.baseline)
        self.baseline_config = baselines.make_config(config.baseline, **config.baseline_options)
        self.results, self.errors_path, self.on_episode = results, out / "errors.jsonl", on_episode
        self.errors: list[dict[str, Any]] = []
        self.console = console  # False: quiet; else each new kind of error is printed as it happens
        self.stop_reason: str | None = None  # set when the endpoint gave up: no new episode starts
        self._local = threading.local()
        self._lock = threading.Lock()
        self._made: list[Any] = []

    def _env(self, env_id: str):
        import gymnasium as gym

        envs = self._local.__dict__.setdefault("envs", {})
        if env_id not in envs:
            envs[env_id] = gym.make(env_id, **self.plan.env_kwargs)
            with self._lock:
                self._made.append(envs[env_id])
        return envs[env_id]

    def run(self, task_id: str, sample: int) -> dict[str, Any] | None:
        """The episode's record as written to results.jsonl; None if it raised."""
        env_id = self.plan.tasks[task_id][0]
        env = self._env(env_id)
        try:
            record: EpisodeRecord = self.module.run_episode(env, self.policy, task_id, self.baseline_config,
                                                            sample=sample, seed=self.config.seed + sample)
        # a failed episode is logged and retried by the next run, never half-kept
        except Exception as exc:  # noqa: BLE001
            self._log_error(task_id, sample, exc)
            return None
        c = self.config
        data = record.to_dict()
        data.update(env_id=env_id, policy=c.policy, backend=c.backend, size=c.size, max_turns=self.plan.turns,
                    time=time.time(), episode_id=env.unwrapped.episode_id)
        self.results.append(data)
        if self.on_episode is not None:
            self.on_episode(data)
        return data

    def _log_error(self, task_id: str, sample: int, exc: Exception) -> None:
        entry = {"key": episode_key(task_id, sample), "task_id": task_id, "sample": sample,
                 "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc(limit=8),
                 "time": time.time()}
        with self._lock:
            new_kind = type(exc).__name__ not in {e["error"].partition(":")[0] for e in self.errors}
            self.errors.append(entry)
            with open(self.errors_path, "a", encoding="utf-8") as f:
                f.write(json.dumps(entry) + "\n")
        if new_kind and self.console is not False:
            _print(self.console, f"[red]episode {task_id} #{sample} failed:[/red] {entry['error'][:400]}")
        from kernelgym.agents.policies.openai_compat import EndpointError

        if isinstance(exc, EndpointError) and self.stop_reason is None:
            # The endpoint failed after its retries: every next episode would wait through the same retries.
            self.stop_reason = entry["error"]

    def close(self) -> None:
        for env in self._made:
            env.close()


def _report(config: BenchConfig, plan: BenchPlan, out: Path, runner: EpisodeRunner, command: str | None,
            progress: bool, console,
            warnings: Sequence[str] = ()) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """Summarize every finished episode in `out` (this call's and earlier ones'), write the report files."""
    from kernelgym.agents.report import print_table, summarize, write_report

    records = runner.results.read()
    summary = summarize(records, plan.task_list(), config.samples)
    meta = {"command": command, "env": config.env, "policy": config.policy, "baseline": config.baseline,
            "backend": config.backend, "size": config.size, "turns": plan.turns, "samples": config.samples,
            "concurrency": config.concurrency, "env_ids": plan.env_ids, "warnings": list(warnings),
            "shapes": config.shapes, "dtype": config.dtype or "the tasks' own",
            "suite": config.suite or ("backward" if any("Backward" in i for i in plan.env_ids)
                                      else "bundled")}
    files = write_report(summary, out, meta=meta, tensorboard=config.tensorboard)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    if progress:
        print_table(summary, console)
        if runner.errors:
            _print(console, f"{len(runner.errors)} episode(s) failed (see {runner.errors_path}); "
                            f"rerun to retry them. The first: {runner.errors[0]['error'][:400]}")
        _print(console, f"report: {files['report']}")
    return records, summary, files


def run_bench(config: BenchConfig, *, policy: Any = None, progress: bool = True, console=None,
              command: str | None = None, stop_after: int | None = None,
              on_episode: Callable[[dict[str, Any]], None] | None = None) -> BenchOutcome:
    """Run (or continue) a bench and write its report. `policy` overrides `config.policy`'s spec with an
    object (its name is still config.policy); `stop_after` ends the run after that many new episodes."""
    from kernelgym.agents.policies import make_policy
    from kernelgym.distributed.evaluator import make_evaluator

    # A typo in the arguments fails here, before a model loads or a worker starts.
    validate(config)
    env_ids = bench_env_ids(config)
    out = Path(config.out) if config.out else default_out(config)
    own_policy = policy is None
    policy = policy if policy is not None else make_policy(config.policy)
    try:
        check_policy(policy, progress, console)
    except BaseException:
        if own_policy and hasattr(policy, "close"):
            policy.close()
        raise
    out.mkdir(parents=True, exist_ok=True)
    local = config.evaluator.strip() == "local"
    pool = make_evaluator(config.evaluator, config.eval_workers or (config.concurrency if local else None))
    try:
        plan = plan_bench(config, env_ids, policy, out, pool)
        _record_run(out, config, plan, policy, command)
        for entry in plan.left_out if progress else ():
            _print(console, f"[yellow]left out[/yellow] {entry['id']}: {entry['reason'][:300]}")
        warnings = [w for w in [eta_warning(policy, len(plan.chosen) * config.samples * plan.turns)] if w]
        for w in warnings if progress else ():
            _print(console, f"[yellow]warning:[/yellow] {w}")
        results = ResultsFile(out / "results.jsonl")
        todo, skipped = pending_episodes(results, plan.chosen, config.samples, stop_after)
        replies = len(todo) * plan.turns

        def first_reply(seconds: float) -> None:
            if progress:
                _print(console, eta_after_first_reply(seconds, replies, config.concurrency))

        runner = EpisodeRunner(config, plan, TimedPolicy(policy, first_reply), results, out, on_episode,
                               console=console if progress else False)
        try:
            ran = _execute(todo, runner.run, config.concurrency, progress, console, skipped,
                           stop=lambda: runner.stop_reason)
            if runner.stop_reason and progress:
                _print(console, f"[red]stopped after {ran} of {len(todo)} episode(s):[/red] the endpoint "
                                f"failed ({runner.stop_reason[:300]}); rerun the same command to continue")
        finally:
            runner.close()
        records, summary, files = _report(config, plan, out, runner, command, progress, console, warnings)
        return BenchOutcome(out, records, summary, ran, skipped, runner.errors, files)
    finally:
        if own_policy and hasattr(policy, "close"):
            policy.close()
        pool.close()


def _print(console, text: str) -> None:
    if console is None:
        from rich.console import Console

        console = Console()
    console.print(text)


class BenchProgress:
    """Counts finished episodes and shows them on a rich progress bar (when `show`)."""

    def __init__(self, total: int, skipped: int, show: bool, console=None):
        self.correct = self.failed = self.ran = 0
        self._bar = None
        if show:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(),
                                 TextColumn("{task.fields[status]}"), console=console)
            self._bar.start()
            self._job = self._bar.add_task("bench", total=total + skipped, completed=skipped, status="")

    def finished(self, data: dict[str, Any] | None) -> None:
        """One episode ended: its record, or None when it raised."""
        self.ran += 1
        if data is None:
            self.failed += 1
        elif data.get("correct"):
            self.correct += 1
        if self._bar is not None:
            status = f"correct {self.correct}/{self.ran}" + (f", errors {self.failed}" if self.failed else "")
            self._bar.update(self._job, advance=1, status=status)

    def stop(self) -> None:
        if self._bar is not None:
            self._bar.stop()


def _execute(todo: list[tuple[str, int]], one: Callable[[str, int], dict[str, Any] | None], concurrency: int,
             progress: bool, console, skipped: int, stop: Callable[[], Any] = lambda: None) -> int:
    """Run `one(task, sample)` for each item on `concurrency` threads, with a rich progress bar; no new item
    starts once `stop()` is true."""
    if not todo:
        if progress:
            _print(console, f"nothing to run: all {skipped} episode(s) already finished")
        return 0
    counter = BenchProgress(len(todo), skipped, progress, console)
    executor = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="kernelgym-bench")
    try:
        pending = set()
        for item in todo:  # keep at most `concurrency` in flight, so an interrupt leaves little half-done
            if stop():
                break
            pending.add(executor.submit(one, *item))
            if len(pending) >= concurrency:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for f in done:
                    counter.finished(f.result())
        for f in pending:
            counter.finished(f.result())
    except KeyboardInterrupt:
        if progress:
            _print(console, "interrupted: finishing the episodes in flight (they are kept); "
                            "Ctrl-C again abandons them")
        raise
    finally:
        executor.shutdown(wait=True, cancel_futures=True)
        counter.stop()
    return counter.ran
