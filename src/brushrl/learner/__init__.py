"""The learner stage: GRPO advantages, the group filter, and a TRL + PEFT LoRA learner (also as a Ray actor).

``GRPOLearner`` lives in :mod:`brushrl.learner.grpo` and is not imported here: it pulls in TRL,
which the driver does not need (the actor imports it in its own process).
"""

from brushrl.learner.actor import LearnerActor, make_learner_actor
from brushrl.learner.advantages import (
    ACCEPTED,
    TOO_FEW_VALID,
    ZERO_VARIANCE,
    GroupFilter,
    batch_advantages,
    filter_group,
    group_advantages,
)
from brushrl.learner.samples import TrainSample, as_train_sample

__all__ = [
    "ACCEPTED",
    "TOO_FEW_VALID",
    "ZERO_VARIANCE",
    "GroupFilter",
    "LearnerActor",
    "TrainSample",
    "as_train_sample",
    "batch_advantages",
    "filter_group",
    "group_advantages",
    "make_learner_actor",
]
