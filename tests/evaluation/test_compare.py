"""The output comparison: the same rule as torch.isclose(equal_nan=True), in every dtype, non-finite values
included, however the fast pass and the exact report path split the work."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelgym.evaluation.compare import compare_trial

NAN, INF = float("nan"), float("inf")
DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


def agrees_with_isclose(want: list, got: list, dtype) -> bool:
    """isclose on the values exactly (float64): in a half type torch.isclose rounds the tolerance into that
    type too (1e-4 becomes 1.00017e-4 in float16), which the judge does not do; hypothesis found one such
    case (0 against float16's 1.00017e-4)."""
    w, g = torch.tensor(want, dtype=dtype), torch.tensor(got, dtype=dtype)
    judged = compare_trial(0, False, [w], [g], 1e-4, 1e-4).passed
    return judged == bool(torch.isclose(g.double(), w.double(), rtol=1e-4, atol=1e-4, equal_nan=True).all())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("want,got", [
    ([NAN, 1.0], [NAN, 1.0]),  # NaN where the reference has NaN: agreed
    ([INF, -INF, 1.0], [INF, -INF, 1.0]),
    ([NAN, 1.0], [1.0, 1.0]),
    ([1.0, 1.0], [NAN, 1.0]),
    ([INF], [-INF]),  # an infinite expected value gets no tolerance
    ([INF], [1e30]),
    ([1e30], [INF]),
    ([INF], [NAN]),
    ([1.0, 2.0], [1.00001, 2.0]),
    ([1.0], [1.1]),
])
def test_non_finite_values_are_judged_like_isclose(want, got, dtype):
    assert agrees_with_isclose(want, got, dtype)


finite_or_not = st.one_of(st.floats(-1e6, 1e6), st.sampled_from([NAN, INF, -INF, 0.0]))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(finite_or_not, st.floats(-1e-3, 1e-3), st.booleans()), min_size=1, max_size=8),
       st.sampled_from(DTYPES))
def test_any_output_is_judged_like_isclose(pairs, dtype):
    want = [w for w, _, _ in pairs]
    got = [w + delta if moved else w for w, delta, moved in pairs]
    assert agrees_with_isclose(want, got, dtype)


def test_a_mismatch_names_where_and_how_far():
    got = torch.tensor([[0.0, 0, 0], [0, 5.0, 0]])
    trial = compare_trial(0, False, [torch.zeros(2, 3)], [got], 1e-4, 1e-4)
    assert not trial.passed and trial.first_mismatch == [1, 1] and trial.max_abs_diff == 5.0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(finite_or_not, st.floats(-1e-3, 1e-3), st.booleans()), min_size=1, max_size=8),
       st.sampled_from(DTYPES))
def test_the_batched_flag_never_passes_what_the_full_comparison_fails(pairs, dtype):
    """The reference checks a whole batch by device flags read back at once, and sends it through the full
    comparison when any flag is down: a flag that is up must mean the full comparison passes."""
    from kernelgym.evaluation.compare import close_flag

    want = torch.tensor([w for w, _, _ in pairs], dtype=dtype)
    got = torch.tensor([w + delta if moved else w for w, delta, moved in pairs], dtype=dtype)
    if bool(close_flag(want, got, 1e-4, 1e-4)):
        assert compare_trial(0, False, [want], [got], 1e-4, 1e-4).passed


def test_the_batched_flag_sends_other_shapes_dtypes_and_errors_to_the_full_comparison():
    from kernelgym.evaluation.compare import close_flag

    want = torch.zeros(4)
    assert close_flag(want, torch.zeros(2, 2), 1e-4, 1e-4) is None
    assert close_flag(want, torch.zeros(4, dtype=torch.float64), 1e-4, 1e-4) is None
    assert close_flag(want, "the output is not readable", 1e-4, 1e-4) is None
    assert not bool(close_flag(want, torch.tensor([0.0, 0.0, 0.0, 1.0]), 1e-4, 1e-4))
    assert bool(close_flag(torch.arange(3), torch.arange(3), 0.0, 0.0))


def test_rounding_perturbations_come_in_antithetic_pairs_and_leave_integers_alone():
    """Each pair moves a float input by +-1e-5 of itself with the same noise, so an output that sits on a
    discontinuity to within rounding falls on each side in one of the pair; integers stay as they are."""
    import torch

    from kernelgym.evaluation.compare import ROUNDING_PERTURBATION, first_uncovered, perturbed_at_rounding

    x, index = torch.randn(1000), torch.arange(4)
    sets = perturbed_at_rounding([x, index, 3])
    assert len(sets) == 4
    for plus, minus in (sets[0:2], sets[2:4]):
        up, down = (plus[0] - x) / x, (minus[0] - x) / x
        assert torch.allclose(up, -down, atol=1e-6) and 0 < float(up.abs().max()) < 10 * ROUNDING_PERTURBATION
        assert torch.equal(plus[1], index) and plus[2] == 3
    step = (torch.zeros(8) > 0).float()  # the reference on the kink: 0 everywhere
    other_side = [[(torch.full((8,), s) > 0).float()] for s in (1e-6, -1e-6)]
    assert first_uncovered([[step]] + other_side, [torch.ones(8)], 1e-4, 1e-4) is None
    assert first_uncovered([[step]] + other_side, [torch.full((8,), 2.0)], 1e-4, 1e-4) == 0
