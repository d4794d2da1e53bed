"""The GPU-memory plan (``brushrl.plan.memory``, ``brushrl.plan.models``): architecture figures
against the hub's own counts, a real local checkpoint read from its files, the per-GPU table of the
shipped GPU configs, and the failures a bad placement must give (a second bf16 35B copy on a full
GPU, a vLLM share too small for its weights, a judge too big for its GPU)."""

from __future__ import annotations

from pathlib import Path

import pytest

from brushrl.cli import main
from brushrl.config import load_config
from brushrl.plan.lora import policy_lora
from brushrl.plan.memory import build_memory_plan, learner_lora, learner_memory
from brushrl.plan.models import SHIPPED, estimate_parameters, model_figures

ROOT = Path(__file__).resolve().parents[1]
#: configs/h200.yaml with one learner and one rollout engine: the shape the mechanism checks below
#: were written against (the shipped file has 4 learner workers and 2 engines).
ONE_LEARNER = {"learner.strategy": "single", "learner.workers": 1, "rollout.replicas": 1}


@pytest.mark.parametrize("model", sorted(SHIPPED))
def test_architecture_estimate_matches_the_hub_parameter_count(model):
    cfg = SHIPPED[model]
    assert estimate_parameters(cfg) == pytest.approx(cfg["num_parameters"], rel=0.02)


def test_shipped_figures():
    policy = model_figures("Qwen/Qwen3.5-35B-A3B")
    # 10 full-attention layers x 2 KV heads x head dim 256 x K and V x bf16
    assert policy.kv_bytes_per_token(2) == 10 * 2 * 256 * 2 * 2 == 20480
    assert policy.weight_bytes(2) == 2 * 35_950_000_000
    # the formula (the fallback without a config) adapts router, shared expert and vision tower too
    assert policy.lora_parameters(16) == 29_939_840
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
    # every GPU of the node placed: 4 learner workers (HPSv3 beside the first), 2 engines, 2 judges
    assert _gpus(plan) == {"h200:0": ["learner[0]", "hpsv3"], "h200:1": ["learner[1]"], "h200:2": ["learner[2]"],
                           "h200:3": ["learner[3]"], "h200:4": ["rollout[0]"], "h200:5": ["rollout[1]"],
                           "h200:6": ["judge[0]"], "h200:7": ["judge[1]"]}
    assert max(g.used_gib / g.total_gib for g in plan.gpus) <= cfg.resources.gpu_memory_warn
    est = {e.component: e for e in plan.estimates}
    assert est["rollout[0]"].used_gib == pytest.approx(0.9 * 143771 / 1024)  # vLLM takes its share
    assert est["rollout[0]"].derived_gib < est["rollout[0]"].reserved_gib
    hps = est["hpsv3"]
    assert hps.typed_gib == 25.2 and hps.derived_gib < 25.2 and hps.used_gib == 25.2  # typed raises it
    low = build_memory_plan(load_config(ROOT / "configs/h200.yaml", {"resources.learner.gpu_memory_gb": 10}))
    learner = next(e for e in low.estimates if e.component == "learner[0]")
    assert learner.used_gib == learner.derived_gib > 10  # ... and never lowers it


def test_second_bf16_35b_copy_on_a_full_gpu_fails_naming_it(capsys):
    """The rollout engine moved onto the learner's GPU (Ray's best fit puts a 0.25 share beside the
    learner's 0.75): its vLLM share of that GPU does not fit beside the learner's own 35B copy."""
    over = {**ONE_LEARNER, "resources.rollout.num_gpus": 0.25, "resources.hpsv3.num_gpus": 1}
    plan = build_memory_plan(load_config(ROOT / "configs/h200.yaml", over))
    (err,) = plan.errors
    assert err.startswith("GPU h200:0 (H200, 140.4 GiB) over-subscribed: rollout needs 126.4 GiB")
    assert "after learner 78.1 GiB: short by" in err and "weights 67.0" in err
    args = ["config", "check", str(ROOT / "configs/h200.yaml"), "--plan-only"]
    assert main([*args, *[a for k, v in over.items() for a in ("--set", f"{k}={v}")]]) == 1
    out = capsys.readouterr().out
    assert "over-subscribed: rollout needs 126.4 GiB" in out and "learner (0.75: 78.1)" in out


def test_vllm_share_below_its_weights_fails_with_the_fraction_it_needs():
    plan = build_memory_plan(load_config(ROOT / "configs/h200.yaml", {"rollout.gpu_memory_utilization": 0.4}))
    assert len(plan.errors) == 2  # one per rollout replica
    for i, err in enumerate(plan.errors):
        assert err.startswith(f"rollout[{i}]: vLLM would not start: its share 56.2 GiB") and "to >= 0.52" in err


def test_a_bf16_judge_does_not_fit_an_l40s_and_an_unknown_model_is_named():
    plan = build_memory_plan(load_config(ROOT / "configs/cluster.yaml",
                                         {"reward.judge.model": "Qwen/Qwen3-VL-30B-A3B-Instruct"}))
    assert sorted(e.split(":")[0] for e in plan.errors if "vLLM would not start" in e) == [
        f"judge[{i}]" for i in range(3)]
    assert sum("over-subscribed: judge[" in e for e in plan.errors) == 3  # ... nor fit the L40S
    # each alone on its GPU: the message says what the GPU holds, not what is "left after" nothing
    assert sum("but the GPU holds 45.0 GiB: short by" in e for e in plan.errors) == 3
    plan = build_memory_plan(load_config(ROOT / "configs/h200.yaml", {"policy.model": "/nowhere/model"}))
    assert any("resources.learner: no architecture figures for '/nowhere/model'" in e for e in plan.errors)


def test_a_cpu_config_has_no_gpu_plan():
    plan = build_memory_plan(load_config(ROOT / "configs/local.yaml"))
    assert plan.estimates == [] and plan.gpus == [] and plan.errors == []


def test_learner_memory_follows_the_deepspeed_strategy():
    """Per-worker learner memory: ZeRO-2 divides gradients and optimizer state by the workers,
    ZeRO-3 also the weights, offload takes the optimizer state off the GPU; activations stay."""
    base = load_config(ROOT / "configs/h200.yaml", ONE_LEARNER)
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
    lora = learner_lora(fig, base).params
    assert whole["grads"] + whole["optimizer"] == pytest.approx(14 * lora / 2**30)


def test_config_check_lists_every_learner_worker_with_its_shard():
    """4 ZeRO-3 learner workers on the h200 node: four learner rows, each a quarter of the weights."""
    cfg = load_config(ROOT / "configs/h200.yaml", {"learner.strategy": "deepspeed", "learner.workers": 4,
                                                   "learner.deepspeed.zero_stage": 3})
    plan = build_memory_plan(cfg)
    rows = [e for e in plan.estimates if e.component.startswith("learner")]
    assert [e.component for e in rows] == [f"learner[{r}]" for r in range(4)]
    single = [e for e in build_memory_plan(load_config(ROOT / "configs/h200.yaml", ONE_LEARNER)).estimates
              if e.component == "learner"][0]
    assert rows[0].parts["weights"] == pytest.approx(single.parts["weights"] / 4)
    assert rows[0].derived_gib < single.derived_gib
    # 8 workers take the whole node: the resource plan counts each worker and refuses
    from brushrl.plan.resources import build_plan

    crowded = load_config(ROOT / "configs/h200.yaml", {"learner.strategy": "deepspeed", "learner.workers": 8,
                                                       "learner.deepspeed.zero_stage": 3})
    assert any(e.startswith("resources.learner: does not fit on a h200 node: needs 8 x")
               for e in build_plan(crowded).errors), build_plan(crowded).errors


def _estimate(plan, component):
    return next(e for e in plan.estimates if e.component == component)


def test_a_gpu_over_the_refuse_fraction_is_refused(capsys):
    """The issue's 8x H100 plan: a learner worker alone (78.0 GiB) on an H100 of 79.6 is 0.98 of it, over
    resources.gpu_memory_refuse 0.95, although it fits the GPU's whole memory."""
    over = {"resources.nodes.h200.gpu_type": "H100", "resources.hpsv3.num_gpus": 1}
    plan = build_memory_plan(load_config(ROOT / "configs/h200.yaml", over))
    (err,) = [e for e in plan.errors if e.startswith("GPU h200:0 ")]
    assert err.startswith("GPU h200:0 (H100, 79.6 GiB) planned at 78.0 GiB (learner[0] 78.0) = 0.979 of its memory, "
                          "over resources.gpu_memory_refuse 0.95 (75.7 GiB)"), err
    assert main(["config", "check", str(ROOT / "configs/h200.yaml"), "--plan-only", "--set",
                 "resources.nodes.h200.gpu_type=H100", "--set", "resources.hpsv3.num_gpus=1", "--width", "400"]) == 1
    assert "over resources.gpu_memory_refuse 0.95" in capsys.readouterr().out


def test_the_warn_band_warns_and_both_fractions_are_config_fields(capsys):
    """The rollout engines' GPUs at 0.93 of their memory: above gpu_memory_warn 0.90, below
    gpu_memory_refuse 0.95, a warning each (--strict fails on it); the fractions move the band."""
    cfg = {"rollout.gpu_memory_utilization": 0.93}
    plan = build_memory_plan(load_config(ROOT / "configs/h200.yaml", cfg))
    assert plan.errors == []
    warn, _ = plan.warnings
    assert warn.startswith("GPU h200:4 (H200, 140.4 GiB) planned at 130.6 GiB (rollout[0] 130.6) = 0.930 of its "
                           "memory, over resources.gpu_memory_warn 0.9"), warn
    wider = load_config(ROOT / "configs/h200.yaml", {**cfg, "resources.gpu_memory_warn": 0.94})
    assert build_memory_plan(wider).warnings == []
    strict = build_memory_plan(load_config(ROOT / "configs/h200.yaml", {**cfg, "resources.gpu_memory_refuse": 0.92}))
    assert any(e.startswith("GPU h200:4 ") and "over resources.gpu_memory_refuse 0.92" in e for e in strict.errors)
    args = ["config", "check", str(ROOT / "configs/h200.yaml"), "--plan-only",
            "--set", "rollout.gpu_memory_utilization=0.93"]
    assert main(args) == 0 and main([*args, "--strict"]) == 1
    capsys.readouterr()
    assert main(["config", "check", str(ROOT / "configs/h200.yaml"), "--set", "resources.gpu_memory_warn=0.96"]) == 2
    assert "resources.gpu_memory_warn 0.96 > resources.gpu_memory_refuse 0.95" in capsys.readouterr().out


@pytest.mark.parametrize(("field", "component"), [("rollout.gpu_memory_utilization", "rollout[0]"),
                                                  ("reward.judge.serve.gpu_memory_utilization", "judge[0]")])
def test_a_vllm_utilization_over_the_refuse_fraction_is_refused_naming_the_field(field, component):
    plan = build_memory_plan(load_config(ROOT / "configs/h200.yaml", {field: 0.99}))
    assert any(e.startswith(f"{field}=0.99: {component}'s vLLM share alone is over resources.gpu_memory_refuse 0.95")
               for e in plan.errors), plan.errors
    assert not any(e.startswith(field) for e in build_memory_plan(
        load_config(ROOT / "configs/h200.yaml", {field: 0.95})).errors)


def test_the_rollout_engine_counts_its_lora_stacks():
    """vLLM preallocates max_loras (1) x rank x (in + out) per wrapped module in the model's dtype:
    the learner's count x 2 bytes for the bf16 policy."""
    plan = build_memory_plan(load_config(ROOT / "configs/h200.yaml"))
    lora = policy_lora("Qwen/Qwen3.5-35B-A3B", 16, "all-linear", False)
    assert lora.params == 16_250_880 and lora.source == "module tree"
    assert _estimate(plan, "rollout[0]").parts["lora buffers"] == pytest.approx(lora.params * 2 / 2**30)
    assert _estimate(plan, "judge[0]").parts["lora buffers"] == 0  # the judge serves no adapter
    assert "LoRA 16.3 M (module tree)" in _estimate(plan, "learner[0]").note


def test_lora_falls_back_to_the_formula_where_transformers_cannot_build_the_model(tmp_path):
    """A folder whose config.json names a model_type this transformers lacks: the architecture figures
    still come from the file, the LoRA count from the formula, and the plan says so (and warns that
    the formula has no routed experts when learner.lora.experts asks for them)."""
    import json

    config = {"model_type": "not-a-transformers-model", "hidden_size": 64, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 128,
              "vocab_size": 512, "max_position_embeddings": 1024, "torch_dtype": "bfloat16"}
    (tmp_path / "config.json").write_text(json.dumps(config))
    cfg = load_config(ROOT / "configs/h200.yaml", {"policy.model": str(tmp_path)})
    fig = model_figures(str(tmp_path))
    lora = learner_lora(fig, cfg)
    assert (lora.params, lora.source) == (fig.lora_parameters(16), "formula") and lora.params == 16 * 2 * (
        (64 + 64) + 2 * (64 + 32) + (64 + 64) + 2 * (64 + 128) + (128 + 64))  # q, k v, o, gate up, down per layer
    plan = build_memory_plan(cfg)
    assert "(formula)" in _estimate(plan, "learner[0]").note and not plan.warnings
    experts = build_memory_plan(load_config(ROOT / "configs/h200.yaml", {"policy.model": str(tmp_path),
                                                                         "learner.lora.experts": True}))
    assert any(w.startswith("learner.lora.experts: no config to build") for w in experts.warnings), experts.warnings


def test_experts_on_a_dense_policy_is_an_error_naming_the_field():
    cfg = load_config(ROOT / "configs/h200.yaml", {"policy.model": "Qwen/Qwen2-VL-7B-Instruct",
                                                   "learner.lora.experts": True})
    assert any(e.startswith("learner.lora.experts: the model has no routed experts")
               for e in build_memory_plan(cfg).errors)


@pytest.fixture(scope="module")
def twin_dirs(tmp_path_factory) -> dict[str, Path]:
    from brushrl.hub.twins import build_twin

    root = tmp_path_factory.mktemp("twins")
    return {m: build_twin(m, root / m.replace("/", "--"), seed=0) for m in sorted(SHIPPED) if not m.endswith("-FP8")}


@pytest.mark.parametrize(("model_id", "experts"), [("Qwen/Qwen3.5-35B-A3B", False), ("Qwen/Qwen3.5-35B-A3B", True),
                                                   ("Qwen/Qwen3-VL-30B-A3B-Instruct", False),
                                                   ("Qwen/Qwen3-VL-30B-A3B-Instruct", True),
                                                   ("Qwen/Qwen2-VL-7B-Instruct", False)])
def test_the_meta_tree_count_is_what_peft_trains_on_the_twin(twin_dirs, model_id, experts):
    """The plan's count, on the meta-device tree built from the twin's config.json, equals the
    trainable parameters of the real twin wrapped as GRPOLearner wraps it (lora_targets -> PEFT
    LoraConfig -> get_peft_model)."""
    from peft import LoraConfig as PeftLoraConfig
    from peft import get_peft_model
    from transformers import AutoConfig

    from brushrl.config import LoraConfig
    from brushrl.learner import moe
    from brushrl.policy.model import policy_class

    lc = LoraConfig(r=4, alpha=8, experts=experts)
    path = twin_dirs[model_id]
    model = policy_class(AutoConfig.from_pretrained(path)).from_pretrained(path)
    target_modules, target_parameters = moe.lora_targets(model, lc.target_modules, lc.experts)
    peft_model = get_peft_model(model, PeftLoraConfig(r=lc.r, lora_alpha=lc.alpha, lora_dropout=lc.dropout,
                                                      target_modules=target_modules,
                                                      target_parameters=target_parameters, task_type="CAUSAL_LM"))
    trainable, _ = peft_model.get_nb_trainable_parameters()
    counted = policy_lora(str(path), lc.r, lc.target_modules, lc.experts)
    assert counted.source == "module tree" and counted.params == trainable > 0


def test_rollout_replicas_each_get_a_gpu_in_the_plans():
    """``rollout.replicas: 3`` on the H200 node with one learner: three vLLM engines, one GPU each (GPUs
    1-3, placed before the judge servers, which move to 4 and 5); the resource plan counts 3 GPUs."""
    from brushrl.plan.resources import build_plan

    cfg = load_config(ROOT / "configs/h200.yaml", {**ONE_LEARNER, "rollout.replicas": 3})
    plan = build_memory_plan(cfg)
    assert plan.errors == [], plan.errors
    assert _gpus(plan) == {"h200:0": ["learner", "hpsv3"], "h200:1": ["rollout[0]"], "h200:2": ["rollout[1]"],
                           "h200:3": ["rollout[2]"], "h200:4": ["judge[0]"], "h200:5": ["judge[1]"]}
    row = next(a for a in build_plan(cfg).actors if a.actor == "rollout")
    assert (row.count, row.gpus * row.count) == (3, 3)
    # Six more replicas than GPUs are left: the resource plan refuses, naming the field.
    over = build_plan(load_config(ROOT / "configs/h200.yaml", {"rollout.replicas": 8}))
    assert any(e.startswith("resources.rollout: does not fit on a h200 node: needs 8 x GPU=1") for e in over.errors), \
        over.errors
