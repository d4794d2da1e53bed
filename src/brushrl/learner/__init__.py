"""The learner stage: GRPO advantages, the group filter, and a TRL + PEFT LoRA learner (also as a Ray actor).

``GRPOLearner`` lives in :mod:`brushrl.learner.grpo` and is not imported here: it pulls in TRL,
which the driver does not need (the actor imports it in its own process). ``LearnerActor`` and
``make_learner_actor`` (:mod:`brushrl.learner.actor`) are imported on first use (PEP 562): that
module imports Ray, which a process training without Ray (``brushrl.perf.gpu_smoke_single`` on a
machine without Ray) must not need just to import ``brushrl.learner.grpo``.
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

#: Names served from :mod:`brushrl.learner.actor` on first access (it imports Ray).
_RAY_NAMES = ("LearnerActor", "make_learner_actor")


def __getattr__(name: str):
    if name in _RAY_NAMES:
        from brushrl.learner import actor

        return getattr(actor, name)
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
