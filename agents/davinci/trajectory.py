"""One daVinci episode as data: role-tagged turns (select, T policy turns, summarize), the gate's answer."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any


@dataclass
class RoleTurn:
    role: str  # "selection" | "policy" | "summary"
    prompt_ids: list[int]
    completion_ids: list[int]  # the only tokens this turn trains on
    text: str
    env_reward: float | None = None  # policy turns: the environment's reward for this reply
    reward: float = 0.0  # the role's reward for this turn (rewards.py)
    advantage: float = 0.0  # reward minus the role's leave-one-out baseline (rewards.py)
    teacher: bool = False  # written by a teacher (replay, template), not sampled from the model
    temperature: float = 1.0  # the sampling temperature and top_p (the loss takes log-probs under them)
    top_p: float = 1.0
    # Why this turn is not trained now ("" = it is): "not_judged" (the judge failed on it), "no_outcome" (no
    # policy turn of its episode was judged), "pending" (a summary waiting for its skill's later use)
    masked: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def judged(self) -> bool:
        """False for a policy turn the judge failed to judge (infrastructure_error): no reward either way."""
        return self.meta.get("judged", True) is not False


@dataclass
class Trajectory:
    task_id: str
    category: str
    backend: str
    size: str
    turns: list[RoleTurn] = field(default_factory=list)
    bm25_ids: list[str] = field(default_factory=list)  # the candidates the selection role saw
    selected_ids: list[str] = field(default_factory=list)  # the skills put into the policy's prompt
    verdicts: list[str] = field(default_factory=list)
    best_source: str | None = None  # best correct solution of the episode
    best_speedup: float = 0.0
    best_verified_speedup: float = 0.0
    # "skipped" | "malformed" | "admitted" | "rejected" | "error" | "not_gated"
    summary_status: str = "skipped"
    candidate_id: str | None = None
    gate_reason: str = ""
    reused_admitted: list[str] = field(default_factory=list)  # skills admitted during training it selected

    def role_turns(self, role: str) -> list[RoleTurn]:
        return [t for t in self.turns if t.role == role]

    def judged_policy_turns(self) -> list[RoleTurn]:
        """The policy turns the judge judged (a failed judge call gives the turn back: it is not one)."""
        return [t for t in self.role_turns("policy") if t.judged]

    @property
    def policy_rewards(self) -> list[float]:
        return [float(t.env_reward or 0.0) for t in self.judged_policy_turns()]

    @property
    def judged(self) -> bool:
        """At least one policy turn was judged: the episode has an outcome."""
        return bool(self.judged_policy_turns())

    @property
    def outcome(self) -> float:
        """The episode's outcome (the selection role's reward): its best judged policy turn (0 when none)."""
        rewards = self.policy_rewards
        return max(rewards) if rewards else 0.0

    def to_dict(self, with_ids: bool = False) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        if not with_ids:  # the record of a run: sizes instead of ids, and no copy of every prompt
            for turn in data["turns"]:
                turn["prompt_tokens"] = len(turn.pop("prompt_ids"))
                turn["completion_tokens"] = len(turn.pop("completion_ids"))
                turn["meta"].pop("messages", None)
        return data
