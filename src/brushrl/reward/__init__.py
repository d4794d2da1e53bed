"""Reward: components (gate, length, scorers) and their weighted combination with None semantics.

A sketch fault (the gate fails) scores 0. An infrastructure failure (a render that could not be done
for reasons not caused by the sketch, a scorer error or timeout) gives None: the sample is excluded
from its group's statistics and counted by cause, never trained on as 0.
"""

from brushrl.reward.combine import RewardBreakdown, combine
from brushrl.reward.length import length_score
from brushrl.reward.pool_scorer import ImageFeatures, PoolSimilarityScorer, image_features

__all__ = [
    "ImageFeatures",
    "PoolSimilarityScorer",
    "RewardBreakdown",
    "combine",
    "image_features",
    "length_score",
]
