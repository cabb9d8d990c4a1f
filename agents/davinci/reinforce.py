"""Multi-turn REINFORCE with per-role advantages: the loss of one step over a batch of trajectories.

Why not TRL's GRPOTrainer: it gives one advantage per completion, normalized within a group of
completions of one prompt. Here one rollout holds turns of three roles with different prompts, each with
its own reward and its own leave-one-out baseline (rewards.py), and with LoRA each role trains its own
adapter; GRPOTrainer's rollout_func can mask tokens (env_mask) but cannot attach a different advantage to
each span. So the loss is this small loop over the HF model; TRL still supplies the token log-prob kernel
(`selective_log_softmax`) and the SFT phase (sft.py).

Loss of a role = mean over that role's turns of -(advantage x mean log-prob of the turn's completion
tokens) (+ kl_coef x the k3 estimate of KL to the starting model on the same tokens). The log-probs are
taken under the turn's own sampling temperature and top_p (those of the distribution it was drawn from).
Prompt tokens (the task, skills, feedback, other roles' text) are context only. Masked turns (the judge
failed, or a summary still waiting for its credit) are not trained. Each turn is backpropagated on its
own, so a batch never holds more than one turn's graph.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from kernelgym.agents.davinci.config import ROLES
from kernelgym.agents.davinci.trajectory import RoleTurn, Trajectory


@dataclass
class StepStats:
    loss: float = 0.0
    grad_norm: float = 0.0
    kl: float = 0.0
    turns: dict[str, int] = field(default_factory=dict)  # trained turns per role
    tokens: dict[str, int] = field(default_factory=dict)
    mean_reward: dict[str, float] = field(default_factory=dict)
    mean_abs_advantage: dict[str, float] = field(default_factory=dict)


def trainable_turns(trajectories: Sequence[Trajectory], role: str,
                    extra: Sequence[RoleTurn] = ()) -> list[RoleTurn]:
    turns = [t for traj in trajectories for t in traj.role_turns(role)] + [t for t in extra if t.role == role]
    unique = list({id(t): t for t in turns}.values())  # a credited summary may be in this step too
    return [t for t in unique if t.completion_ids and not t.teacher and not t.masked]


def turn_loss(backbone, turn: RoleTurn, kl_coef: float = 0.0):
    """(loss, kl) of one turn: only its completion tokens carry gradient."""
    sampling = {"temperature": turn.temperature, "top_p": turn.top_p}
    logprobs = backbone.token_logprobs(turn.role, turn.prompt_ids, turn.completion_ids, **sampling)
    loss = -(turn.advantage * logprobs).mean()
    kl = logprobs.new_zeros(())
    if kl_coef > 0:
        ref = backbone.token_logprobs(turn.role, turn.prompt_ids, turn.completion_ids, reference=True,
                                      **sampling)
        diff = ref - logprobs
        kl = (diff.exp() - diff - 1).mean()  # k3: unbiased, always >= 0
        loss = loss + kl_coef * kl
    return loss, kl


def accumulate(backbone, trajectories: Sequence[Trajectory], *, role_weights: dict[str, float] | None = None,
               kl_coef: float = 0.0, extra: Sequence[RoleTurn] = ()) -> StepStats:
    """Backpropagate the step's loss into the parameters' .grad; returns what was trained. `extra`: turns of
    earlier steps whose reward became known now (summaries credited by later use)."""
    weights = role_weights or {}
    stats = StepStats()
    kl_sum, kl_count = 0.0, 0
    for role in ROLES:
        turns = trainable_turns(trajectories, role, extra)
        stats.turns[role] = len(turns)
        stats.tokens[role] = sum(len(t.completion_ids) for t in turns)
        if turns:
            stats.mean_reward[role] = sum(t.reward for t in turns) / len(turns)
            stats.mean_abs_advantage[role] = sum(abs(t.advantage) for t in turns) / len(turns)
        scale = weights.get(role, 1.0) / max(len(turns), 1)
        for turn in turns:
            if turn.advantage == 0.0 and kl_coef == 0.0:
                continue  # no gradient to give: skip the forward pass
            loss, kl = turn_loss(backbone, turn, kl_coef)
            (loss * scale).backward()
            stats.loss += float(loss.detach()) * scale
            kl_sum, kl_count = kl_sum + float(kl.detach()), kl_count + 1
    stats.kl = kl_sum / max(kl_count, 1)
    return stats


def reinforce_step(backbone, optimizer, trajectories: Sequence[Trajectory], *, max_grad_norm: float = 1.0,
                   role_weights: dict[str, float] | None = None, kl_coef: float = 0.0,
                   extra: Sequence[RoleTurn] = ()) -> StepStats:
    import torch

    backbone.model.train()
    optimizer.zero_grad(set_to_none=True)
    with backbone.exclusive():  # on a GPU: no candidate is timed beside the backward passes
        stats = accumulate(backbone, trajectories, role_weights=role_weights, kl_coef=kl_coef, extra=extra)
        params = [p for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
        if params:
            stats.grad_norm = float(torch.nn.utils.clip_grad_norm_(params, max_grad_norm))
            optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return stats


def make_optimizer(backbone, lr: float):
    import torch

    return torch.optim.AdamW(backbone.trainable_parameters(), lr=lr, weight_decay=0.0)
