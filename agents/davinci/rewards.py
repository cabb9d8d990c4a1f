"""Per-role rewards and leave-one-out advantages over a task's group of rollouts.

- policy: each judged turn's environment reward (verified-speedup based), as a discounted return from that
  turn on; the baseline of judged turn t is the mean return at judged turn t of the group's other rollouts.
- selection: the episode's outcome (its best judged policy turn); baseline: the outcomes of the group's
  other rollouts that had a selection turn.
- summary: trained when its reward is known. A malformed reply (`malformed`) or a well-formed skill the gate
  rejected (`rejected`) is known at once. An admitted skill is credited by its later use (`SkillCredit`):
  the mean, over later episodes on other tasks that put the skill into the policy's prompt, of the episode's
  outcome minus the leave-one-out mean outcome of its group; the summary turn waits across steps until
  `credit_uses` such episodes or `credit_window` steps, then trains with `admitted + credit x that mean`.
  Baseline: leave-one-out over the summary turns trained in the same step.

A turn the judge failed to judge (infrastructure_error) is not a failure: it gets no reward and no
advantage, is masked out of the loss, and is left out of every baseline; an episode with no judged policy
turn has no outcome, so its selection turn is masked too. A summary whose gate run was not judged likewise.

A role with no other rollout in the group to compare against gets a baseline of 0 (plain REINFORCE).

Shaping (`RoleRewardConfig.compiled_bonus`, 0 by default): a judged policy turn whose code built and then
failed (incorrect, runtime_error, timeout) gets the bonus added to its env reward before the returns.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kernelgym.agents.davinci.config import RoleRewardConfig
from kernelgym.agents.davinci.trajectory import RoleTurn, Trajectory

NOT_JUDGED = "not_judged"


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


def immediate_summary_reward(traj: Trajectory, config: RoleRewardConfig) -> float | None:
    """The summary reward known when the episode ends; None when it must wait (admitted) or not be trained."""
    status = traj.summary_status
    if status == "malformed":
        return config.malformed
    if status in ("rejected", "error", "unverified"):
        return config.rejected
    return None  # "admitted" (credited later), "pending" (not gated yet), "not_judged", "skipped", ...


def outcome_advantages(group: Sequence[Trajectory]) -> list[float | None]:
    """Each rollout's outcome minus the mean outcome of the group's other judged ones (None: no outcome)."""
    return leave_one_out([t.outcome if t.judged else None for t in group])


def assign(groups: Sequence[Sequence[Trajectory]], config: RoleRewardConfig) -> list[RoleTurn]:
    """Set `reward`, `advantage` and `masked` of every turn, group by group (a group: one task's rollouts).

    Summary turns with an immediate reward get it here; admitted ones are masked "pending" (a SkillCredit
    trains them later). Returns the summary turns to train now (their advantages not set yet: see
    `summary_advantages`, which also takes the turns a SkillCredit resolved this step).
    """
    summaries: list[RoleTurn] = []
    for group in groups:
        _policy(group, config.gamma, config.compiled_bonus)
        outcomes = [t.outcome if t.judged and t.role_turns("selection") else None for t in group]
        for traj, adv in zip(group, leave_one_out(outcomes)):
            for turn in traj.role_turns("selection"):
                if adv is None:
                    turn.reward, turn.advantage, turn.masked = 0.0, 0.0, "no_outcome"
                else:
                    turn.reward, turn.advantage = traj.outcome, float(adv)
        for traj in group:
            reward = immediate_summary_reward(traj, config)
            for turn in traj.role_turns("summary"):
                if reward is None:  # admitted: a SkillCredit trains it later; otherwise nothing to learn
                    turn.reward, turn.advantage = 0.0, 0.0
                    turn.masked = {"admitted": "pending", "not_judged": NOT_JUDGED}.get(traj.summary_status,
                                                                                        "no_reward")
                else:
                    turn.reward = reward
                    summaries.append(turn)
    return summaries


def summary_advantages(turns: Sequence[RoleTurn]) -> None:
    """Leave-one-out over the summary turns trained in one step (their rewards already set)."""
    for turn, adv in zip(turns, leave_one_out([t.reward for t in turns])):
        turn.advantage, turn.masked = float(adv), ""


COMPILED_FAILURES = ("incorrect", "runtime_error", "timeout")  # built, then failed


def shaped_rewards(traj: Trajectory, compiled_bonus: float = 0.0) -> list[float]:
    """The judged policy turns' env rewards, plus the compile bonus where the code built but failed."""
    return [float(t.env_reward or 0.0) + (compiled_bonus if t.meta.get("verdict") in COMPILED_FAILURES
                                          else 0.0) for t in traj.judged_policy_turns()]


def _policy(group: Sequence[Trajectory], gamma: float, compiled_bonus: float = 0.0) -> None:
    for traj in group:
        for turn in traj.role_turns("policy"):
            if not turn.judged:  # the judge failed: not the candidate's failure, nothing to learn from
                turn.reward, turn.advantage, turn.masked = 0.0, 0.0, NOT_JUDGED
    judged = [traj.judged_policy_turns() for traj in group]
    returns = [discounted_returns(shaped_rewards(traj, compiled_bonus), gamma) for traj in group]
    longest = max((len(r) for r in returns), default=0)
    for index in range(longest):
        column = [r[index] if index < len(r) else None for r in returns]
        for turns, adv, ret in zip(judged, leave_one_out(column), column):
            if adv is not None:
                turns[index].reward, turns[index].advantage = ret, adv


# Crediting a summary by the later use of its skill ---------------------------------------------------------

@dataclass
class PendingCredit:
    skill_id: str
    task_id: str  # the task the skill was distilled from: use there does not count
    step: int  # the step it was admitted in
    turn: RoleTurn  # the summary turn, trained once its reward is known
    uses: list[float] = field(default_factory=list)  # outcome advantages of the episodes that used it


class SkillCredit:
    """Admitted skills waiting for their later use, across steps (saved in the RL checkpoint)."""

    def __init__(self, config: RoleRewardConfig):
        self.config = config
        self.pending: dict[str, PendingCredit] = {}
        self.resolved: list[dict[str, Any]] = []  # a record of every credited skill

    def add(self, step: int, trajectories: Sequence[Trajectory]) -> None:
        """Admitted skills of this step start waiting (call after the gate decided)."""
        for traj in trajectories:
            if traj.summary_status == "admitted" and traj.candidate_id:
                for turn in traj.role_turns("summary"):
                    if not turn.teacher and turn.completion_ids:
                        self.pending[traj.candidate_id] = PendingCredit(traj.candidate_id, traj.task_id, step,
                                                                        turn)

    def observe(self, groups: Sequence[Sequence[Trajectory]]) -> None:
        """Record a step's uses: episodes on other tasks that put a waiting skill into the policy's prompt."""
        for group in groups:
            for traj, adv in zip(group, outcome_advantages(group)):
                if adv is None:
                    continue
                for skill_id in traj.selected_ids:
                    entry = self.pending.get(skill_id)
                    if entry is not None and entry.task_id != traj.task_id:
                        entry.uses.append(float(adv))

    def resolve(self, step: int) -> list[RoleTurn]:
        """Summary turns whose reward is now known (enough uses, or the window passed), rewards set."""
        out = []
        for skill_id in list(self.pending):
            entry = self.pending[skill_id]
            if len(entry.uses) < self.config.credit_uses and step - entry.step < self.config.credit_window:
                continue
            del self.pending[skill_id]
            credit = sum(entry.uses) / len(entry.uses) if entry.uses else 0.0
            entry.turn.reward = self.config.admitted + self.config.credit * credit
            entry.turn.masked = ""
            out.append(entry.turn)
            self.resolved.append({"skill_id": skill_id, "admitted_step": entry.step, "resolved_step": step,
                                  "uses": len(entry.uses), "credit": credit, "reward": entry.turn.reward})
        return out

    def to_dict(self) -> dict[str, Any]:
        pending = [{**dataclasses.asdict(e), "turn": _turn_dict(e.turn)} for e in self.pending.values()]
        return {"pending": pending, "resolved": self.resolved}

    def load(self, data: dict[str, Any]) -> None:
        self.pending = {}
        for item in data.get("pending", []):
            turn = RoleTurn(**item["turn"])
            self.pending[item["skill_id"]] = PendingCredit(item["skill_id"], item["task_id"], item["step"],
                                                           turn, list(item["uses"]))
        self.resolved = list(data.get("resolved", []))


def _turn_dict(turn: RoleTurn) -> dict[str, Any]:
    data = dataclasses.asdict(turn)
    data["meta"] = {}  # the prompt ids are kept; the messages are not needed to train
    return data
