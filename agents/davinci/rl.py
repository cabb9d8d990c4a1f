"""The RL phase: each step plays `group_size` episodes on each of `tasks_per_step` tasks, assigns per-role
rewards and leave-one-out advantages, and takes one REINFORCE step.

The skill library is frozen while a step's rollouts run: summaries go to the gate after them, and what it
admits is retrieved from the next step on. An admitted skill's summary turn is trained when its later use
on other tasks has been seen (rewards.SkillCredit; pending credits are saved in the checkpoint). With
`kl_coef` > 0 the KL reference is the model the run started from (`backbone.model`), also after a resume.

Written to `output_dir`: `trajectories.jsonl` (one role-tagged episode per line, with rewards and
advantages), `skills_admitted.jsonl` (every skill the gate admitted, with its step), `metrics.jsonl`,
TensorBoard scalars under `tensorboard/`, the skill store `skills.sqlite` (the library grows during
training), `checkpoint-<step>/` (backbone, optimizer, step; a rerun resumes from the latest one) and, with
`heldout_suite`, `heldout.jsonl`: an evaluation on held-out tasks at each checkpoint (heldout.py). With
`backbone.lora` a checkpoint holds the role adapters only (about 3.7 MB each for SmolLM2-135M at rank 8) and
the optimizer in files under 16 MiB (checkpoint.py), so it can be copied off a machine that caps files.
"""

from __future__ import annotations

import json
import random
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelgym.agents.davinci import rewards
from kernelgym.agents.davinci.checkpoint import DEFAULT_MAX_FILE_BYTES, load_optimizer, save_optimizer
from kernelgym.agents.davinci.config import ROLES, RLConfig, check_training, to_dict
from kernelgym.agents.davinci.reinforce import StepStats, make_optimizer, reinforce_step
from kernelgym.agents.davinci.sft import _pool
from kernelgym.agents.davinci.trajectory import Trajectory

_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")


@dataclass
class RLResult:
    output_dir: Path
    steps_done: int = 0
    admitted: list[str] = field(default_factory=list)
    last_stats: StepStats | None = None
    last_groups: list[list[Trajectory]] = field(default_factory=list)
    gate_calls: int = 0
    heldout: list[dict[str, Any]] = field(default_factory=list)  # this run's held-out evaluations


def latest_checkpoint(folder: Path) -> tuple[int, Path] | None:
    found = [(int(m[1]), p) for p in folder.glob("checkpoint-*") if (m := _CHECKPOINT.match(p.name))]
    return max(found) if found else None


def episode_metrics(groups: list[list[Trajectory]]) -> dict[str, float]:
    """compile/correct rates over policy turns, fast_1 over episodes (best verified speedup > 1)."""
    trajs = [t for g in groups for t in g]
    verdicts = [v for t in trajs for v in t.verdicts if v != "infrastructure_error"]  # judged turns only
    n = max(len(verdicts), 1)
    compiled = sum(v not in ("compile_error", "no_code") for v in verdicts)
    return {"compile_rate": compiled / n, "correct_rate": sum(v == "ok" for v in verdicts) / n,
            "fast_1": sum(t.best_verified_speedup > 1.0 for t in trajs) / max(len(trajs), 1),
            "outcome_mean": sum(t.outcome for t in trajs) / max(len(trajs), 1)}


def next_step_overruns(budget_s: float, elapsed_s: float, longest_step_s: float) -> bool:
    """Whether another step, as long as the longest so far, would end past this call's budget (0: none).

    A lent machine's limit is hard: a step begun that cannot end in time loses its work and the checkpoint."""
    return budget_s > 0 and elapsed_s + longest_step_s > budget_s


def run_rl(config: RLConfig, *, backbone=None, pool=None, tensorboard: bool = True) -> RLResult:

    from kernelgym.agents.davinci.episode import EpisodeRunner
    from kernelgym.skill_store import SkillStore

    check_training(config.backbone)
    out = Path(config.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(to_dict(config), indent=1))
    checkpoint = latest_checkpoint(out) if config.resume else None
    start = checkpoint[0] if checkpoint is not None else 0
    backbone, optimizer = _model_and_optimizer(config, backbone, checkpoint)
    result = RLResult(out, start)
    writer = _writer(out) if tensorboard else None
    credit = rewards.SkillCredit(config.rewards)
    with _pool(pool, config.workers) as judge:
        store = SkillStore(config.episode.skills_db or out / "skills.sqlite")
        runner = EpisodeRunner(config.episode, backbone, store, judge, defer_gate=True)
        if checkpoint is not None:
            state = json.loads((checkpoint[1] / "state.json").read_text())
            runner.admitted |= set(state["admitted"])
            credit.load(state.get("credit", {}))
        task_ids = training_tasks(config, runner.env.unwrapped.tasks)
        sampler = make_sampler(config, runner.env.unwrapped.tasks, task_ids)
        if checkpoint is not None and sampler is not None:
            sampler.load(state.get("sampler", {}))
        started = time.monotonic()
        heldout = None
        try:
            if config.heldout_suite is not None:  # its tasks are read (and checked) before the first step
                from kernelgym.agents.davinci.heldout import HeldoutEvaluation

                heldout = HeldoutEvaluation(config, backbone, store, judge, task_ids)
            longest_step_s = 0.0
            for step in range(start, config.steps):
                step_started = time.monotonic()
                _one_step(config, step, backbone, optimizer, runner, task_ids, result, writer, out, credit,
                          sampler)
                longest_step_s = max(longest_step_s, time.monotonic() - step_started)
                elapsed_s = time.monotonic() - started
                out_of_time = next_step_overruns(config.max_wall_s, elapsed_s, longest_step_s)
                if (step + 1) % config.save_every == 0 or step + 1 == config.steps or out_of_time:
                    save_checkpoint(out / f"checkpoint-{step + 1}", backbone, optimizer, runner, step + 1,
                                    credit, sampler)
                    if heldout is not None:
                        result.heldout.append(heldout.run(step + 1, out, writer))
                if out_of_time:
                    break
        finally:
            runner.close()
            if heldout is not None:
                heldout.close()
            store.close()
            if writer is not None:
                writer.close()
    result.admitted = sorted(runner.admitted)
    result.gate_calls = runner.gate_calls
    return result


def _model_and_optimizer(config: RLConfig, backbone, checkpoint: tuple[int, Path] | None):
    """The backbone and its optimizer where the run starts: the given (or configured) model, or the latest
    checkpoint's; the KL reference is the model the run started from either way."""
    from kernelgym.agents.davinci.backbone import Backbone

    if checkpoint is not None:
        backbone = Backbone(_replace(config.backbone, model=str(checkpoint[1] / "model")))
        if config.kl_coef > 0:  # the reference is where the run started, not the checkpoint
            backbone.load_reference(config.backbone.model)
    backbone = backbone or Backbone(config.backbone)
    if checkpoint is None and config.kl_coef > 0:
        backbone.snapshot_reference()
    optimizer = make_optimizer(backbone, config.lr)
    if checkpoint is not None:
        optimizer.load_state_dict(load_optimizer(checkpoint[1]))
    return backbone, optimizer


def training_tasks(config: RLConfig, tasks) -> list[str]:
    """The env's task ids less the curriculum's held-out split (naming a held-out task is an error)."""
    from kernelgym.agents.davinci.sft_data import heldout_task_ids
    from kernelgym.errors import ConfigError

    heldout = heldout_task_ids()
    named = [t.id for t in tasks if t.id in heldout]
    if named and config.episode.task_ids:
        raise ConfigError(f"episode.task_ids names held-out curriculum tasks {named[:3]}: they are never "
                          "trained on (use kernelgym.tasks.curriculum.train_ids())")
    return [t.id for t in tasks if t.id not in heldout]


def make_sampler(config: RLConfig, tasks, task_ids: list[str]):
    """None for uniform sampling, else a SuccessSampler over the tasks' difficulty (their metadata)."""
    from kernelgym.errors import ConfigError

    if config.task_sampling == "uniform":
        return None
    if config.task_sampling != "success":
        raise ConfigError(f"task_sampling must be 'uniform' or 'success', not {config.task_sampling!r}")
    from kernelgym.tasks.curriculum import SuccessSampler
    from kernelgym.tasks.task import read_metadata

    wanted = set(task_ids)
    return SuccessSampler({t.id: int(read_metadata(t.source, t.id).get("difficulty", 1))
                           for t in tasks if t.id in wanted})


def play_step(config: RLConfig, runner, chosen: list[str], credit: rewards.SkillCredit, step: int):
    """One step's rollouts with the library frozen, then the gate, the credit of earlier skills and the
    rewards; returns (groups, the summary turns of earlier steps to train now)."""
    # Every rollout of the step in one batch: each turn of all of them is one batched generate call.
    played = runner.run_batch([task_id for task_id in chosen for _ in range(config.group_size)])
    groups = [played[i * config.group_size:(i + 1) * config.group_size] for i in range(len(chosen))]
    gated = runner.apply_gate()  # admissions take effect from the next step on
    now = rewards.assign(groups, config.rewards)
    credit.observe(groups)  # uses of skills admitted in earlier steps
    credit.add(step, gated)
    resolved = credit.resolve(step)
    rewards.summary_advantages(now + resolved)
    return groups, resolved


def _one_step(config: RLConfig, step: int, backbone, optimizer, runner, task_ids, result: RLResult, writer,
              out: Path, credit: rewards.SkillCredit, sampler=None) -> None:
    import torch

    torch.manual_seed(config.seed * 100_003 + step)
    rng = random.Random(config.seed * 100_003 + step)  # resumable: the step (and saved state) picks the tasks
    if sampler is None:
        chosen = rng.sample(task_ids, min(config.tasks_per_step, len(task_ids)))
    else:
        chosen = sampler.sample(config.tasks_per_step, rng)
    before = set(runner.admitted)
    started, tokens, generating = time.monotonic(), backbone.generated_tokens, backbone.generate_s
    groups, resolved = play_step(config, runner, chosen, credit, step)
    played = time.monotonic()
    if sampler is not None:  # success: a correct solution in the episode
        for task_id, group in zip(chosen, groups):
            for traj in group:
                if traj.judged:
                    sampler.update(task_id, "ok" in traj.verdicts)
    stats = reinforce_step(backbone, optimizer, [t for g in groups for t in g],
                           max_grad_norm=config.max_grad_norm, role_weights=config.role_weights,
                           kl_coef=config.kl_coef, extra=resolved, batch_tokens=config.update_batch_tokens)
    not_judged = sum(not t.judged for g in groups for traj in g for t in traj.role_turns("policy"))
    metrics = {**episode_metrics(groups), "loss": stats.loss, "grad_norm": stats.grad_norm, "kl": stats.kl,
               "skills_admitted_total": len(runner.admitted), "gate_calls_total": runner.gate_calls,
               "policy/not_judged": not_judged, "summary/credited": len(resolved),
               "summary/pending_credit": len(credit.pending),
               # where the step's time went: generation (inside the rollouts), the rest of the rollouts (the
               # judge, the gate), the update; and the generation's own rate
               "rollouts": sum(len(g) for g in groups), "time/rollouts_s": played - started,
               "time/generate_s": backbone.generate_s - generating,
               "time/update_s": time.monotonic() - played,
               "generated_tokens": backbone.generated_tokens - tokens}
    for role in ROLES:
        metrics[f"{role}/turns"] = stats.turns.get(role, 0)
        metrics[f"{role}/tokens"] = stats.tokens.get(role, 0)
        if role in stats.mean_reward:
            metrics[f"{role}/reward"] = stats.mean_reward[role]
            metrics[f"{role}/abs_advantage"] = stats.mean_abs_advantage[role]
    _append(out / "metrics.jsonl", {"step": step + 1, **metrics})
    for group in groups:
        for traj in group:
            _append(out / "trajectories.jsonl", {"step": step + 1, **traj.to_dict()})
    for skill_id in sorted(runner.admitted - before):
        traj = next(t for g in groups for t in g if t.candidate_id == skill_id)
        _append(out / "skills_admitted.jsonl", {"step": step + 1, "skill_id": skill_id,
                                                "task_id": traj.task_id, "reason": traj.gate_reason})
    if writer is not None:
        for key, value in metrics.items():
            writer.add_scalar(key, value, step + 1)
        writer.flush()
    result.steps_done, result.last_stats, result.last_groups = step + 1, stats, groups


def save_checkpoint(folder: Path, backbone, optimizer, runner, step: int,
                    credit: rewards.SkillCredit | None = None, sampler=None,
                    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES) -> None:
    """The backbone (with LoRA: only the role adapters), the optimizer in shards of at most
    `max_file_bytes`, and the run's state (step, admitted skills, pending credit, the task sampler)."""
    backbone.save(folder / "model")
    save_optimizer(optimizer.state_dict(), folder, max_file_bytes)
    state = {"step": step, "admitted": sorted(runner.admitted), "credit": credit.to_dict() if credit else {},
             "sampler": sampler.state() if sampler is not None else {}}
    (folder / "state.json").write_text(json.dumps(state))


def _append(path: Path, record: dict[str, Any]) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")


def _writer(out: Path):
    from torch.utils.tensorboard import SummaryWriter

    return SummaryWriter(str(out / "tensorboard"))


def _replace(config, **changes):
    import dataclasses

    return dataclasses.replace(config, **changes)


__all__ = ["RLResult", "episode_metrics", "latest_checkpoint", "make_sampler", "play_step", "run_rl",
           "save_checkpoint", "training_tasks"]
