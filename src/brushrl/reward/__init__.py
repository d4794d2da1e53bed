"""Reward: components (gate, length, scorers) and their weighted combination with None semantics.

A sketch fault (the gate fails) scores 0. An infrastructure failure (a render that could not be done
for reasons not caused by the sketch, a scorer error or timeout) gives None: the sample is excluded
from its group's statistics and counted by cause, never trained on as 0.

The scikit-image scorer is imported lazily and the rest needs only the standard library, so that ``brushrl.reward.hpsv3`` and ``brushrl.reward.base`` import inside
a scorer actor running in another Python environment (without scikit-image or pydantic).
"""

from __future__ import annotations

import importlib

from brushrl.reward.base import ScoreOut
from brushrl.reward.combine import RewardBreakdown, combine
from brushrl.reward.length import length_score

#: Lazily imported (scikit-image): name -> module.
_EXPORTS = {
    "ImageFeatures": "brushrl.reward.pool_scorer",
    "PoolSimilarityScorer": "brushrl.reward.pool_scorer",
    "image_features": "brushrl.reward.pool_scorer",
}

__all__ = sorted([*_EXPORTS, "ScoreOut", "RewardBreakdown", "combine", "length_score"])


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'brushrl.reward' has no attribute {name!r}")
