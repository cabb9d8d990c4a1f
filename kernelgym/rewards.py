"""Reward functions: pure functions of one evaluation result and the episode so far.

Every reward here has the signature ``fn(result, state, **params) -> float`` where `result` is an
`EvalResult` and `state` an `EpisodeState` describing the episode *before* this turn. They read nothing
else (no clock, no global), so the same result always earns the same reward and they can be tested with
hand-built results. Pick one by name with `get_reward("speedup")`, `get_reward("fast_p", p=1.5)` or the
shorthand `get_reward("fast_1.5")`; any callable with the same signature works too.

The ordering every built-in reward keeps: a failed attempt (no code, compile or runtime error, wrong
output, timeout, crash, or a rejected hack) never earns more than a correct solution, and a hack never
earns more than an honest failure. Only a *verified* speedup (the judge's confidence interval above its
threshold) is paid as a speedup; an unverified one counts as no speedup at all.

A turn the judge could not judge (verdict `infrastructure_error`: a trusted process died, the disk or host
memory ran out) is not the candidate's failure: every built-in reward pays it a neutral 0.0, never the
failure or hack value, and `judged(result)` is False so a trainer can leave the sample out (the env says
so in `info["judged"]`).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kernelgym.errors import ConfigError

if TYPE_CHECKING:  # the result module is light, but keep this module importable with nothing else loaded
    from kernelgym.evaluation.result import EvalResult

RewardFn = Callable[..., float]


@dataclass(frozen=True)
class EpisodeState:
    """What a reward may know about the episode, as it was *before* the turn being scored."""

    task_id: str = ""
    turn: int = 1  # the turn being scored, from 1
    max_turns: int = 1
    best_speedup: float = 0.0  # best verified speedup of earlier turns (0 when none)
    last_speedup: float = 0.0  # verified speedup of the previous turn (0 when none or failed)
    # verdict of each earlier turn ("no_code" for a reply without code)
    previous_verdicts: tuple[str, ...] = ()


NOT_JUDGED = "infrastructure_error"  # the verdict of an evaluation the judge itself failed


def judged(result: EvalResult) -> bool:
    """False when the judge failed (infrastructure_error): the result says nothing about the candidate."""
    return _verdict(result) != NOT_JUDGED


def _verdict(result: EvalResult) -> str:
    return getattr(result.verdict, "value", result.verdict)


def _verified(result: EvalResult) -> float | None:
    value = result.verified_speedup
    if value is None or not math.isfinite(value) or value <= 0:
        return None
    return float(value)


def speedup_reward(
    result: EvalResult,
    state: EpisodeState | None = None,
    *,
    failure: float = -1.0,
    hack: float = -1.0,
    correct: float = 0.1,
    cap: float = 10.0,
    not_judged: float = 0.0,
) -> float:
    """The default: -1 for any failure, 0.1 for a correct solution, plus log2 of a verified speedup.

    reward = correct + log2(min(verified_speedup, cap)) for a verified speedup above 1, so 2x earns 1.1,
    4x earns 2.1 and anything from `cap` (10x) up earns 0.1 + log2(10) = 3.42: the log and the cap stop a
    single outlier (a lucky or not-quite-caught measurement) from dominating a batch. A correct but slower
    solution, or one whose speedup is not verified, earns `correct` (0.1): small, but above every failure.
    A turn the judge could not judge earns `not_judged` (0.0): it is neither a failure nor a success.
    """
    if not judged(result):
        return float(not_judged)
    if hack > failure:
        raise ConfigError("the hack penalty must not exceed the failure reward")
    if correct <= failure:
        raise ConfigError("a correct solution must earn more than a failed one")
    if _verdict(result) == "hack":
        return float(hack)
    if not result.correct:
        return float(failure)
    speedup = _verified(result)
    bonus = math.log2(min(speedup, cap)) if speedup is not None and speedup > 1.0 else 0.0
    return float(correct + bonus)


def fast_p_reward(result: EvalResult, state: EpisodeState | None = None, *, p: float = 1.0) -> float:
    """KernelBench's fast_p as a 0/1 reward: 1 when correct and faster than `p`, else 0.

    p = 0 is plain correctness. For p >= 1 the speedup must be verified (the judge's interval above its
    threshold) and above p; for 0 < p < 1 a correct solution with a measured speedup above p is enough
    (being slower than the reference cannot be "verified", but it can be bounded).
    """
    if not result.correct:
        return 0.0
    if p <= 0:
        return 1.0
    if p >= 1.0:
        speedup = _verified(result)
        return 1.0 if speedup is not None and speedup > p else 0.0
    measured = result.speedup
    return 1.0 if measured is not None and math.isfinite(measured) and measured > p else 0.0


def drkernel_reward(
    result: EvalResult,
    state: EpisodeState | None = None,
    *,
    correct_weight: float = 0.5,
    speedup_weight: float = 0.5,
    speedup_cap: float = 3.0,
    coverage_weight: float = 0.2,
) -> float:
    """A mixed reward: 0.5 * correct + 0.5 * min(speedup, 3) + 0.2 * coverage, 0 for any failure.

    `speedup` is the verified speedup, or the measured one capped at 1 when it is not verified (a slower
    solution still gets a graded signal, an unverified gain is not paid). `coverage` is the share of the
    solution's time spent in its own kernels (from the profile; 0 when not profiled): it rewards moving the
    work into the kernel rather than leaving it to PyTorch. Hacks and other failures earn 0, and so does a
    turn that was not judged.
    """
    if not result.correct:
        return 0.0
    speedup = _verified(result)
    if speedup is None:
        measured = result.speedup
        usable = measured is not None and math.isfinite(measured) and measured > 0
        speedup = min(measured, 1.0) if usable else 0.0
    coverage = 0.0
    if result.profile is not None and result.profile.coverage is not None:
        coverage = min(max(float(result.profile.coverage), 0.0), 1.0)
    return float(correct_weight + speedup_weight * min(speedup, speedup_cap) + coverage_weight * coverage)


def roofline_reward(result: EvalResult, state: EpisodeState | None = None, *, cap: float = 1.0) -> float:
    """The fraction of this machine's measured peak the solution reaches: the task's floor time (its counted
    bytes over the measured bandwidth, or its counted FLOPs over the measured matmul rate, whichever is
    longer) over the solution's median time by the judge's clock; 0 for any failure, a hack, a turn not
    judged, or a result without a roofline (no timing). Capped at `cap` (1.0: no kernel beats the peak; a
    fraction above it is a measurement to distrust, not to pay)."""
    if not result.correct or result.timing is None:
        return 0.0
    fraction = result.timing.roofline_fraction
    if fraction is None or not math.isfinite(fraction) or fraction <= 0:
        return 0.0
    return float(min(fraction, cap))


REWARDS: dict[str, RewardFn] = {
    "speedup": speedup_reward,
    "fast_p": fast_p_reward,
    "drkernel": drkernel_reward,
    "roofline": roofline_reward,
}

_FAST_P = re.compile(r"^fast_(?P<p>\d+(\.\d+)?)$")


def get_reward(reward: str | RewardFn = "speedup", **params: Any) -> RewardFn:
    """A reward callable `fn(result, state) -> float` from a name (with parameters) or a callable."""
    if callable(reward):
        return functools.partial(reward, **params) if params else reward
    if not isinstance(reward, str):
        raise ConfigError(f"reward must be a name or a callable, not {type(reward).__name__}")
    match = _FAST_P.match(reward)
    if match and reward not in REWARDS:
        return functools.partial(fast_p_reward, p=float(match["p"]), **params)
    try:
        fn = REWARDS[reward]
    except KeyError:
        raise ConfigError(f"unknown reward {reward!r}; known: {', '.join(names())}, fast_<p>, or a "
                          "callable") from None
    return functools.partial(fn, **params) if params else fn


def names() -> list[str]:
    return sorted(REWARDS)


__all__ = ["NOT_JUDGED", "REWARDS", "EpisodeState", "RewardFn", "drkernel_reward", "fast_p_reward",
           "get_reward", "judged", "names", "roofline_reward", "speedup_reward"]
