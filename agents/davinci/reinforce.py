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
failed, or a summary still waiting for its credit) are not trained.

The turns of a role that share a sampling setting are scored in micro-batches (`micro_batches`): sorted by
length, right-padded into one forward and one backward pass whose padded size (rows x longest row) stays
within `batch_tokens` (`RLConfig.update_batch_tokens`). One sequence of a small model at a time keeps a GPU
waiting on kernel launches; the bound keeps the graph a backward pass holds (activations, and the logits of
the completion positions) to one micro-batch's. The gradient is the same sum as turn by turn, up to float
rounding; `batch_tokens=0` scores each turn on its own.
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
    return turn_losses(backbone, [turn], kl_coef)[0]


def turn_losses(backbone, turns: Sequence[RoleTurn], kl_coef: float = 0.0) -> list:
    """(loss, kl) of each of `turns` (one role, one sampling setting) from one forward pass, and one pass of
    the reference for the KL: only their completion tokens carry gradient."""
    logprobs = _logprobs(backbone, turns)
    references = _logprobs(backbone, turns, reference=True) if kl_coef > 0 else [None] * len(turns)
    out = []
    for turn, turn_logprobs, reference in zip(turns, logprobs, references, strict=True):
        loss = -(turn.advantage * turn_logprobs).mean()
        kl = turn_logprobs.new_zeros(())
        if reference is not None:
            diff = reference - turn_logprobs
            kl = (diff.exp() - diff - 1).mean()  # k3: unbiased, always >= 0
            loss = loss + kl_coef * kl
        out.append((loss, kl))
    return out


def _logprobs(backbone, turns: Sequence[RoleTurn], reference: bool = False) -> list:
    first = turns[0]
    if any((t.role, t.temperature, t.top_p) != (first.role, first.temperature, first.top_p) for t in turns):
        raise ValueError("turns scored in one pass must share their role, temperature and top_p")
    sampling = {"reference": reference, "temperature": first.temperature, "top_p": first.top_p}
    if len(turns) == 1:  # nothing to pad: the one-sequence pass
        return [backbone.token_logprobs(first.role, first.prompt_ids, first.completion_ids, **sampling)]
    return backbone.token_logprobs_batch(first.role, [(t.prompt_ids, t.completion_ids) for t in turns],
                                         **sampling)


def micro_batches(turns: Sequence[RoleTurn], batch_tokens: int) -> list[list[RoleTurn]]:
    """`turns` (of one role) in groups that can share a forward pass: one sampling setting each, shortest
    turns first, as many rows as keep rows x longest row (prompt + completion tokens) within `batch_tokens`;
    a turn longer than that, or every turn where `batch_tokens` is 0, is a batch of its own."""
    by_sampling: dict[tuple[float, float], list[RoleTurn]] = {}
    for turn in turns:
        by_sampling.setdefault((turn.temperature, turn.top_p), []).append(turn)
    batches = []
    for group in by_sampling.values():
        batch: list[RoleTurn] = []
        for turn in sorted(group, key=_length):  # similar lengths together: little padding
            if batch and (len(batch) + 1) * _length(turn) > batch_tokens:
                batches.append(batch)
                batch = []
            batch.append(turn)
        batches.append(batch)
    return batches


def _length(turn: RoleTurn) -> int:
    return len(turn.prompt_ids) + len(turn.completion_ids)


def accumulate(backbone, trajectories: Sequence[Trajectory], *, role_weights: dict[str, float] | None = None,
               kl_coef: float = 0.0, extra: Sequence[RoleTurn] = (), batch_tokens: int = 0) -> StepStats:
    """Backpropagate the step's loss into the parameters' .grad; returns what was trained. `extra`: turns of
    earlier steps whose reward became known now (summaries credited by later use). `batch_tokens`: the padded
    size of a micro-batch (`micro_batches`; 0: one turn a pass)."""
    import torch

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
        # A turn with no advantage and no KL term gives no gradient: no forward pass for it.
        learning = [t for t in turns if t.advantage != 0.0 or kl_coef != 0.0]
        for batch in micro_batches(learning, batch_tokens):
            losses, kls = (torch.stack(column) for column in zip(*turn_losses(backbone, batch, kl_coef)))
            (losses.sum() * scale).backward()
            stats.loss += sum(loss * scale for loss in losses.detach().tolist())
            kl_sum, kl_count = kl_sum + sum(kls.detach().tolist()), kl_count + len(batch)
    stats.kl = kl_sum / max(kl_count, 1)
    return stats


def reinforce_step(backbone, optimizer, trajectories: Sequence[Trajectory], *, max_grad_norm: float = 1.0,
                   role_weights: dict[str, float] | None = None, kl_coef: float = 0.0,
                   extra: Sequence[RoleTurn] = (), batch_tokens: int = 0) -> StepStats:
    import torch

    backbone.model.train()
    optimizer.zero_grad(set_to_none=True)
    with backbone.exclusive():  # on a GPU: no candidate is timed beside the backward passes
        stats = accumulate(backbone, trajectories, role_weights=role_weights, kl_coef=kl_coef, extra=extra,
                           batch_tokens=batch_tokens)
        params = [p for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
        if params:
            stats.grad_norm = float(torch.nn.utils.clip_grad_norm_(params, max_grad_norm))
            optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return stats


def make_optimizer(backbone, lr: float):
    import torch

    return torch.optim.AdamW(backbone.trainable_parameters(), lr=lr, weight_decay=0.0)
