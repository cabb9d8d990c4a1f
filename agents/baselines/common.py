"""What every baseline shares: episode and turn records, and stepping an environment with a reply."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any, cast

from kernelgym.agents.policy import PolicyInfo, reply_meta
from kernelgym.envs.types import Observation, ResetInfo, StepInfo

# Verdicts that are not the judge's: "no_code" (the reply held no module), "done" (the agent stopped) and
# "infrastructure_error" (the judge itself failed).
NOT_JUDGED = ("no_code", "done", "infrastructure_error")


@dataclass
class TurnRecord:
    attempt: int  # 0-based index of the reply in the episode
    verdict: str
    reward: float
    correct: bool = False
    speedup: float | None = None  # measured, correct solutions only
    verified: bool = False  # the judge's interval is above its threshold
    reasons: list[str] = field(default_factory=list)
    wall_s: float = 0.0  # the whole turn: the policy's reply and the evaluation
    eval_s: float = 0.0
    phase: str = ""  # e.g. "functional" / "optimization" (kforge), "sample" (best_of_n)
    meta: dict[str, Any] = field(default_factory=dict)  # the reply's metadata (replay file, cheat label)
    notes: str = ""  # e.g. the analyst's recommendations that the reply followed (kforge)

    @property
    def verified_speedup(self) -> float | None:
        return self.speedup if self.verified else None


@dataclass
class EpisodeRecord:
    task_id: str
    sample: int
    baseline: str
    level: int | None = None
    category: str | None = None
    turns: list[TurnRecord] = field(default_factory=list)
    wall_s: float = 0.0
    seed: int | None = None

    @property
    def key(self) -> str:
        return episode_key(self.task_id, self.sample)

    @property
    def best(self) -> TurnRecord | None:
        """The correct turn with the best (verified first, then measured) speedup; None if none is correct."""
        correct = [t for t in self.turns if t.correct]
        if not correct:
            return None
        return max(correct, key=lambda t: (t.verified, t.speedup or 0.0))

    @property
    def correct(self) -> bool:
        return self.best is not None

    @property
    def speedup(self) -> float | None:
        """The best measured speedup among correct turns (what KernelBench's fast_p reads)."""
        speeds = [t.speedup for t in self.turns if t.correct and t.speedup is not None]
        return max(speeds) if speeds else None

    @property
    def verified_speedup(self) -> float | None:
        speeds = [t.speedup for t in self.turns if t.correct and t.verified and t.speedup is not None]
        return max(speeds) if speeds else None

    @property
    def judged(self) -> bool:
        """False when no turn is correct and the judge failed on one: the episode says nothing yet."""
        return self.correct or not any(t.verdict == "infrastructure_error" for t in self.turns)

    @property
    def total_reward(self) -> float:
        return float(sum(t.reward for t in self.turns))

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(key=self.key, correct=self.correct, judged=self.judged, speedup=self.speedup,
                    verified_speedup=self.verified_speedup, total_reward=self.total_reward)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EpisodeRecord:
        names = set(TurnRecord.__dataclass_fields__)
        turns = [TurnRecord(**{k: v for k, v in t.items() if k in names}) for t in data.get("turns", [])]
        fields_ = set(cls.__dataclass_fields__) - {"turns"}
        return cls(turns=turns, **{k: v for k, v in data.items() if k in fields_})


def episode_key(task_id: str, sample: int) -> str:
    return f"{task_id}#{sample}"


def start(env, task_id: str, seed: int | None = None) -> tuple[Observation, ResetInfo, EpisodeRecord]:
    """Reset `env` on `task_id`; returns the observation, the reset info and an empty record."""
    obs, info = env.reset(seed=seed, options={"task_id": task_id})
    task = info.get("task", {})
    record = EpisodeRecord(task_id=info.get("task_id", task_id), sample=0, baseline="",
                           level=task.get("level"), category=task.get("category"), seed=seed)
    return obs, info, record


def policy_info(info: ResetInfo | StepInfo, attempt: int, **extra: Any) -> PolicyInfo:
    """The `info` a policy is given: the env's, plus the attempt index (and what a baseline adds)."""
    return cast(PolicyInfo, {**info, "attempt": attempt, **extra})


def step(env, reply: str, attempt: int, *, started: float | None = None, phase: str = "",
         notes: str = "") -> tuple[Observation, StepInfo, bool, TurnRecord]:
    """Send one reply; returns (observation, info, episode over, the turn's record)."""
    t0 = time.monotonic()
    obs, reward, terminated, truncated, info = env.step(str(reply))
    now = time.monotonic()
    result = info.get("result") or {}
    timing = result.get("timing") or {}
    correct = bool(result.get("correct"))
    speedup = result.get("speedup") if correct else None
    turn = TurnRecord(
        attempt=attempt, verdict=str(info.get("verdict", "")), reward=float(reward), correct=correct,
        speedup=float(speedup) if isinstance(speedup, int | float) else None,
        verified=bool(correct and timing.get("verified")),
        reasons=[str(r)[:200] for r in result.get("reasons", [])[:4]],
        wall_s=round(now - (started if started is not None else t0), 3), eval_s=round(now - t0, 3),
        phase=phase, meta=reply_meta(reply), notes=notes,
    )
    return obs, info, bool(terminated or truncated), turn


def max_turns(env) -> int:
    return int(env.unwrapped.config.max_turns)
