"""The rollout engine as a Ray actor."""

from __future__ import annotations

import ray

from brushrl.config import BrushRLConfig
from brushrl.rollout.transformers_engine import TransformersEngine


def make_rollout_actor(cfg: BrushRLConfig, system_prompt: str) -> ray.actor.ActorHandle:
    """Start the rollout engine actor of ``cfg.rollout.backend`` (:class:`TransformersEngine`, or
    ``brushrl.rollout.vllm_engine.VLLMEngine`` in the ``cfg.rollout.python`` interpreter) for
    ``cfg.policy`` / ``cfg.rollout`` / ``cfg.learner.lora``.

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

    runtime_env: dict = {"env_vars": {"OMP_NUM_THREADS": str(cfg.policy.torch_threads)}}
    if cfg.rollout.python:
        runtime_env["py_executable"] = cfg.rollout.python
    options = {"num_cpus": cfg.rollout.num_cpus, "runtime_env": runtime_env}
    options.update(ray_options(cfg.resources.rollout))  # placement (GPUs, memory, custom resources) wins
    if cfg.rollout.backend == "vllm":
        # Imported by name inside the actor's own interpreter: the driver needs no vllm.
        actor_cls = ray.remote(**options)(_VLLMActor)
        return actor_cls.remote(cfg.policy, cfg.rollout, system_prompt, cfg.learner.lora, cfg.run.seed)
    actor_cls = ray.remote(**options)(TransformersEngine)
    return actor_cls.remote(cfg.policy, cfg.rollout, system_prompt, cfg.learner.lora)


class _VLLMActor:
    """Thin actor body that imports :mod:`brushrl.rollout.vllm_engine` in the actor process."""

    def __init__(self, *args) -> None:
        from brushrl.rollout.vllm_engine import VLLMEngine

        self.engine = VLLMEngine(*args)

    def generate(self, prompts, n, seed=None):
        return self.engine.generate(prompts, n, seed)

    def load_adapter(self, state, version):
        return self.engine.load_adapter(state, version)

    def policy_version(self):
        return self.engine.policy_version()
