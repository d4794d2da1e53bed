"""The learner stage: GRPO advantages, the group filter, and a TRL + PEFT LoRA learner (also as a Ray actor).

``GRPOLearner`` lives in :mod:`brushrl.learner.grpo` and is not imported here: it pulls in TRL,
which the driver does not need (the actor imports it in its own process). ``LearnerActor``
(:mod:`brushrl.learner.actor`) and ``make_learner_actor`` (:mod:`brushrl.learner.launch`, which
imports Ray) are imported on first use (PEP 562): a process training without Ray
(``brushrl.rehearse.gpu_smoke`` on a machine without Ray) must not need Ray just to import
``brushrl.learner.grpo``.
"""

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


def __getattr__(name: str):
    if name == "LearnerActor":
        from brushrl.learner.actor import LearnerActor

        return LearnerActor
    if name == "make_learner_actor":
        from brushrl.learner.launch import make_learner_actor

        return make_learner_actor
    raise AttributeError(f"module 'brushrl.learner' has no attribute {name!r}")


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
