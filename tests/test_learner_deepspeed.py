"""The DeepSpeed learner: ZeRO-2/3 over a group of Ray learner workers vs the single learner, checkpoints
across ranks, a dying worker, the per-worker memory formula, token sharding, MoE leaves, config checks.

Real parts: a local Ray cluster, torch.distributed on gloo, DeepSpeed 0.19 ZeRO, TRL's GRPO loss, PEFT
LoRA and the tiny Qwen3 of ``test_learner``. Every group waits on Ray results (events), never on time.

Measured agreement of 2 workers with 1 (fp32, one step, 5 samples, 2 micro-batches per rank, the
second one padding-only on rank 1, lr 1e-3): loss |diff| 2.2e-8 for ZeRO-2 and ZeRO-3; grad norm
identical (ZeRO-2) or 1.2e-8 relative (ZeRO-3); LoRA weights max |diff| 8.0e-6 (ZeRO-2) and 1.6e-6
(ZeRO-3), in one element of a ``lora_B`` whose gradient is ~0: Adam's first step is ~lr * sign(g), so
float-order noise in a near-zero gradient moves that element by up to ~1% of lr; typical elements
differ by ~1e-7. Tolerances below leave headroom over these.
"""

from __future__ import annotations

import gc
import sys
import time
from types import SimpleNamespace

import pytest
import torch
from ray.util.placement_group import placement_group_table
from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

import test_learner
from brushrl.config import BrushRLConfig, ConfigError, LearnerConfig, parse_config
from brushrl.learner import make_learner_actor
from brushrl.learner.grpo import GRPOLearner
from brushrl.learner.memory import learner_memory_per_worker
from brushrl.learner.shard import micro_batch_sizes, shard_by_tokens
from brushrl.learner.moe import expert_lora_targets, lora_targets, moe_block_classes, set_leaf_modules
from brushrl.learner.zero_checkpoint import LEARNER_STATE, ZeroCheckpoint
from brushrl.ray_setup import start_local_ray
from test_learner import TrainSample, lora_and_base, random_ids, tiny_model, tiny_tokenizer

#: |loss(2 workers) - loss(1 worker)| after one step; also resumed vs uninterrupted. Measured 2.2e-8.
LOSS_TOL = 1e-6
#: max |LoRA weight difference| after one step, 2% of lr 1e-3, where Adam's first step is well
#: conditioned. Measured 8.0e-6 (ZeRO-2), 1.6e-6 (ZeRO-3) until 2026-12; then 2.5e-5 on one element of
#: ZeRO-2 (the same code at the landed commit, so the installed packages' reduction order): an element
#: whose gradient is ~eps. Adam's first update is lr g / (|g| + eps) (eps 1e-8), so where |g| is near eps
#: the update is unsaturated and a fp32 summation difference of a near-cancelling gradient moves it by a
#: large fraction (measured: single -2.09e-4, ZeRO-2 -1.85e-4, i.e. |g| ~ 0.2 eps). Such elements
#: (single-learner update below half of lr) are held to the same sign and ILL_TOL instead.
WEIGHT_TOL = 2e-5
ILL_TOL = 1e-4

LEARNER = {"lr": 1e-3, "warmup_steps": 0, "micro_batch_size": 2}


# ------------------------------------------------------------------------------ pure functions
def test_memory_matches_the_zero_paper_figure_1():
    """Rajbhandari et al. 2020, Figure 1: Psi = 7.5 B, N_d = 64, K = 12 (full fine-tuning, fp16)."""
    gb = 1e9
    kw = {"base_params": 0, "trainable_params": 7.5e9, "workers": 64, "dtype": "fp16"}
    assert learner_memory_per_worker(**kw, strategy="single").gpu / gb == pytest.approx(120)
    assert learner_memory_per_worker(**kw, strategy="deepspeed", zero_stage=1).gpu / gb == pytest.approx(31.4, abs=0.05)
    assert learner_memory_per_worker(**kw, strategy="deepspeed", zero_stage=2).gpu / gb == pytest.approx(16.6, abs=0.05)
    assert learner_memory_per_worker(**kw, strategy="deepspeed", zero_stage=3).gpu / gb == pytest.approx(1.9, abs=0.05)


def test_memory_of_a_lora_learner_and_offload():
    base, lora = 35e9, 30.4e6  # Qwen3.5-35B-A3B, LoRA r=16 all-linear (field notes)
    single = learner_memory_per_worker(base, lora)
    assert single.weights == 2 * (base + lora) and single.grads == 2 * lora and single.optimizer == 12 * lora
    z2 = learner_memory_per_worker(base, lora, strategy="deepspeed", zero_stage=2, workers=8)
    assert z2.weights == single.weights and z2.grads == single.grads / 8 and z2.optimizer == single.optimizer / 8
    z3 = learner_memory_per_worker(base, lora, strategy="deepspeed", zero_stage=3, workers=8, offload_optimizer=True)
    assert z3.weights == single.weights / 8 and z3.optimizer == 0 and z3.cpu == single.optimizer / 8
    z3p = learner_memory_per_worker(base, lora, strategy="deepspeed", zero_stage=3, workers=8, offload_params=True)
    assert z3p.weights == 0 and z3p.cpu == single.weights / 8 and z3p.gpu == z3p.grads + z3p.optimizer
    fp32 = learner_memory_per_worker(10, 4, dtype="fp32")
    assert (fp32.weights, fp32.grads, fp32.optimizer) == (56, 16, 32)
    with pytest.raises(ValueError, match="offload_params"):
        learner_memory_per_worker(base, lora, strategy="deepspeed", zero_stage=2, offload_params=True)


def test_token_shards_partition_the_batch_and_balance_it():
    tokens = [50, 10, 40, 30, 20, 5, 45]
    shards = shard_by_tokens(tokens, 2)
    assert sorted(i for s in shards for i in s) == list(range(7))
    assert [len(s) for s in shards] in ([4, 3], [3, 4])
    loads = [sum(tokens[i] for i in s) for s in shards]
    assert abs(loads[0] - loads[1]) <= max(tokens) // 2
    assert shard_by_tokens(tokens, 2) == shards  # every rank computes the same split
    assert shard_by_tokens([7], 3) == [[0], [], []]
    assert micro_batch_sizes(shard_by_tokens([7], 3), 2) == [1]  # ranks 1, 2: one padding row
    assert micro_batch_sizes([[0, 1, 2], [3, 4]], 2) == [2, 1]  # rank 1: a padding-only micro-batch
    assert micro_batch_sizes([[0, 1, 2], [3, 4]], 8) == [3]  # rank 1: 2 samples + 1 padding row


@pytest.mark.parametrize("learner, message", [
    ({"workers": 2}, "learner.workers: 2 workers need learner.strategy 'deepspeed'"),
    ({"strategy": "deepspeed", "deepspeed": {"zero_stage": 3}}, "learner.deepspeed.zero_stage: 3 shards"),
    ({"strategy": "deepspeed", "workers": 2, "deepspeed": {"offload_params": True}},
     "learner.deepspeed.offload_params: needs zero_stage 3"),
])
def test_config_refuses_impossible_strategies(learner, message):
    with pytest.raises(ConfigError, match=message):
        parse_config({"learner": learner})


def test_config_refuses_more_workers_than_gpus():
    node = {"cpus": 32, "gpus": 4, "memory_gb": 500, "count": 2}
    placement = {"node": "gpu", "num_gpus": 1}
    data = {"learner": {"strategy": "deepspeed", "workers": 9},
            "resources": {"nodes": {"gpu": node}, **{a: {"node": "gpu"} for a in ("rollout", "scorer", "hpsv3", "judge", "renderer")},
                          "learner": placement}}
    with pytest.raises(ConfigError, match=r"learner.workers: 9 workers x 1.0 GPU need 9 GPUs; node kind 'gpu' has 8"):
        parse_config(data)
    data["learner"]["workers"] = 8
    assert parse_config(data).learner.workers == 8


def test_resume_with_another_worker_count_is_refused_before_loading(tmp_path):
    torch.save({"strategy": "deepspeed", "zero_stage": 2, "workers": 2, "policy_version": 3}, tmp_path / LEARNER_STATE)
    learner = SimpleNamespace(engine=None, cfg=LearnerConfig(), world_size=3, rank=0)
    with pytest.raises(ValueError, match="written by 2 learner workers with ZeRO-2; this learner has 3 with "
                                         "ZeRO-2: resume with learner.workers 2"):
        ZeroCheckpoint(learner).load(tmp_path)


# ---------------------------------------------------------------------------- mixture of experts
def tiny_moe() -> Qwen3MoeForCausalLM:
    torch.manual_seed(0)
    return Qwen3MoeForCausalLM(Qwen3MoeConfig(
        vocab_size=test_learner.VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, intermediate_size=64, moe_intermediate_size=16, num_experts=4,
        num_experts_per_tok=2, eos_token_id=test_learner.EOS, pad_token_id=test_learner.PAD))


def test_moe_blocks_are_zero3_leaves_and_expert_lora_is_a_switch():
    model = tiny_moe()
    assert [c.__name__ for c in moe_block_classes(model)] == ["Qwen3MoeSparseMoeBlock"]
    assert set_leaf_modules(model, None) == ["Qwen3MoeSparseMoeBlock"]
    blocks = [m for m in model.modules() if type(m).__name__ == "Qwen3MoeSparseMoeBlock"]
    assert len(blocks) == 2 and all(getattr(m, "_z3_leaf", False) for m in blocks)
    with pytest.raises(ValueError, match="learner.deepspeed.leaf_modules"):
        set_leaf_modules(tiny_moe(), ["MixtralSparseMoeBlock"])
    assert expert_lora_targets(model) == [f"model.layers.{i}.mlp.experts.{w}" for i in (0, 1)
                                          for w in ("gate_up_proj", "down_proj")]
    with pytest.raises(ValueError, match="learner.lora.experts"):
        expert_lora_targets(tiny_model())
    assert lora_targets(tiny_model(), "all-linear", False) == ("all-linear", None)  # dense: as configured

    counts = {}
    for experts in (False, True):
        cfg = LearnerConfig(lr=1e-3, warmup_steps=0, lora={"r": 4, "alpha": 8, "experts": experts})
        learner = GRPOLearner(tiny_moe(), tiny_tokenizer(), cfg, total_steps=2)
        counts[experts] = learner.trainable_params
        names = [n for n, p in learner.model.named_parameters() if p.requires_grad]
        assert any(".experts." in n for n in names) == experts  # PEFT's own all-linear would add them
        assert not any(".mlp.gate." in n for n in names) and any("self_attn.q_proj.lora_A" in n for n in names)
    assert counts[True] > counts[False]
    group = test_learner.make_group(learner, [1.0, 0.0, 0.5, 0.2])
    assert learner.step([group])["skipped"] == 0  # a step trains the expert LoRA too


# ------------------------------------------------------------------------------ the Ray group
def _loader(policy_cfg):
    """The policy every learner here starts from (pickled by value into the workers)."""
    return tiny_model(seed=3), tiny_tokenizer()


@pytest.fixture(scope="module")
def ray_cluster():
    import ray
    import ray.cloudpickle

    for module in (sys.modules[__name__], test_learner):
        ray.cloudpickle.register_pickle_by_value(module)
    start_local_ray(num_cpus=4)
    yield ray
    ray.shutdown()
    for module in (sys.modules[__name__], test_learner):
        ray.cloudpickle.unregister_pickle_by_value(module)


def _batches():
    """Two steps' groups: 3 + 2 samples of different lengths (rank 1's second micro-batch is padding),
    behaviour log-probs from the initial policy."""
    ref = GRPOLearner(tiny_model(seed=3), tiny_tokenizer(), LearnerConfig(**LEARNER), total_steps=10)
    out = []
    for seed in (1, 2):
        gen = torch.Generator().manual_seed(seed)
        step = []
        for rewards, lengths in (([1.0, 0.0, 0.4], (20, 31, 12)), ([0.2, 0.9], (25, 9))):
            prompt = random_ids(gen, 6)
            step.append([TrainSample(prompt, c, ref.completion_logprobs(prompt, c), r, 0)
                         for c, r in zip((random_ids(gen, n) for n in lengths), rewards)])
        out.append(step)
    return out


@pytest.fixture(scope="module")
def reference():
    """The single learner's first step on batch 1: (batches, initial LoRA, metrics, LoRA after)."""
    batches = _batches()
    learner = GRPOLearner(tiny_model(seed=3), tiny_tokenizer(), LearnerConfig(**LEARNER), total_steps=10)
    before = lora_and_base(learner.model)[0]
    metrics = learner.step(batches[0])
    return batches, before, metrics, lora_and_base(learner.model)[0]


def _group(ray, stage: int, workers: int = 2):
    cfg = BrushRLConfig.model_validate({
        "learner": {**LEARNER, "strategy": "deepspeed", "workers": workers, "deepspeed": {"zero_stage": stage}},
        "rollout": {"group_size": 4}})
    return make_learner_actor(cfg, total_steps=10, policy_loader=_loader)


def _lora(ray, group) -> dict:
    """The group's adapter keyed like ``named_parameters`` of the single learner's PEFT model."""
    return ray.get(group.adapter_state.remote())


def _compare(state: dict, lora: dict) -> float:
    """max |difference| between an adapter state (PEFT keys) and a learner's LoRA parameters."""
    by_key = {k.replace(".default", ""): v for k, v in lora.items()}
    assert set(by_key) == set(state), (sorted(by_key)[:3], sorted(state)[:3])
    return max(float((state[k] - by_key[k]).abs().max()) for k in state)


def _compare_step(state: dict, after: dict, before: dict, lr: float) -> tuple[float, float]:
    """max |difference| between an adapter state and the single learner's weights after one step,
    over the well-conditioned elements (single update >= lr / 2) and over the rest, whose updates
    must also have the single learner's sign (``WEIGHT_TOL``'s comment)."""
    after = {k.replace(".default", ""): v for k, v in after.items()}
    before = {k.replace(".default", ""): v for k, v in before.items()}
    assert set(after) == set(state)
    well = ill = 0.0
    for k in state:
        single, mine = after[k] - before[k], state[k] - before[k]
        diff, ok = (mine - single).abs(), single.abs() >= lr / 2
        well = max(well, float(diff[ok].max()) if ok.any() else 0.0)
        if (~ok).any():
            assert bool((torch.sign(mine[~ok]) == torch.sign(single[~ok])).all()), k
            ill = max(ill, float(diff[~ok].max()))
    return well, ill


@pytest.mark.parametrize("stage", [2, 3])
def test_two_workers_take_the_single_learners_step(ray_cluster, reference, stage, tmp_path):
    """Same batch, same seed: ZeRO over 2 gloo workers gives the single learner's loss and update.
    With ZeRO-3 the run then checkpoints, and a fresh group resumes to the uninterrupted loss."""
    ray = ray_cluster
    batches, before, single, after = reference
    group = _group(ray, stage)
    info = ray.get(group.describe.remote())
    assert f"ZeRO-{stage} x 2 workers (gloo)" in info["strategy"] and info["trainable_params"] > 0
    assert _compare(_lora(ray, group), before) == 0.0  # same LoRA init on every rank
    metrics = ray.get(group.step.remote(batches[0]))
    print(f"ZeRO-{stage}: loss {metrics['loss']!r} vs {single['loss']!r}, grad_norm {metrics['grad_norm']!r} vs "
          f"{single['grad_norm']!r}, LoRA max diff {_compare(_lora(ray, group), after):.3g}, step_s "
          f"{metrics['step_s']:.2f} vs {single['step_s']:.2f}")
    assert metrics["n_samples"] == single["n_samples"] == 5 and metrics["policy_version"] == 1
    assert metrics["loss"] == pytest.approx(single["loss"], abs=LOSS_TOL)
    assert metrics["grad_norm"] == pytest.approx(single["grad_norm"], rel=1e-5)
    well, ill = _compare_step(_lora(ray, group), after, before, LEARNER["lr"])
    assert well <= WEIGHT_TOL and ill <= ILL_TOL, (well, ill)
    if stage != 3:
        ray.kill(group)
        del group  # its placement group goes with the handle (brushrl.learner.group.make_learner_group)
        gc.collect()
        deadline = time.monotonic() + 120
        while any(v["state"] != "REMOVED" for v in placement_group_table().values()):
            assert time.monotonic() < deadline, placement_group_table()
            time.sleep(0.2)
        return

    ckpt = tmp_path / "step_0001"
    ray.get(group.save_state.remote(str(ckpt)))
    names = {p.name for p in ckpt.rglob("*") if p.is_file()}
    assert {"adapter_model.safetensors", LEARNER_STATE, "rng_rank000.pt", "rng_rank001.pt",
            "zero_pp_rank_0_mp_rank_00_optim_states.pt", "zero_pp_rank_1_mp_rank_00_optim_states.pt"} <= names
    uninterrupted = ray.get(group.step.remote(batches[1]))
    ray.kill(group)

    resumed_group = _group(ray, stage)
    assert ray.get(resumed_group.load_state.remote(str(ckpt))) == 1
    resumed = ray.get(resumed_group.step.remote(batches[1]))
    print(f"ZeRO-3 resumed: loss {resumed['loss']!r} vs uninterrupted {uninterrupted['loss']!r}")
    assert resumed["policy_version"] == uninterrupted["policy_version"] == 2
    assert resumed["loss"] == pytest.approx(uninterrupted["loss"], abs=LOSS_TOL)
    assert resumed["lr"] == uninterrupted["lr"]

    # A worker that dies fails the next call with its rank named, and the group stays failed.
    workers = ray.get(resumed_group.workers.remote())
    ray.kill(workers[1], no_restart=True)
    with pytest.raises(ray.exceptions.RayTaskError, match=r"learner worker rank 1 on [\d.]+ pid \d+ of 2 failed in step"):
        ray.get(resumed_group.step.remote(batches[1]))
    with pytest.raises(ray.exceptions.RayTaskError, match="rank 1"):
        ray.get(resumed_group.policy_version.remote())
    ray.kill(resumed_group)
