"""A model's architecture figures, for the GPU-memory plan (``brushrl.plan.memory``).

:class:`ModelFigures` is read from a Hugging Face ``config.json``: a local model folder's own, or,
for the hub ids our configs name, the real one shipped in ``brushrl/hub/configs/`` (sources in its
README), so ``brushrl config check`` works offline. Parameter counts come, in this order, from the
folder's safetensors headers (exact), the count the hub reports for a shipped id
(:data:`HUB_PARAMETERS`), or :func:`estimate_parameters` from the architecture.

Shipped models (``SHIPPED``: the shipped ``config.json`` + the hub's parameter count), in brief:

* ``Qwen/Qwen3.5-35B-A3B`` (``Qwen3_5MoeForConditionalGeneration``): 40 layers in the pattern
  3 x Gated DeltaNet (linear attention) + 1 x gated full attention; full attention 16 Q / 2 KV
  heads of 256; linear attention 16 key / 32 value heads of 128, conv kernel 4; 256 routed experts
  (top 8) of 512 + a shared expert of 512; hidden 2048; vocab 248320, untied; one MTP layer;
  vision tower depth 27, hidden 1152; 35.95 B parameters (hub ``config.json``/safetensors, as
  summarised in the Qwen3.5 model card and THUDM/slime ``scripts/models/qwen3.5-35B-A3B.sh``).
* ``Qwen/Qwen3-VL-30B-A3B-Instruct`` (``Qwen3VLMoeForConditionalGeneration``): 48 layers, 32 Q /
  4 KV heads of 128, 128 experts (top 8) of 768, hidden 2048, vocab 151936, untied; vision depth 27,
  hidden 1152, 3 deepstack mergers; 31.07 B parameters (hub); slime ``qwen3-vl-30b-a3b.sh``.
  The ``-FP8`` checkpoint has the same architecture with FP8 linear weights (vision, embeddings
  and LM head stay bf16).
* ``Qwen/Qwen2-VL-7B-Instruct`` (HPSv3's base, MizzenAI/HPSv3 ``HPSv3_7B.yaml``): 28 layers, 28 Q /
  4 KV heads of 128, MLP 18944, hidden 3584, vocab 152064; vision depth 32, embed 1280; 8.29 B
  parameters (hub), i.e. the 16.6 GB of bf16 weights the HF reproduction reports for HPSv3.

``tests/test_memory_plan.py`` checks :func:`estimate_parameters` against those three hub counts (within 2%).
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path

from brushrl.hub.shipped import DTYPE_BYTES, HUB_PARAMETERS, SHIPPED  # in hub: the weights CLI reads them too

#: Safetensors header dtype -> bytes (https://github.com/huggingface/safetensors, format spec).
_ST_BYTES = {"F64": 8, "I64": 8, "F32": 4, "I32": 4, "BF16": 2, "F16": 2, "I16": 2, "F8_E4M3": 1, "F8_E5M2": 1,
             "I8": 1, "U8": 1, "BOOL": 1}

@dataclass(frozen=True)
class Linear:
    """``count`` linear layers of ``fan_in`` -> ``fan_out`` (a LoRA of rank r adds ``r * (in + out)``)."""

    fan_in: int
    fan_out: int
    count: int


@dataclass(frozen=True)
class ModelFigures:
    """What the memory plan needs of one model. Sizes are element counts; bytes follow from a dtype.

    Attributes:
        name: the model id or path the figures are for.
        num_parameters: every weight (text, vision, MTP), elements.
        parameters_source: ``safetensors`` (counted), ``hub`` (shipped count) or ``estimate``.
        dtype: the checkpoint's dtype (``torch_dtype``).
        hidden_size, num_layers, vocab_size, max_position_embeddings: the text model's.
        attention_layers: layers with a KV cache (full attention).
        num_kv_heads, head_dim: of those layers.
        linear_state_per_seq: elements of recurrent state one sequence holds over all linear-attention
            layers (Gated DeltaNet: value heads x key dim x value dim, plus the conv state).
        widest_layer: the widest per-token activation of one layer (elements), for activation peaks.
        fp8_linear_parameters: parameters stored as FP8 in the checkpoint (an ``-FP8`` release).
        lora_linears: the ``nn.Linear`` layers of PEFT's ``all-linear`` by formula, router, shared
            expert and vision tower included (29.9 M at r 16 for Qwen3.5-35B-A3B). Only the memory
            plan's fallback where no config can be built: the learner's own rule keeps those frozen
            and is counted on the module tree (``brushrl.plan.lora``: 16.3 M).
    """

    name: str
    num_parameters: int
    parameters_source: str
    dtype: str
    hidden_size: int
    num_layers: int
    vocab_size: int
    max_position_embeddings: int
    attention_layers: int
    num_kv_heads: int
    head_dim: int
    linear_state_per_seq: int = 0
    widest_layer: int = 0
    fp8_linear_parameters: int = 0
    lora_linears: tuple[Linear, ...] = field(default_factory=tuple)

    def kv_bytes_per_token(self, dtype_bytes: int) -> int:
        """KV cache bytes one token takes: K and V (2) x attention layers x KV heads x head dim x bytes
        (vLLM's full-attention ``KVCacheSpec.page_size_bytes`` divided by its block size)."""
        return 2 * self.attention_layers * self.num_kv_heads * self.head_dim * dtype_bytes

    def weight_bytes(self, dtype_bytes: int) -> int:
        """Weights in memory: ``num_parameters x dtype_bytes``, the FP8 part at 1 byte (NVIDIA NIM
        memory guide: weights per GPU = parameters x bytes per parameter / TP)."""
        fp8 = min(self.fp8_linear_parameters, self.num_parameters)
        return (self.num_parameters - fp8) * dtype_bytes + fp8

    def lora_parameters(self, rank: int) -> int:
        """Trainable parameters of a rank-``rank`` LoRA on :attr:`lora_linears` (the formula fallback;
        ``brushrl.plan.lora`` counts what the learner trains)."""
        return sum(rank * (lin.fan_in + lin.fan_out) * lin.count for lin in self.lora_linears)


def _text(cfg: dict) -> dict:
    return cfg.get("text_config") or cfg.get("llm_config") or cfg


def _layers(text: dict) -> tuple[int, int]:
    """(full-attention layers, linear-attention layers) of a text config."""
    n = int(text["num_hidden_layers"])
    types = text.get("layer_types")
    if not types:
        return n, 0
    linear = sum(1 for t in types[:n] if t == "linear_attention")
    return n - linear, linear


def _mlp_linears(text: dict, layers: int) -> tuple[list[Linear], int, int]:
    """(LoRA-able linears, all MLP parameters, widest activation) of ``layers`` MLP/MoE blocks."""
    h = int(text["hidden_size"])
    experts = int(text.get("num_experts") or text.get("n_routed_experts") or 0)
    if not experts:
        inter = int(text["intermediate_size"])
        return ([Linear(h, inter, 2 * layers), Linear(inter, h, layers)], 3 * h * inter * layers, 3 * inter)
    moe = int(text["moe_intermediate_size"])
    top_k = int(text.get("num_experts_per_tok", 1))
    shared = int(text.get("shared_expert_intermediate_size") or 0)
    params = layers * (experts * 3 * h * moe + h * experts + 3 * h * shared + (h if shared else 0))
    lins = [Linear(h, experts, layers)]  # the router
    if shared:
        lins += [Linear(h, shared, 2 * layers), Linear(shared, h, layers), Linear(h, 1, layers)]
    return lins, params, 3 * moe * top_k + 3 * shared


def _attention(text: dict, layers: int) -> tuple[list[Linear], int]:
    h = int(text["hidden_size"])
    heads = int(text["num_attention_heads"])
    kv = int(text.get("num_key_value_heads") or heads)
    hd = int(text.get("head_dim") or h // heads)
    q_out = heads * hd * (2 if text.get("attn_output_gate") else 1)
    lins = [Linear(h, q_out, layers), Linear(h, kv * hd, 2 * layers), Linear(heads * hd, h, layers)]
    return lins, sum(lin.fan_in * lin.fan_out * lin.count for lin in lins)


def _linear_attention(text: dict, layers: int) -> tuple[list[Linear], int, int]:
    """Gated DeltaNet layers (Qwen3-Next / Qwen3.5): (linears, parameters, state elements per sequence)."""
    if not layers:
        return [], 0, 0
    h = int(text["hidden_size"])
    kh, vh = int(text["linear_num_key_heads"]), int(text["linear_num_value_heads"])
    kd, vd = int(text["linear_key_head_dim"]), int(text["linear_value_head_dim"])
    kernel = int(text.get("linear_conv_kernel_dim", 4))
    conv_dim = 2 * kh * kd + vh * vd
    lins = [Linear(h, 2 * kh * kd + 2 * vh * vd, layers), Linear(h, 2 * vh, layers), Linear(vh * vd, h, layers)]
    params = sum(lin.fan_in * lin.fan_out * lin.count for lin in lins) + layers * (conv_dim * kernel + 2 * vh)
    state = layers * (vh * kd * vd + conv_dim * (kernel - 1))
    return lins, params, state


def _vision(vcfg: dict | None) -> tuple[list[Linear], int]:
    """Vision tower linears and parameters (Qwen2-VL / Qwen3-VL / SigLIP-style blocks + patch merger)."""
    if not vcfg:
        return [], 0
    d = int(vcfg.get("embed_dim") or vcfg["hidden_size"])
    inter = int(vcfg.get("intermediate_size") or d * int(vcfg.get("mlp_ratio", 4)))
    depth = int(vcfg.get("depth") or vcfg.get("num_hidden_layers"))
    out = int(vcfg.get("out_hidden_size") or vcfg.get("hidden_size") or d)
    if out == d and "out_hidden_size" not in vcfg and vcfg.get("embed_dim"):
        out = int(vcfg["hidden_size"])
    merge = int(vcfg.get("spatial_merge_size", 1)) ** 2
    patch = int(vcfg.get("patch_size", 14))
    lins = [Linear(d, 3 * d, depth), Linear(d, d, depth), Linear(d, inter, depth), Linear(inter, d, depth)]
    mergers = 1 + len(vcfg.get("deepstack_visual_indexes") or [])
    lins += [Linear(d * merge, d * merge, mergers), Linear(d * merge, out, mergers)]
    embed = int(vcfg.get("in_channels", 3)) * int(vcfg.get("temporal_patch_size", 1)) * patch * patch * d
    return lins, sum(lin.fan_in * lin.fan_out * lin.count for lin in lins) + embed


def estimate_parameters(cfg: dict) -> int:
    """Parameters of a model from its ``config.json`` mapping: embeddings (+ an untied LM head),
    attention / Gated DeltaNet / MLP or MoE blocks, MTP layers and the vision tower; norms and biases
    are left out (well under 0.1%)."""
    return _figures(cfg)[0]


def _figures(cfg: dict) -> tuple[int, dict]:
    text = _text(cfg)
    h, vocab = int(text["hidden_size"]), int(text["vocab_size"])
    full, linear = _layers(text)
    mtp = int(text.get("mtp_num_hidden_layers") or 0)
    att, att_p = _attention(text, full + mtp)
    lin, lin_p, state = _linear_attention(text, linear)
    mlp, mlp_p, mlp_width = _mlp_linears(text, full + linear + mtp)
    vis, vis_p = _vision(cfg.get("vision_config"))
    tied = text.get("tie_word_embeddings", cfg.get("tie_word_embeddings", False))
    embed = vocab * h * (1 if tied else 2)
    params = embed + att_p + lin_p + mlp_p + vis_p + mtp * 2 * h * h
    heads = int(text["num_attention_heads"])
    hd = int(text.get("head_dim") or h // heads)
    widest = max(mlp_width, heads * hd * 3, 4 * h)
    # the text model's lora targets scale with the real layer count only (MTP is not loaded by transformers)
    att_l, _ = _attention(text, full)
    mlp_l, _, _ = _mlp_linears(text, full + linear)
    extra = {"state": state, "widest": widest, "lora": tuple(att_l + lin + mlp_l + vis), "embed": embed,
             "vision": vis_p, "full": full}
    return params, extra


def safetensors_parameters(folder: Path) -> int | None:
    """Elements stored in ``folder/*.safetensors`` (from their JSON headers only, no tensor read);
    None when there is none. See the safetensors format: 8-byte little-endian header length, then
    a JSON map tensor name -> {dtype, shape, data_offsets}."""
    files = sorted(Path(folder).glob("*.safetensors"))
    if not files:
        return None
    total = 0
    for path in files:
        with open(path, "rb") as fh:
            (n,) = struct.unpack("<Q", fh.read(8))
            header = json.loads(fh.read(n))
        for name, info in header.items():
            if name == "__metadata__":
                continue
            count = 1
            for dim in info["shape"]:
                count *= int(dim)
            total += count
    return total


def figures_from_config(name: str, cfg: dict, num_parameters: int | None = None,
                        source: str = "estimate") -> ModelFigures:
    """:class:`ModelFigures` from a ``config.json`` mapping; ``num_parameters`` None: estimated.

    Raises:
        KeyError: a field the text model needs is missing (``hidden_size``, ``num_hidden_layers``...).
    """
    estimate, extra = _figures(cfg)
    text = _text(cfg)
    heads = int(text["num_attention_heads"])
    dtype = str(cfg.get("torch_dtype") or cfg.get("dtype") or text.get("torch_dtype") or "bfloat16")
    params = num_parameters if num_parameters is not None else estimate
    fp8 = 0
    if cfg.get("fp8_linear") or (cfg.get("quantization_config") or {}).get("quant_method") == "fp8":
        fp8 = max(0, params - extra["embed"] - extra["vision"])
    return ModelFigures(
        name=name, num_parameters=int(params), parameters_source=source if num_parameters is not None else "estimate",
        dtype=dtype, hidden_size=int(text["hidden_size"]), num_layers=int(text["num_hidden_layers"]),
        vocab_size=int(text["vocab_size"]),
        max_position_embeddings=int(text.get("max_position_embeddings") or cfg.get("max_position_embeddings") or 4096),
        attention_layers=extra["full"], num_kv_heads=int(text.get("num_key_value_heads") or heads),
        head_dim=int(text.get("head_dim") or int(text["hidden_size"]) // heads),
        linear_state_per_seq=extra["state"], widest_layer=extra["widest"], fp8_linear_parameters=fp8,
        lora_linears=extra["lora"],
    )


class UnknownModel(LookupError):
    """No architecture figures for a model: neither a local folder with ``config.json`` nor a shipped id."""


def tiny_config(tiny) -> dict:
    """The ``config.json`` mapping of brushrl's tiny policy (``brushrl.policy.model.build_tiny_model``:
    a Qwen3 causal LM, tied embeddings, head dim = hidden / heads) for a ``TinyModelConfig``."""
    return {"vocab_size": tiny.vocab_size, "hidden_size": tiny.hidden_size, "num_hidden_layers": tiny.num_hidden_layers,
            "num_attention_heads": tiny.num_attention_heads, "num_key_value_heads": tiny.num_key_value_heads,
            "head_dim": tiny.hidden_size // tiny.num_attention_heads, "intermediate_size": tiny.intermediate_size,
            "max_position_embeddings": tiny.max_position_embeddings, "tie_word_embeddings": True,
            "torch_dtype": "float32"}


def _hub_config(model: str) -> dict | None:
    """A hub id's ``config.json`` from the local Hugging Face cache, else downloaded (config only)
    unless ``HF_HUB_OFFLINE`` is set; None when neither works."""
    import os

    try:
        from huggingface_hub import hf_hub_download, try_to_load_from_cache
    except ImportError:
        return None
    try:
        cached = try_to_load_from_cache(model, "config.json")
        if isinstance(cached, str):
            return json.loads(Path(cached).read_text())
        if os.environ.get("HF_HUB_OFFLINE", "0") not in ("", "0"):
            return None
        return json.loads(Path(hf_hub_download(model, "config.json", etag_timeout=5)).read_text())
    except Exception:  # noqa: BLE001 - no network, no such repo, gated: no figures
        return None


def model_type(model: str) -> str | None:
    """``model_type`` of a local model folder's ``config.json`` or of a shipped hub id; None otherwise
    (no network: a config check must not download)."""
    path = Path(model).expanduser()
    if (path / "config.json").is_file():
        return json.loads((path / "config.json").read_text()).get("model_type")
    return SHIPPED[model].get("model_type") if model in SHIPPED else None


def model_figures(model: str) -> ModelFigures:
    """Figures of ``model``: a local folder (its ``config.json``; parameters from its safetensors
    headers when there are any), a shipped hub id (:data:`SHIPPED`), or another hub id whose
    ``config.json`` is in the Hugging Face cache or downloadable (parameters then estimated).

    Raises:
        UnknownModel: none of these; the message names what to do.
    """
    path = Path(model).expanduser()
    if (path / "config.json").is_file():
        cfg = json.loads((path / "config.json").read_text())
        counted = safetensors_parameters(path)
        return figures_from_config(model, cfg, counted, "safetensors")
    if model in SHIPPED:
        cfg = SHIPPED[model]
        return figures_from_config(model, cfg, cfg["num_parameters"], "hub")
    cfg = _hub_config(model) if "/" in model and not path.exists() else None
    if cfg is not None:
        return figures_from_config(model, cfg)
    raise UnknownModel(
        f"no architecture figures for {model!r}: give a local model folder (with config.json), a hub id "
        f"whose config.json can be fetched, or one of {sorted(SHIPPED)} (brushrl.plan.models.SHIPPED)")
