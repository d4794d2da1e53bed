"""Summary statistics shared by the stages and the benchmarks (one definition each)."""

from __future__ import annotations

import numpy as np


def quantile(xs: list[float], q: float) -> float:
    """The ``q`` quantile (``q`` in [0, 1]) of ``xs`` with linear interpolation
    (``numpy.quantile``'s default); 0.0 for none."""
    return float(np.quantile(xs, q)) if xs else 0.0
