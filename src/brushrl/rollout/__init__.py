"""Rollout: sample GRPO groups of completions from the behaviour policy.

``RolloutEngine`` is the interface, ``TransformersEngine`` the ``model.generate`` implementation
and ``make_rollout_actor`` runs it as a Ray actor.
"""

from brushrl.rollout.actor import make_rollout_actor
from brushrl.rollout.base import RolloutEngine
from brushrl.rollout.transformers_engine import TransformersEngine

__all__ = ["RolloutEngine", "TransformersEngine", "make_rollout_actor"]
