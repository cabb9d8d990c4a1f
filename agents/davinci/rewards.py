"""Per-role rewards and leave-one-out advantages over a task's group of rollouts.

- policy: each turn's environment reward (verified-speedup based), as a discounted return from that turn
  on; the baseline of turn t is the mean return at turn t of the group's other rollouts.
- selection: the episode's outcome (its best policy turn); baseline: the other rollouts' outcomes.
- summary: the gate's decision (admitted / rejected / malformed reply) plus a bonus per later episode that
  selected the admitted skill; baseline: the other rollouts' summary rewards.

A role with no other rollout in the group to compare against gets a baseline of 0 (plain REINFORCE).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from kernelgym.agents.davinci.config import RoleRewardConfig
from kernelgym.agents.davinci.trajectory import Trajectory


def discounted_returns(rewards: Sequence[float], gamma: float) -> list[float]:
    out, running = [0.0] * len(rewards), 0.0
    for t in range(len(rewards) - 1, -1, -1):
        running = rewards[t] + gamma * running
        out[t] = running
    return out


def leave_one_out(values: Sequence[float | None]) -> list[float | None]:
    """value - mean(the other present values); None stays None; alone: the value itself (baseline 0)."""
    present = [v for v in values if v is not None]
    total, n = sum(present), len(present)
    return [None if v is None else v - ((total - v) / (n - 1) if n > 1 else 0.0) for v in values]


def summary_reward(traj: Trajectory, config: RoleRewardConfig, reuse: Counter) -> float | None:
    if not traj.role_turns("summary"):
        return None
    status = traj.summary_status
    base = {"admitted": config.admitted, "malformed": config.malformed}.get(status, config.rejected)
    bonus = config.reuse * reuse.get(traj.candidate_id, 0) if traj.summary_status == "admitted" else 0.0
    return base + bonus


def assign(groups: Sequence[Sequence[Trajectory]], config: RoleRewardConfig) -> None:
    """Set `reward` and `advantage` of every turn, group by group (a group: one task's rollouts)."""
    reuse = Counter(skill for group in groups for traj in group for skill in traj.reused_admitted)
    for group in groups:
        _policy(group, config.gamma)
        _one_per_episode(group, "selection", [t.outcome for t in group])
        _one_per_episode(group, "summary", [summary_reward(t, config, reuse) for t in group])


def _policy(group: Sequence[Trajectory], gamma: float) -> None:
    returns = [discounted_returns(t.policy_rewards, gamma) for t in group]
    longest = max((len(r) for r in returns), default=0)
    for index in range(longest):
        column = [r[index] if index < len(r) else None for r in returns]
        for traj, adv, ret in zip(group, leave_one_out(column), column):
            if adv is not None:
                turn = traj.role_turns("policy")[index]
                turn.reward, turn.advantage = ret, adv


def _one_per_episode(group: Sequence[Trajectory], role: str, rewards: list[float | None]) -> None:
    present = [r if traj.role_turns(role) else None for traj, r in zip(group, rewards)]
    for traj, reward, adv in zip(group, present, leave_one_out(present)):
        for turn in traj.role_turns(role):
            turn.reward, turn.advantage = float(reward), float(adv)
