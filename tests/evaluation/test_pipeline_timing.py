"""When a timing is repeated before it may verify a speedup, and when the repeat agrees (pure)."""

from __future__ import annotations

import pytest

from kernelgym.evaluation.options import EvalOptions
from kernelgym.evaluation.pipeline import second_timing_agrees, second_timing_needed

OPTIONS = EvalOptions()


@pytest.mark.parametrize(
    ("speedup", "low", "expected"),
    [
        (0.9, 0.8, None),  # nothing claimed
        (1.2, 0.95, None),  # faster, but the interval reaches below the threshold: not verified, no repeat
        (1.2, 1.05, "confirm"),  # about to be verified: the claim must hold twice
        (7.0, 0.9, "implausible"),  # too fast to believe once, whatever its interval
        (7.0, 6.5, "implausible"),
    ],
)
def test_a_claim_or_an_implausible_speedup_is_timed_again(speedup, low, expected):
    assert second_timing_needed(speedup, low, OPTIONS) == expected


def test_confirmation_can_be_switched_off():
    assert second_timing_needed(1.2, 1.05, EvalOptions(confirm_verified=False)) is None


@pytest.mark.parametrize(
    ("why", "first", "second", "low2", "agrees"),
    [
        ("confirm", 1.2, 1.18, 1.02, True),
        ("confirm", 1.2, 1.25, 0.97, False),  # the second interval reaches below the threshold
        ("implausible", 8.0, 8.4, 7.0, True),  # within 10%
        ("implausible", 8.0, 6.0, 5.5, False),  # 25% apart: noise, not evidence
    ],
)
def test_the_second_timing_must_agree(why, first, second, low2, agrees):
    assert second_timing_agrees(why, first, second, low2, OPTIONS) is agrees
