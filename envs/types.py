"""What KernelEnv hands out: its observation, the infos of reset() and step(), and the best solution record.

TypedDicts, not dataclasses, because they stay plain dicts at runtime: gymnasium's Dict space checks the
observation as a dict, vector envs batch infos key by key, and trajectories are written as JSON. The types
name and document the keys for readers and type checkers. Info keys whose value would be None are left out
(see `kernel_env.without_none`), so the infos are `total=False`: test a key with `in` or read it with `.get`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypedDict

import numpy as np

# The action is the model's whole reply.
Action = str


class Observation(TypedDict):
    prompt: str  # the task statement (reference module, solution contract, hardware, turns left)
    feedback: str  # the judge's feedback on the last reply ("" right after reset)
    turn: int  # turns taken so far, 0 right after reset
    last_speedup: np.ndarray  # float32, shape (1,): measured speedup of the last reply, 0 unless correct
    best_speedup: np.ndarray  # float32, shape (1,): best measured speedup of a correct reply so far


class ResetInfo(TypedDict, total=False):
    episode_id: str  # unique per episode (uuid4 hex); trajectory lines carry the same id
    task_id: str
    task: dict[str, Any]  # Task.summary(): suite, level, category, dtype, sizes, content hash, ...
    backend: str
    size: str
    seed: int  # left out for an unseeded reset
    max_turns: int
    reward_name: str


class BestSolutionInfo(TypedDict, total=False):
    """`BestSolution` as it appears in `info["best"]`."""

    source: str
    speedup: float
    verified_speedup: float  # left out unless the judge verified the speedup
    verified: bool
    turn: int


# "return" is a keyword, hence the functional form.
EpisodeStats = TypedDict("EpisodeStats", {
    "turns": int,
    "rewards": list[float],
    "return": float,
    "verdicts": list[str],
    "evaluations": int,  # replies that reached the judge (not "no_code" or "done")
    "best_speedup": float,
    "best_verified_speedup": float,
})


class StepInfo(TypedDict, total=False):
    episode_id: str
    task_id: str
    turn: int
    turns_left: int
    verdict: str  # the judge's verdict, or "no_code" / "done" for replies that never reached it
    result: dict[str, Any]  # EvalResult.to_dict(); EvalResult.from_dict rebuilds it; absent for "done"
    solution: str  # the code taken from the reply; absent when there was none
    reply_parse: str  # where the code came from (a fenced block, the whole reply, ...)
    best: BestSolutionInfo  # absent until a reply is correct
    episode_summary: EpisodeStats  # not "episode": gymnasium's RecordEpisodeStatistics writes that key
    # False when the judge itself failed (infrastructure_error): the turn was given back, reward 0. True for
    # no_code: a reply without code is the agent's failed turn, charged (see `evaluated`).
    judged: bool
    evaluated: bool  # the reply reached the judge: False for "no_code" and "done"


@dataclass(frozen=True)
class BestSolution:
    """The episode's best correct solution: verified speedup first, then measured speedup."""

    source: str
    speedup: float  # measured
    verified_speedup: float | None  # None unless the judge's interval cleared its threshold
    turn: int

    @property
    def verified(self) -> bool:
        return bool(self.verified_speedup)

    @property
    def rank(self) -> tuple[float, float]:
        """What "better" means between two solutions (larger is better)."""
        return (self.verified_speedup or 0.0, self.speedup)

    def to_info(self) -> BestSolutionInfo:
        info = BestSolutionInfo(source=self.source, speedup=self.speedup, verified=self.verified,
                                turn=self.turn)
        if self.verified_speedup is not None:
            info["verified_speedup"] = self.verified_speedup
        return info


__all__ = ["Action", "BestSolution", "BestSolutionInfo", "EpisodeStats", "Observation", "ResetInfo",
           "StepInfo"]
