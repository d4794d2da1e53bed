"""``rollout.replicas`` engine actors behind one router actor with the engine's method names.

``brushrl.rollout.make_rollout_actor`` starts N engine actors (each with ``resources.rollout``'s
placement, e.g. one GPU each) and, for N > 1, one :class:`RolloutRouter` (an async actor with
``num_cpus=0``) in front of them; callers keep calling ``rollout.generate.remote(...)``:

* ``generate`` goes to the replica with the fewest requests in flight (ties: round-robin);
  ``revise`` goes to the replica that sampled most of its requests' previous turns (the router
  remembers the last :data:`AFFINITY_ENTRIES` completions it returned), whose prefix cache holds
  their context, else as ``generate``;
* ``load_adapter`` is sent to every replica and returns once all of them serve it; a replica that
  fails makes it raise :class:`ReplicaError` naming the replica (the others may serve the new
  version then: the run stops on it, as on any failed sync);
* ``policy_version`` is the replicas' common version (:class:`ReplicaError` if they disagree);
* ``score(prompt_ids, completion_ids, adapter=True, replica=0)`` scores on one replica (the sync
  canary scores on each, ``brushrl.orchestrator.sync_check``);
* ``replicas()`` is N; ``registered_adapters``, ``prefix_cache_stats`` and ``batch_stats`` return
  one entry per replica.

The router only forwards: it holds no model and works for either backend.
"""

from __future__ import annotations

import asyncio
import os
from collections import Counter, OrderedDict

import ray


#: Completions whose replica the router remembers for revision affinity (an LRU).
AFFINITY_ENTRIES = 4096


def _key(completion) -> int:
    """A completion's identity for affinity: the hash of its context and sampled tokens."""
    return hash((tuple(completion.prompt_ids), tuple(completion.completion_ids)))


class ReplicaError(RuntimeError):
    """A rollout replica failed a broadcast call, or the replicas disagree; the message names it."""


class RolloutRouter:
    """The router actor's body (module docstring).

    Args:
        replicas: the engine actor handles, replica 0 first; or
        specs: ``(class, ray options, constructor args)`` per replica, started here, so the router
            owns them and they die with it (``ray.kill`` of the router ends the replicas: Ray kills
            the actors an actor owns when it dies).
    """

    def __init__(self, replicas: list | None = None, specs: list | None = None) -> None:
        if specs:
            replicas = [ray.remote(**options)(cls).remote(*args) for cls, options, args in specs]
        if not replicas:
            raise ValueError("a rollout router needs at least one replica")
        self._replicas = list(replicas)
        self._in_flight = [0] * len(replicas)
        self._served = [0] * len(replicas)
        self._next = 0  # round-robin cursor among ties
        self._home: OrderedDict[int, int] = OrderedDict()  # completion key -> replica that sampled it

    def _pick(self) -> int:
        n = len(self._replicas)
        least = min(self._in_flight)
        for k in range(n):
            i = (self._next + k) % n
            if self._in_flight[i] == least:
                self._next = (i + 1) % n
                return i
        raise AssertionError("unreachable")

    async def _routed(self, method: str, *args, replica: int | None = None):
        i = self._pick() if replica is None else replica
        self._in_flight[i] += 1
        self._served[i] += 1
        try:
            return i, await getattr(self._replicas[i], method).remote(*args)
        finally:
            self._in_flight[i] -= 1

    def _remember(self, completions, replica: int) -> None:
        for c in completions:
            self._home[_key(c)] = replica
            self._home.move_to_end(_key(c))
        while len(self._home) > AFFINITY_ENTRIES:
            self._home.popitem(last=False)

    async def generate(self, prompts, n, seed=None):
        i, groups = await self._routed("generate", prompts, n, seed)
        self._remember([c for g in groups for c in g], i)
        return groups

    async def revise(self, requests, seed=None):
        homes = Counter(h for h in (self._home.get(_key(prev)) for prev, _ in requests) if h is not None)
        home = homes.most_common(1)[0][0] if homes else None
        i, out = await self._routed("revise", requests, seed, replica=home)
        self._remember(out, i)
        return out

    async def _broadcast(self, method: str, *args) -> list:
        """``method(*args)`` on every replica at once; raises :class:`ReplicaError` naming the first
        replica that failed (after all have answered)."""
        results = await asyncio.gather(*(getattr(r, method).remote(*args) for r in self._replicas),
                                       return_exceptions=True)
        for i, res in enumerate(results):
            if isinstance(res, BaseException):
                cause = getattr(res, "cause", None) or res
                failed = [j for j, r in enumerate(results) if isinstance(r, BaseException)]
                raise ReplicaError(f"rollout replica {i} of {len(self._replicas)} failed {method} "
                                   f"(failed replicas: {failed}): {type(cause).__name__}: {cause}") from res
        return results

    async def load_adapter(self, state, version):
        if not isinstance(state, (str, os.PathLike)):  # a state dict: one copy in the object store for every replica
            state = ray.put(state)
        await self._broadcast("load_adapter", state, version)

    async def policy_version(self) -> int:
        versions = await self._broadcast("policy_version")
        if len(set(versions)) != 1:
            raise ReplicaError(f"rollout replicas serve different policy versions: {versions} (replica i at index i)")
        return versions[0]

    async def score(self, prompt_ids, completion_ids, adapter=True, replica=0):
        if not 0 <= replica < len(self._replicas):
            raise ValueError(f"replica {replica}: there are {len(self._replicas)} rollout replicas")
        return await self._replicas[replica].score.remote(prompt_ids, completion_ids, adapter)

    async def replicas(self) -> int:
        return len(self._replicas)

    async def replica_handles(self) -> list:
        """The engine actors, replica 0 first (tests and tools address one directly)."""
        return list(self._replicas)

    async def registered_adapters(self) -> list:
        return await self._broadcast("registered_adapters")

    async def prefix_cache_stats(self) -> list:
        return await self._broadcast("prefix_cache_stats")

    async def batch_stats(self) -> list:
        return await self._broadcast("batch_stats")

    async def routing_stats(self) -> dict:
        """Requests in flight and requests routed so far, per replica."""
        return {"in_flight": list(self._in_flight), "routed": list(self._served)}
