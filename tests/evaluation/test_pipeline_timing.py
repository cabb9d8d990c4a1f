"""When a timing is repeated before it may verify a speedup, and when the repeat agrees (pure)."""

from __future__ import annotations

import pytest

from kernelgym.evaluation.options import EvalOptions
from kernelgym.evaluation.timing import second_timing_agrees, second_timing_needed

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


def test_a_timing_stops_once_its_interval_is_tight_enough_to_decide_what_is_paid():
    """The GPU's timing slot is held while batches run: a timing whose speedup is already known to within
    timing_precision stops there, a noisy one goes on (to the budget), and the option 0 turns it off."""
    import random

    from kernelgym.evaluation.timing import precise_enough

    rng = random.Random(0)
    steady_ref = [1.0 + rng.uniform(-0.01, 0.01) for _ in range(6)]
    steady_cand = [0.5 + rng.uniform(-0.005, 0.005) for _ in range(6)]
    noisy_cand = [rng.choice([0.3, 0.9]) for _ in range(6)]
    options = EvalOptions()
    assert precise_enough(steady_ref, steady_cand, options)
    assert not precise_enough(steady_ref, noisy_cand, options)
    assert not precise_enough(steady_ref[:4], steady_cand[:4], options)  # too few batches to say
    assert not precise_enough(steady_ref, steady_cand, EvalOptions(timing_precision=0.0))
    # A candidate certainly slower than the threshold needs only the looser precision: its reward is settled.
    slow_cand = [c * rng.uniform(0.9, 1.1) for c in [2.0] * 8]
    slow_ref = steady_ref + steady_ref[:2]
    assert precise_enough(slow_ref, slow_cand, options)
    assert not precise_enough(slow_ref, slow_cand, EvalOptions(timing_precision_unverified=0.0))


def test_the_gpu_timing_slot_records_how_long_it_was_waited_for_and_held(tmp_path, monkeypatch):
    """Benchmarks read the slot's busy share from these seconds (the GPU's one-at-a-time timing)."""
    import threading
    import time

    from kernelgym.workers import locks
    from kernelgym.workers.locks import timing_slot

    monkeypatch.setattr(locks, "LOCK_DIR", str(tmp_path))
    locks.prepare()
    first, second = {}, {}
    held = threading.Event()

    def hold():
        with timing_slot("cuda", first):
            held.set()
            time.sleep(0.3)

    thread = threading.Thread(target=hold)
    thread.start()
    held.wait()
    with timing_slot("cuda", second):
        pass
    thread.join()
    assert first["slot_held"] >= 0.3 and first["slot_wait"] < 0.1
    assert second["slot_wait"] >= 0.2  # it waited for the first holder
    cpu = {}
    with timing_slot("cpu", cpu):  # CPU workers time on cores of their own: no slot
        pass
    assert cpu == {}
