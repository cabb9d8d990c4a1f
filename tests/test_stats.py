"""The project's one median."""

from __future__ import annotations

import pytest

from kernelgym.stats import median


def test_median_is_the_middle_or_the_mean_of_the_two_middles():
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([4.0, 1.0, 3.0, 2.0]) == 2.5  # not the upper middle (3.0)
    assert median(iter([1, None, 5])) == 3.0  # None skipped, any iterable


def test_median_of_nothing():
    assert median([None], default=None) is None
    with pytest.raises(ValueError):
        median([])
