"""Rewards are pure functions of (result, episode state): tested on hand-built results."""

from __future__ import annotations

import math

import pytest

from kernelgym.errors import ConfigError
from kernelgym.evaluation.result import (
    CorrectnessResult,
    EvalResult,
    ProfileResult,
    TimingResult,
    Verdict,
)
from kernelgym.rewards import (
    EpisodeState,
    drkernel_reward,
    fast_p_reward,
    get_reward,
    judged,
    names,
    speedup_reward,
)

STATE = EpisodeState(task_id="bundled/L1/1_ReLU", turn=1, max_turns=4)


def failed(verdict: Verdict) -> EvalResult:
    return EvalResult("t", "cpp", "cpu", verdict, [f"{verdict.value}: because"])


def correct(speedup: float | None = None, *, verified: bool = False, ci_low: float | None = None,
            coverage: float | None = None, timing: bool = True) -> EvalResult:
    return EvalResult(
        "t", "cpp", "cpu", Verdict.OK,
        correctness=CorrectnessResult(passed=True, atol=1e-4, rtol=1e-4),
        timing=TimingResult(available=True, speedup=speedup, speedup_ci_low=ci_low if ci_low is not None
                            else speedup, speedup_ci_high=speedup, verified=verified) if timing else None,
        profile=ProfileResult(coverage=coverage) if coverage is not None else None,
    )


FAILURES = [failed(v) for v in Verdict if v not in (Verdict.OK, Verdict.INFRASTRUCTURE_ERROR)]
CORRECT = [correct(0.3), correct(0.99), correct(1.5), correct(1.5, verified=True, ci_low=1.2),
           correct(40.0, verified=True), correct(timing=False), correct(2.0, verified=True, coverage=0.9)]


def test_names():
    assert {"speedup", "fast_p", "drkernel"} <= set(names())


@pytest.mark.parametrize("name", ["speedup", "drkernel"])
def test_every_failure_is_below_every_correct_solution(name):
    fn = get_reward(name)
    worst_correct = min(fn(r, STATE) for r in CORRECT)
    best_failure = max(fn(r, STATE) for r in FAILURES)
    assert best_failure < worst_correct


@pytest.mark.parametrize("name", ["speedup", "fast_p", "drkernel", "roofline"])
def test_a_hack_never_beats_an_honest_failure(name):
    fn = get_reward(name)
    hack = fn(failed(Verdict.HACK), STATE)
    assert all(hack <= fn(r, STATE) for r in FAILURES)
    assert all(hack <= fn(r, STATE) for r in CORRECT)


def test_speedup_reward_values():
    assert speedup_reward(failed(Verdict.COMPILE_ERROR), STATE) == -1.0
    assert speedup_reward(failed(Verdict.HACK), STATE) == -1.0
    assert speedup_reward(correct(0.5), STATE) == pytest.approx(0.1)  # correct but slower: small, positive
    assert speedup_reward(correct(3.0), STATE) == pytest.approx(0.1)  # not verified: no speedup paid
    assert speedup_reward(correct(2.0, verified=True), STATE) == pytest.approx(1.1)
    assert speedup_reward(correct(4.0, verified=True), STATE) == pytest.approx(2.1)
    capped = 0.1 + math.log2(10)
    assert speedup_reward(correct(10.0, verified=True), STATE) == pytest.approx(capped)
    assert speedup_reward(correct(1e6, verified=True), STATE) == pytest.approx(capped)  # outliers are clipped
    assert speedup_reward(correct(timing=False), STATE) == pytest.approx(0.1)


def test_speedup_reward_is_monotone_in_verified_speedup():
    values = [speedup_reward(correct(s, verified=True), STATE) for s in (1.01, 1.5, 2, 3, 5, 8)]
    assert values == sorted(values) and len(set(values)) == len(values)


def test_speedup_reward_parameters():
    fn = get_reward("speedup", failure=0.0, hack=-0.5, correct=0.2, cap=4.0)
    assert fn(failed(Verdict.INCORRECT), STATE) == 0.0 and fn(failed(Verdict.HACK), STATE) == -0.5
    assert fn(correct(100.0, verified=True), STATE) == pytest.approx(2.2)
    with pytest.raises(ConfigError):
        speedup_reward(correct(1.0), STATE, hack=0.5, failure=0.0)
    with pytest.raises(ConfigError):
        speedup_reward(correct(1.0), STATE, correct=-2.0)


def test_fast_p():
    fast_1 = get_reward("fast_p")
    assert fast_1(correct(1.5, verified=True), STATE) == 1.0
    assert fast_1(correct(1.5), STATE) == 0.0  # measured but not verified
    assert fast_1(failed(Verdict.INCORRECT), STATE) == 0.0
    assert get_reward("fast_p", p=2.0)(correct(1.5, verified=True), STATE) == 0.0
    assert get_reward("fast_2")(correct(2.5, verified=True), STATE) == 1.0
    assert get_reward("fast_1.5")(correct(1.4, verified=True), STATE) == 0.0
    assert get_reward("fast_0")(correct(0.2), STATE) == 1.0  # fast_0 is correctness
    assert get_reward("fast_0")(failed(Verdict.HACK), STATE) == 0.0
    assert fast_p_reward(correct(0.8), STATE, p=0.5) == 1.0  # below 1: a measured speedup suffices
    assert fast_p_reward(correct(timing=False), STATE, p=0.5) == 0.0


def test_drkernel_mix():
    assert drkernel_reward(failed(Verdict.RUNTIME_ERROR), STATE) == 0.0
    assert drkernel_reward(failed(Verdict.HACK), STATE) == 0.0
    assert drkernel_reward(correct(2.0, verified=True, coverage=0.5), STATE) == pytest.approx(0.5 + 1.0 + 0.1)
    assert drkernel_reward(correct(9.0, verified=True), STATE) == pytest.approx(0.5 + 1.5)  # min(speedup, 3)
    assert drkernel_reward(correct(2.0), STATE) == pytest.approx(1.0)  # unverified gain counts as 1x
    assert drkernel_reward(correct(0.5, coverage=1.0), STATE) == pytest.approx(0.5 + 0.25 + 0.2)
    assert drkernel_reward(correct(timing=False), STATE) == pytest.approx(0.5)


def test_rewards_are_pure():
    result = correct(2.0, verified=True, coverage=0.7)
    before = result.to_dict()
    for name in names():
        fn = get_reward(name)
        assert fn(result, STATE) == fn(result, STATE) == fn(EvalResult.from_dict(result.to_dict()), STATE)
        assert fn(result, None) == fn(result, STATE)  # the built-ins do not need the state
    assert result.to_dict() == before


def test_non_finite_speedups_earn_nothing_extra():
    for bad in (float("nan"), float("inf"), -1.0, 0.0):
        r = correct(bad, verified=True)
        assert speedup_reward(r, STATE) == pytest.approx(0.1)
        assert fast_p_reward(r, STATE) == 0.0
        assert drkernel_reward(r, STATE) == pytest.approx(0.5)


def test_callable_and_unknown():
    def mine(result, state, bonus=0.0):
        return (1.0 if result.correct else 0.0) + bonus + state.turn

    assert get_reward(mine) is mine
    assert get_reward(mine, bonus=2.0)(correct(1.0), STATE) == 4.0
    with pytest.raises(ConfigError, match="unknown reward"):
        get_reward("nope")
    with pytest.raises(ConfigError):
        get_reward(42)


@pytest.mark.parametrize("name", ["speedup", "fast_p", "fast_1.5", "drkernel", "roofline"])
def test_a_turn_the_judge_failed_is_never_charged_as_a_failure(name):
    fn = get_reward(name)
    not_judged = failed(Verdict.INFRASTRUCTURE_ERROR)
    assert fn(not_judged, STATE) == 0.0
    assert all(fn(not_judged, STATE) >= fn(r, STATE) for r in FAILURES)
    assert not judged(not_judged) and all(judged(r) for r in FAILURES + CORRECT)


def _at_roofline(fraction: float | None) -> EvalResult:
    result = correct(1.2)
    result.timing.roofline_fraction = fraction
    return result


def test_roofline_pays_the_fraction_of_the_measured_peak():
    fn = get_reward("roofline")
    assert fn(_at_roofline(0.42), STATE) == pytest.approx(0.42)
    assert fn(_at_roofline(0.1), STATE) < fn(_at_roofline(0.8), STATE)
    assert fn(_at_roofline(1.7), STATE) == 1.0  # above the peak: capped, not paid
    assert get_reward("roofline", cap=2.0)(_at_roofline(1.7), STATE) == pytest.approx(1.7)
    assert fn(_at_roofline(None), STATE) == 0.0 and fn(correct(timing=False), STATE) == 0.0
    assert fn(_at_roofline(float("nan")), STATE) == 0.0


def test_roofline_pays_nothing_for_a_failure_even_with_a_fraction():
    fn = get_reward("roofline")
    wrong = _at_roofline(0.9)
    wrong.verdict = Verdict.INCORRECT
    assert fn(wrong, STATE) == 0.0
    assert all(fn(r, STATE) == 0.0 for r in FAILURES)
