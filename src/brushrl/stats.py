"""Summary statistics shared by the stages and the benchmarks (one definition each)."""

from __future__ import annotations

import numpy as np


def quantile(xs: list[float], q: float) -> float:
    """The ``q`` quantile (``q`` in [0, 1]) of ``xs`` with linear interpolation
    (``numpy.quantile``'s default); 0.0 for none."""
    return float(np.quantile(xs, q)) if xs else 0.0


def bootstrap_indices(strata: list | None, n: int, n_boot: int = 2000, seed: int = 0) -> np.ndarray:
    """Row indices of ``n_boot`` bootstrap resamples of ``n`` rows: int64 ``[n_boot, n]``.

    With ``strata`` (one label per row, e.g. the prompt), each stratum is resampled with
    replacement to its own size (a stratified bootstrap: every resample keeps the prompt mix), so
    a statistic's interval reflects sampling noise within prompts, not a changing mix of prompts.
    Seeded (``numpy.random.default_rng(seed)``): the same inputs give the same resamples. Any
    statistic of the rows (a mean, a ratio, a decomposition) is recomputed on ``rows[idx[b]]``;
    the row order within a resample is by stratum, which no statistic here depends on.

    Raises:
        ValueError: ``n`` is 0, or ``strata`` has another length.
    """
    if not n:
        raise ValueError("bootstrap of no values")
    if strata is None:
        labels = np.zeros(n, dtype=np.int64)
    else:
        labels = np.unique(np.asarray([str(s) for s in strata]), return_inverse=True)[1]
    if len(labels) != n:
        raise ValueError(f"{len(labels)} strata for {n} values")
    rng = np.random.default_rng(seed)
    out = np.empty((n_boot, n), dtype=np.int64)
    start = 0
    # Strata in sorted-label order, one draw each: the draws (hence every interval reported so far)
    # are those of the earlier per-stratum loop of bootstrap_means.
    for label in np.unique(labels):
        members = np.nonzero(labels == label)[0]
        out[:, start:start + len(members)] = members[rng.integers(0, len(members), size=(n_boot, len(members)))]
        start += len(members)
    return out


def bootstrap_means(values: list[float], strata: list | None = None, n_boot: int = 2000,
                    seed: int = 0) -> np.ndarray:
    """Means of ``n_boot`` bootstrap resamples of ``values``: float64 ``[n_boot]``, the resamples
    of :func:`bootstrap_indices` (stratified by ``strata``, seeded).

    Raises:
        ValueError: ``values`` is empty, or ``strata`` has another length.
    """
    x = np.asarray(values, dtype=np.float64)
    return x[bootstrap_indices(strata, len(x), n_boot, seed)].mean(axis=1)


def percentile_interval(boot: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """The bootstrap percentile interval (Efron & Tibshirani 1993, ch. 13) of resampled statistics
    ``boot``: the ``(1 - level) / 2`` and ``(1 + level) / 2`` quantiles."""
    lo, hi = np.quantile(boot, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)
