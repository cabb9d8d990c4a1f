"""The one median of the project (timings, speedups, benchmark tables), so that every place agrees on it.

It is the usual median: the middle value, or the mean of the two middle values for an even count (never
the upper middle alone). None values are skipped, so a column with gaps still has a median.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable

_RAISE = object()


def median(values: Iterable[float | None], default: float | None | object = _RAISE) -> float | None:
    """The median of the values that are not None; `default` when there are none (else a ValueError)."""
    present = [float(v) for v in values if v is not None]
    if not present:
        if default is _RAISE:
            raise ValueError("median of no values")
        return default  # type: ignore[return-value]
    return float(statistics.median(present))


__all__ = ["median"]
