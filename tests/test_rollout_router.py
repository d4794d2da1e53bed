"""The request batcher (``brushrl.rollout.batching``) and the replica router
(``brushrl.rollout.router``) without a model: a fake engine function and fake replica actors.

Checks: concurrent requests queued while a call runs are merged into the next call, FIFO, bounded
by ``max_seqs`` (at least one request), on one engine thread, with adapter loads queued between
calls; a failed merged call fails every request in it; the router sends work to the replica with
the fewest requests in flight (ties round-robin) and a revision to the replica that sampled its
previous turn, broadcasts ``load_adapter`` and names a replica
that fails it, and refuses replicas that disagree on the policy version; the sync canary checks
every replica and names the one that serves the base; config refuses transformers replicas and
splits the default ``max_num_seqs`` between replicas.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path

import pytest
import ray

from brushrl.config import BrushRLConfig, SyncCheckConfig
from brushrl.orchestrator.sync_check import Probe, SyncCheck, SyncCheckError
from brushrl.ray_setup import start_local_ray
from brushrl.rollout.batching import RequestBatcher
from brushrl.rollout.router import ReplicaError, RolloutRouter
from brushrl.types import Completion


# ---------------------------------------------------------------------------------------- batcher
class FakeEngine:
    """Records each merged call; the first call blocks until ``release`` is set."""

    def __init__(self) -> None:
        self.calls: list[list] = []
        self.threads: set[int] = set()
        self.version = 0
        self.release = threading.Event()
        self.started = threading.Event()
        self.fail = False

    def generate_many(self, requests):
        self.threads.add(threading.get_ident())
        self.started.set()
        self.release.wait(10)
        self.calls.append(list(requests))
        if self.fail:
            raise RuntimeError("engine fell over")
        return [(r, self.version) for r in requests]

    def load(self, version):
        self.threads.add(threading.get_ident())
        self.version = version


def test_batcher_merges_queued_requests_bounded_by_max_seqs_on_one_thread():
    async def main():
        engine = FakeEngine()
        batcher = RequestBatcher(engine.generate_many, max_seqs=8)
        first = asyncio.ensure_future(batcher.submit("g0", 4))
        await asyncio.get_running_loop().run_in_executor(None, engine.started.wait, 10)  # call 1 is running
        rest = [asyncio.ensure_future(batcher.submit(f"g{i}", 4)) for i in range(1, 5)]
        load = asyncio.ensure_future(batcher.call(engine.load, 7))  # queued behind call 1
        await asyncio.sleep(0)
        engine.release.set()
        results = await asyncio.gather(first, *rest)
        await load
        return engine, batcher, results

    engine, batcher, results = asyncio.run(main())
    # Call 1: g0 alone; then g1+g2 (8 sequences: the bound), then g3+g4; the adapter loaded before call 2.
    assert engine.calls == [["g0"], ["g1", "g2"], ["g3", "g4"]]
    assert results == [("g0", 0), ("g1", 7), ("g2", 7), ("g3", 7), ("g4", 7)]
    assert len(engine.threads) == 1 and threading.get_ident() not in engine.threads
    stats = batcher.stats.as_dict()
    assert stats | {"sizes": None} == {"calls": 3, "requests": 5, "sequences": 20, "max_requests": 2,
                                       "max_sequences": 8, "failed_calls": 0, "sizes": None}
    assert stats["sizes"] == [4, 8, 8]


def test_batcher_oversized_request_goes_alone_and_a_failed_call_fails_every_request():
    async def main():
        engine = FakeEngine()
        engine.release.set()
        batcher = RequestBatcher(engine.generate_many, max_seqs=2)
        assert await batcher.submit("big", 5) == ("big", 0)  # more than max_seqs: alone, never stuck
        engine.release.clear()
        engine.started.clear()
        first = asyncio.ensure_future(batcher.submit("a", 1))
        await asyncio.get_running_loop().run_in_executor(None, engine.started.wait, 10)
        engine.fail = True
        rest = [asyncio.ensure_future(batcher.submit(x, 1)) for x in ("b", "c")]
        await asyncio.sleep(0)
        engine.release.set()
        return engine, batcher, await asyncio.gather(first, *rest, return_exceptions=True)

    engine, batcher, results = asyncio.run(main())
    assert engine.calls[-1] == ["b", "c"]
    assert all(isinstance(r, RuntimeError) and "engine fell over" in str(r) for r in results)
    assert batcher.stats.failed_calls == 2


# ---------------------------------------------------------------------------------------- router
class _Fake:
    """A rollout engine stand-in: ``generate`` waits on a gate the test opens; ``load_adapter`` of a
    folder named ``bad`` fails."""

    def __init__(self, index: int) -> None:
        self.index, self.version, self.gate = index, 0, asyncio.Event()

    async def generate(self, prompts, n, seed=None):
        await self.gate.wait()
        return [[Completion(p, str(self.index), [seed], [k], [-1.0], self.version) for k in range(n)] for p in prompts]

    async def revise(self, requests, seed=None):
        return [Completion(prev.prompt, str(self.index), prev.prompt_ids + prev.completion_ids + [99], [1], [-1.0],
                           self.version) for prev, _ in requests]

    async def open(self):
        self.gate.set()

    async def load_adapter(self, state, version):
        if isinstance(state, str) and state.endswith("bad") and self.index == 1:
            raise FileNotFoundError(f"{state}: no adapter_config.json")
        self.version = version

    async def policy_version(self):
        return self.version

    async def score(self, prompt_ids, completion_ids, adapter=True):
        # Replica 1 "serves the base" once version 2 is loaded.
        moved = adapter and not (self.index == 1 and self.version == 2)
        return [-1.0 if moved else -2.0] * len(completion_ids)

    async def registered_adapters(self):
        return [self.version + 1]


FakeReplica = ray.remote(num_cpus=0)(_Fake)


@pytest.fixture(scope="module")
def local_ray():
    root = Path(__file__).resolve().parents[1]  # the workers import the fakes from this module
    path = os.pathsep.join([str(root / "src"), str(root / "tests"), os.environ.get("PYTHONPATH", "")])
    start_local_ray(num_cpus=1, object_store_memory=100 * 1024**2, runtime_env={"env_vars": {"PYTHONPATH": path}})
    yield
    ray.shutdown()


def test_router_balances_broadcasts_and_names_the_failing_replica(local_ray):
    fakes = [FakeReplica.remote(i) for i in range(2)]
    router = ray.remote(num_cpus=0)(RolloutRouter).remote(fakes)
    assert ray.get(router.replicas.remote()) == 2
    # Four groups at once while no replica answers: two each (fewest in flight, ties round-robin).
    refs = [router.generate.remote([f"p{i}"], 2, i) for i in range(4)]
    # The gates open only once the router holds all four (under load its calls arrive late).
    deadline = time.monotonic() + 300
    while sum(ray.get(router.routing_stats.remote())["in_flight"]) < 4:
        assert time.monotonic() < deadline, ray.get(router.routing_stats.remote())
        time.sleep(0.05)
    ray.get([f.open.remote() for f in fakes])
    groups = [ray.get(r)[0] for r in refs]
    served = [int(g[0].text) for g in groups]
    assert sorted(served) == [0, 0, 1, 1], served
    assert ray.get(router.routing_stats.remote())["routed"] == [2, 2]
    # A revision goes where its previous turns were sampled (their prefix cache), turn after turn.
    for g, home in zip(groups, served):
        (turn2,) = ray.get(router.revise.remote([(g[0], "critique")], 1))
        (turn3,) = ray.get(router.revise.remote([(turn2, "critique")], 1))
        assert int(turn2.text) == int(turn3.text) == home
    stranger = Completion("p", "?", [7], [7], [-1.0], 0)
    assert ray.get(router.revise.remote([(stranger, "c")], 1))[0].text in ("0", "1")

    ray.get(router.load_adapter.remote("/adapters/v000001", 1))
    assert ray.get(router.policy_version.remote()) == 1
    assert ray.get(router.registered_adapters.remote()) == [[2], [2]]
    with pytest.raises(ray.exceptions.RayTaskError, match=r"rollout replica 1 of 2 failed load_adapter .*"
                                                          r"FileNotFoundError: /adapters/bad"):
        ray.get(router.load_adapter.remote("/adapters/bad", 2))
    # Replica 0 took version 2, replica 1 did not: the router refuses to name one version.
    with pytest.raises(ray.exceptions.RayTaskError, match=r"different policy versions: \[2, 1\]"):
        ray.get(router.policy_version.remote())

    # The canary scores every replica: at version 2 replica 1 serves the base and is named.
    ray.get(fakes[1].load_adapter.remote("/adapters/v000002", 2))
    probe = Probe([1, 2], [3, 4, 5])
    check = SyncCheck(SyncCheckConfig(), probe, replicas=2)

    class Learner:  # the learner's log-probs: the adapter's (-1 per token)
        class completion_logprobs:
            @staticmethod
            def remote(p, c):
                return asyncio.sleep(0, [-1.0] * len(c))

    with pytest.raises(SyncCheckError, match=r"rollout replica 1 of 2: weight sync of policy version 2"):
        asyncio.run(check.run(Learner, router, 2))
    assert check.base == [-2.0] * 3
    ray.get(fakes[1].load_adapter.remote("/adapters/v000001", 1))
    ray.get(fakes[0].load_adapter.remote("/adapters/v000001", 1))
    gap = asyncio.run(check.run(Learner, router, 1))
    assert gap.gap == 0 and [g.engine_shift for g in check.gaps] == [1.0, 1.0]


def test_config_splits_max_num_seqs_between_replicas_and_refuses_transformers_replicas():
    cfg = BrushRLConfig.model_validate({"rollout": {"backend": "vllm", "adapter_dir": "/tmp/a", "replicas": 3,
                                                    "group_size": 4, "groups_per_step": 2},
                                        "orchestrator": {"max_staleness": 1}})
    assert cfg.rollout.max_num_seqs == 6  # ceil(2 x 2 x 4 / 3)
    with pytest.raises(ValueError, match="only rollout.backend 'vllm' runs replicas"):
        BrushRLConfig.model_validate({"rollout": {"replicas": 2}})
    with pytest.raises(ValueError, match="rollout.partial_rollouts: only rollout.backend 'vllm'"):
        BrushRLConfig.model_validate({"rollout": {"partial_rollouts": True}})


def test_a_router_owns_the_replicas_it_starts_and_they_end_with_it(local_ray):
    router = ray.remote(num_cpus=0)(RolloutRouter).remote(specs=[(_Fake, {"num_cpus": 0}, (i,)) for i in range(2)])
    replicas = ray.get(router.replica_handles.remote())
    assert ray.get([r.policy_version.remote() for r in replicas]) == [0, 0]
    ray.kill(router, no_restart=True)
    # Ray ends an owner's actors once it sees the owner gone (asynchronously): poll until it has.
    deadline = time.monotonic() + 60
    for r in replicas:
        while True:
            try:
                ray.get(r.policy_version.remote(), timeout=60)
            except ray.exceptions.RayActorError:
                break
            assert time.monotonic() < deadline, "a replica outlived its router by a minute"
            time.sleep(0.2)
