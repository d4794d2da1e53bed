"""The rollout engine as a Ray actor."""

from __future__ import annotations

import ray

from brushrl.config import BrushRLConfig
from brushrl.rollout.transformers_engine import TransformersEngine


def make_rollout_actor(cfg: BrushRLConfig, system_prompt: str) -> ray.actor.ActorHandle:
    """Start a :class:`TransformersEngine` actor for ``cfg.policy`` / ``cfg.rollout`` / ``cfg.learner.lora``.

    The actor reserves ``cfg.rollout.num_cpus`` logical CPUs and what ``cfg.resources.rollout`` asks
    for (GPUs, memory, custom resources), and runs with
    ``OMP_NUM_THREADS = cfg.policy.torch_threads`` (1 by default: on the 2-core machine one thread
    per actor was measured fastest). ``cfg.policy.model`` must already name a loadable model (the
    driver warm-starts the tiny policy first), or be ``tiny`` with ``brushrl.corpus`` available.

    Returns:
        The actor handle; call ``generate.remote(prompts, n, seed)``,
        ``load_adapter.remote(state, version)``, ``policy_version.remote()``.
    """
    from brushrl.plan.resources import ray_options

    actor_cls = ray.remote(
        num_cpus=cfg.rollout.num_cpus,
        **ray_options(cfg.resources.rollout),
        runtime_env={"env_vars": {"OMP_NUM_THREADS": str(cfg.policy.torch_threads)}},
    )(TransformersEngine)
    return actor_cls.remote(cfg.policy, cfg.rollout, system_prompt, cfg.learner.lora)
