"""The GPU-memory plan (``brushrl.plan.memory``, ``brushrl.plan.models``): architecture figures
against the hub's own counts, a real local checkpoint read from its files, the per-GPU table of the
shipped GPU configs, and the failures a bad placement must give (a second bf16 35B copy on a full
GPU, a vLLM share too small for its weights, a judge too big for its GPU)."""

from __future__ import annotations

from pathlib import Path

import pytest

from brushrl.cli import main
from brushrl.config import load_config
from brushrl.plan.memory import build_memory_plan, learner_memory
from brushrl.plan.models import SHIPPED, estimate_parameters, model_figures

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("model", sorted(SHIPPED))
def test_architecture_estimate_matches_the_hub_parameter_count(model):
    cfg = SHIPPED[model]
    assert estimate_parameters(cfg) == pytest.approx(cfg["num_parameters"], rel=0.02)


def test_shipped_figures():
    policy = model_figures("Qwen/Qwen3.5-35B-A3B")
    # 10 full-attention layers x 2 KV heads x head dim 256 x K and V x bf16
    assert policy.kv_bytes_per_token(2) == 10 * 2 * 256 * 2 * 2 == 20480
    assert policy.weight_bytes(2) == 2 * 35_950_000_000
    assert 28e6 < policy.lora_parameters(16) < 32e6  # the HF reproduction: ~30.4 M trainable at r 16
    judge = model_figures("Qwen/Qwen3-VL-30B-A3B-Instruct")
    assert judge.kv_bytes_per_token(2) == 48 * 4 * 128 * 2 * 2
    fp8 = model_figures("Qwen/Qwen3-VL-30B-A3B-Instruct-FP8")
    assert fp8.weight_bytes(2) < 0.55 * judge.weight_bytes(2)  # FP8 linears, bf16 embeddings and vision


def test_a_local_checkpoint_is_read_from_its_own_files(tmp_path):
    """A model folder saved by transformers: config.json for the architecture, the safetensors
    headers for the exact parameter count, which the architecture estimate also gets (norms aside)."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    config = Qwen3Config(vocab_size=512, hidden_size=64, intermediate_size=176, num_hidden_layers=3,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=1024,
                         tie_word_embeddings=False)
    model = Qwen3ForCausalLM(config)
    model.save_pretrained(tmp_path)
    fig = model_figures(str(tmp_path))
    assert fig.parameters_source == "safetensors" and fig.num_parameters == model.num_parameters()
    assert estimate_parameters(config.to_dict()) == pytest.approx(model.num_parameters(), rel=0.01)
    assert fig.kv_bytes_per_token(4) == 2 * 3 * 2 * 16 * 4 and fig.max_position_embeddings == 1024


def _gpus(plan):
    return {g.label: [u.component for u in g.uses] for g in plan.gpus if g.uses}


def test_h200_table_and_typed_figures():
    cfg = load_config(ROOT / "configs/h200.yaml")
    plan = build_memory_plan(cfg)
    assert plan.errors == [] and plan.warnings == []
    assert _gpus(plan) == {"h200:0": ["learner", "hpsv3"], "h200:1": ["rollout"], "h200:2": ["judge[0]"],
                           "h200:3": ["judge[1]"]}
    est = {e.component: e for e in plan.estimates}
    assert est["rollout"].used_gib == pytest.approx(0.9 * 143771 / 1024)  # vLLM takes its share
    assert est["rollout"].derived_gib < est["rollout"].reserved_gib
    hps = est["hpsv3"]
    assert hps.typed_gib == 25.2 and hps.derived_gib < 25.2 and hps.used_gib == 25.2  # typed raises it
    low = build_memory_plan(load_config(ROOT / "configs/h200.yaml", {"resources.learner.gpu_memory_gb": 10}))
    learner = next(e for e in low.estimates if e.component == "learner")
    assert learner.used_gib == learner.derived_gib > 10  # ... and never lowers it


def test_second_bf16_35b_copy_on_a_full_gpu_fails_naming_it(capsys):
    """The rollout engine moved onto the learner's GPU (Ray's best fit puts a 0.25 share beside the
    learner's 0.75): its vLLM share of that GPU does not fit beside the learner's own 35B copy."""
    over = {"resources.rollout.num_gpus": 0.25, "resources.hpsv3.num_gpus": 1}
    plan = build_memory_plan(load_config(ROOT / "configs/h200.yaml", over))
    (err,) = plan.errors
    assert err.startswith("GPU h200:0 (H200, 140.4 GiB) over-subscribed: rollout needs 126.4 GiB")
    assert "after learner 78.3 GiB: short by" in err and "weights 67.0" in err
    args = ["config", "check", str(ROOT / "configs/h200.yaml"), "--plan-only"]
    assert main([*args, *[a for k, v in over.items() for a in ("--set", f"{k}={v}")]]) == 1
    out = capsys.readouterr().out
    assert "over-subscribed: rollout needs 126.4 GiB" in out and "learner (0.75: 78.3)" in out


def test_vllm_share_below_its_weights_fails_with_the_fraction_it_needs():
    plan = build_memory_plan(load_config(ROOT / "configs/h200.yaml", {"rollout.gpu_memory_utilization": 0.4}))
    (err,) = plan.errors
    assert err.startswith("rollout: vLLM would not start: its share 56.2 GiB") and "to >= 0.55" in err


def test_a_bf16_judge_does_not_fit_an_l40s_and_an_unknown_model_is_named():
    plan = build_memory_plan(load_config(ROOT / "configs/cluster.yaml",
                                         {"reward.judge.model": "Qwen/Qwen3-VL-30B-A3B-Instruct"}))
    assert sorted(e.split(":")[0] for e in plan.errors if "vLLM would not start" in e) == [
        f"judge[{i}]" for i in range(3)]
    assert sum("over-subscribed: judge[" in e for e in plan.errors) == 3  # ... nor fit the L40S
    plan = build_memory_plan(load_config(ROOT / "configs/h200.yaml", {"policy.model": "/nowhere/model"}))
    assert any("resources.learner: no architecture figures for '/nowhere/model'" in e for e in plan.errors)


def test_a_cpu_config_has_no_gpu_plan():
    plan = build_memory_plan(load_config(ROOT / "configs/local.yaml"))
    assert plan.estimates == [] and plan.gpus == [] and plan.errors == []


def test_learner_memory_follows_the_deepspeed_strategy():
    """Per-worker learner memory: ZeRO-2 divides gradients and optimizer state by the workers,
    ZeRO-3 also the weights, offload takes the optimizer state off the GPU; activations stay."""
    base = load_config(ROOT / "configs/h200.yaml")
    fig = model_figures(base.policy.model)
    whole = learner_memory(fig, base)

    def with_ds(stage, **ds):
        cfg = load_config(ROOT / "configs/h200.yaml", {"learner.strategy": "deepspeed", "learner.workers": 4,
                                                       "learner.deepspeed": {"zero_stage": stage, **ds}})
        return learner_memory(fig, cfg)

    z2, z3, off = with_ds(2), with_ds(3), with_ds(3, offload_optimizer=True)
    assert z2["weights"] == pytest.approx(whole["weights"])
    assert z2["grads"] == pytest.approx(whole["grads"] / 4) and z2["optimizer"] == pytest.approx(whole["optimizer"] / 4)
    assert z3["weights"] == pytest.approx(whole["weights"] / 4) and z3["activations"] == whole["activations"]
    assert off["optimizer"] == 0 and off["weights"] == z3["weights"]
    # LoRA state: 16 bytes a trainable parameter in all (2 weight + 2 grad + 12 Adam), as PEFT's fp32 adapter
    lora = fig.lora_parameters(base.learner.lora.r)
    assert whole["grads"] + whole["optimizer"] == pytest.approx(14 * lora / 2**30)


def test_config_check_lists_every_learner_worker_with_its_shard():
    """4 ZeRO-3 learner workers on the h200 node: four learner rows, each a quarter of the weights."""
    cfg = load_config(ROOT / "configs/h200.yaml", {"learner.strategy": "deepspeed", "learner.workers": 4,
                                                   "learner.deepspeed.zero_stage": 3})
    plan = build_memory_plan(cfg)
    rows = [e for e in plan.estimates if e.component.startswith("learner")]
    assert [e.component for e in rows] == [f"learner[{r}]" for r in range(4)]
    single = [e for e in build_memory_plan(load_config(ROOT / "configs/h200.yaml")).estimates
              if e.component == "learner"][0]
    assert rows[0].parts["weights"] == pytest.approx(single.parts["weights"] / 4)
    assert rows[0].derived_gib < single.derived_gib
    # 8 workers take the whole node: the resource plan counts each worker and refuses
    from brushrl.plan.resources import build_plan

    crowded = load_config(ROOT / "configs/h200.yaml", {"learner.strategy": "deepspeed", "learner.workers": 8,
                                                       "learner.deepspeed.zero_stage": 3})
    assert any(e.startswith("resources.learner: does not fit on a h200 node: needs 8 x")
               for e in build_plan(crowded).errors), build_plan(crowded).errors
