"""Starting the learner on the Ray cluster: one :class:`~brushrl.learner.actor.LearnerActor`, or a
DeepSpeed :class:`~brushrl.learner.group.LearnerGroup` of them.

Its own module because the group's workers subclass the actor: with the launcher in ``actor`` the
two modules imported each other (issue 37).
"""

from __future__ import annotations

import ray

from brushrl.config import BrushRLConfig
from brushrl.learner.actor import LearnerActor, PolicyLoader


def make_learner_actor(
    cfg: BrushRLConfig,
    total_steps: int,
    *,
    policy_loader: PolicyLoader | None = None,
    **learner_kwargs,
) -> "ray.actor.ActorHandle":
    """Start the learner on the connected Ray cluster: a :class:`LearnerActor`, or with
    ``learner.strategy: deepspeed`` a :class:`~brushrl.learner.group.LearnerGroup` of
    ``learner.workers`` ranks behind the same methods.

    A :class:`~brushrl.learner.actor.LearnerActor` reserves ``cfg.learner.num_cpus`` logical CPUs and what ``cfg.resources.learner`` asks for
    (GPUs, memory, custom resources such as ``{learner: 1}``), with
    ``OMP_NUM_THREADS = cfg.policy.torch_threads`` in its environment.

    Args:
        cfg: the run config (see :class:`~brushrl.learner.actor.LearnerActor`).
        total_steps: optimizer steps of the run.
        policy_loader: see :class:`~brushrl.learner.actor.LearnerActor`; must be picklable by Ray (cloudpickle).
        **learner_kwargs: passed to ``GRPOLearner``.

    Returns:
        The actor handle; the constructor runs asynchronously (the first method call waits for it).
    """
    if cfg.learner.strategy == "deepspeed":
        from brushrl.learner.group import make_learner_group  # DeepSpeed's group: only when asked for

        return make_learner_group(cfg, total_steps, policy_loader=policy_loader, **learner_kwargs)
    from brushrl.hub.weights import offline_env  # the driver's offline switches (every model local)
    from brushrl.ray_setup import ray_options

    threads = str(cfg.policy.torch_threads)
    options = ray_options(cfg.resources.learner)
    remote_cls = ray.remote(LearnerActor).options(
        num_cpus=cfg.learner.num_cpus,
        **options,
        runtime_env={"env_vars": {"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads, **offline_env()}},
    )
    return remote_cls.remote(cfg, total_steps, policy_loader, learner_kwargs)
