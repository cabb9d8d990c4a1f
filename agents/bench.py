"""The bench runner: episodes of a baseline with a policy over a task set, resumable, then the report.

Output folder:
- run.json — what was run (checked on resume: the same command continues, a different one is refused)
- results.jsonl — one line per finished episode, appended with flush + fsync as each one ends, keyed by
  (task id, sample index); a rerun skips the keys already there, so an interrupted run loses at most the
  episodes that were in flight, and a torn last line (a kill mid-write) is cut off on the next start
- trajectories.jsonl — the environment's per-turn log (prompts, replies, feedback, results)
- errors.jsonl — episodes that raised (a policy or endpoint failure); they are retried by the next run
- report.md, speedups.png, tensorboard/ — see kernelgym.agents.report

What a bench is asked: agents/bench_config.py; its task set: agents/bench_plan.py; its output folder:
agents/bench_results.py; its threads and progress bar: agents/bench_progress.py.
"""

from __future__ import annotations

import json
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelgym.agents import baselines
from kernelgym.agents.baselines.common import EpisodeRecord, episode_key
from kernelgym.agents.bench_config import BenchConfig, validate
from kernelgym.agents.bench_plan import BenchPlan, bench_env_ids, plan_bench
from kernelgym.agents.bench_progress import print_to, run_episodes
from kernelgym.agents.bench_results import ResultsFile, default_out, pending_episodes, record_run
from kernelgym.agents.eta import TimedPolicy, eta_after_first_reply, eta_warning


@dataclass
class BenchOutcome:
    out_dir: Path
    records: list[dict[str, Any]]
    summary: dict[str, Any]
    ran: int  # episodes run by this call
    skipped: int  # episodes already finished by an earlier call
    errors: list[dict[str, Any]]
    files: dict[str, Any]





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
        print_to(console, f"endpoint {getattr(policy, 'url', '')} answered in {seconds:.1f} s")
        if warning:
            print_to(console, f"[yellow]warning:[/yellow] {warning}")


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
            print_to(self.console, f"[red]episode {task_id} #{sample} failed:[/red] {entry['error'][:400]}")
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
            print_to(console, f"{len(runner.errors)} episode(s) failed (see {runner.errors_path}); "
                              f"rerun to retry them. The first: {runner.errors[0]['error'][:400]}")
        print_to(console, f"report: {files['report']}")
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
        record_run(out, config, plan, policy, command)
        for entry in plan.left_out if progress else ():
            print_to(console, f"[yellow]left out[/yellow] {entry['id']}: {entry['reason'][:300]}")
        warnings = [w for w in [eta_warning(policy, len(plan.chosen) * config.samples * plan.turns)] if w]
        for w in warnings if progress else ():
            print_to(console, f"[yellow]warning:[/yellow] {w}")
        results = ResultsFile(out / "results.jsonl")
        todo, skipped = pending_episodes(results, plan.chosen, config.samples, stop_after)
        replies = len(todo) * plan.turns

        def first_reply(seconds: float) -> None:
            if progress:
                print_to(console, eta_after_first_reply(seconds, replies, config.concurrency))

        runner = EpisodeRunner(config, plan, TimedPolicy(policy, first_reply), results, out, on_episode,
                               console=console if progress else False)
        try:
            ran = run_episodes(todo, runner.run, config.concurrency, progress, console, skipped,
                               stop=lambda: runner.stop_reason)
            if runner.stop_reason and progress:
                print_to(console, f"[red]stopped after {ran} of {len(todo)} episode(s):[/red] the endpoint "
                                  f"failed ({runner.stop_reason[:300]}); rerun the same command to continue")
        finally:
            runner.close()
        records, summary, files = _report(config, plan, out, runner, command, progress, console, warnings)
        return BenchOutcome(out, records, summary, ran, skipped, runner.errors, files)
    finally:
        if own_policy and hasattr(policy, "close"):
            policy.close()
        pool.close()


