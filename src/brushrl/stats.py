"""Summary statistics shared by the stages and the benchmarks (one definition each)."""

from __future__ import annotations

import numpy as np


def quantile(xs: list[float], q: float) -> float:
    """The ``q`` quantile (``q`` in [0, 1]) of ``xs`` with linear interpolation
    (``numpy.quantile``'s default); 0.0 for none."""
    return float(np.quantile(xs, q)) if xs else 0.0


def bootstrap_means(values: list[float], strata: list | None = None, n_boot: int = 2000,
                    seed: int = 0) -> np.ndarray:
    """Means of ``n_boot`` bootstrap resamples of ``values``: float64 ``[n_boot]``.

    With ``strata`` (one label per value, e.g. the prompt), each stratum is resampled with
    replacement to its own size (a stratified bootstrap: every resample keeps the prompt mix), so
    the interval reflects sampling noise within prompts, not a changing mix of prompts. Seeded
    (``numpy.random.default_rng(seed)``): the same inputs give the same resamples.

    Raises:
        ValueError: ``values`` is empty, or ``strata`` has another length.
    """
    x = np.asarray(values, dtype=np.float64)
    if not len(x):
        raise ValueError("bootstrap of no values")
    if strata is None:
        labels = np.zeros(len(x), dtype=np.int64)
    else:
        labels = np.unique(np.asarray([str(s) for s in strata]), return_inverse=True)[1]
    if len(labels) != len(x):
        raise ValueError(f"{len(labels)} strata for {len(x)} values")
    rng = np.random.default_rng(seed)
    sums = np.zeros(n_boot)
    for label in np.unique(labels):
        group = x[labels == label]
        sums += group[rng.integers(0, len(group), size=(n_boot, len(group)))].sum(axis=1)
    return sums / len(x)


def percentile_interval(boot: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """The bootstrap percentile interval (Efron & Tibshirani 1993, ch. 13) of resampled statistics
    ``boot``: the ``(1 - level) / 2`` and ``(1 + level) / 2`` quantiles."""
    lo, hi = np.quantile(boot, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)
