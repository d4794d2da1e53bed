"""Build a tiny random HPSv3 checkpoint offline (run with the hpsv3 env's Python).

    .venv-hpsv3/bin/python scripts/make_tiny_hpsv3.py OUT_DIR

Writes ``OUT_DIR/base/`` (a tiny Qwen2-VL with its processor, saved like a hub checkpoint),
``OUT_DIR/hpsv3_tiny.yaml`` (the package's HPSv3_7B.yaml with ``model_name_or_path`` pointing at
``base/``, fp32, no flash-attention) and ``OUT_DIR/hpsv3_tiny.safetensors`` (the reward model's
state dict, made by hpsv3's own ``create_model_and_processor``). ``HPSv3RewardInferencer(
config_path=..., checkpoint_path=..., device="cpu")`` then loads it through the real path. Used by
tests/test_hpsv3.py; the same layout with the real Qwen2-VL-7B-Instruct and HPSv3.safetensors runs
the real scorer offline.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import yaml
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import Qwen2TokenizerFast, Qwen2VLConfig, Qwen2VLForConditionalGeneration, Qwen2VLImageProcessor, Qwen2VLProcessor

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>",
            "<|video_pad|>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}{% for c in message['content'] %}"
    "{% if c['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>{% else %}{{ c['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build(out: Path) -> None:
    import hpsv3
    from hpsv3.train import create_model_and_processor
    from hpsv3.utils.parser import DataConfig, ModelConfig, PEFTLoraConfig, TrainingConfig, parse_args_with_yaml

    base = out / "base"
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(
        ["You are tasked with evaluating a generated image based on Visual Quality and Text Alignment",
         "Please provide the overall ratings of this image: a loose watercolour flower"] * 4,
        trainers.BpeTrainer(vocab_size=600, special_tokens=SPECIALS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()),
    )
    tokenizer = Qwen2TokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   unk_token=None, bos_token=None)
    processor = Qwen2VLProcessor(image_processor=Qwen2VLImageProcessor(), tokenizer=tokenizer, chat_template=CHAT_TEMPLATE)
    ids = {s: tokenizer.convert_tokens_to_ids(s) for s in SPECIALS}
    cfg = Qwen2VLConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=4096, tie_word_embeddings=False,
        rope_scaling={"type": "mrope", "mrope_section": [1, 1, 2]},
        vision_config={"depth": 1, "embed_dim": 32, "hidden_size": 32, "num_heads": 2, "mlp_ratio": 2,
                       "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2, "in_channels": 3},
        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"],
        pad_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"], bos_token_id=None,
    )
    torch.manual_seed(0)
    Qwen2VLForConditionalGeneration(cfg).save_pretrained(base)
    processor.save_pretrained(base)

    spec = yaml.safe_load((Path(hpsv3.__file__).parent / "config/HPSv3_7B.yaml").read_text())
    spec.update(model_name_or_path=str(base), torch_dtype="float32", bf16=False, disable_flash_attn2=True,
                deepspeed=None, report_to="none", gradient_checkpointing=False)
    config_path = out / "hpsv3_tiny.yaml"
    config_path.write_text(yaml.safe_dump(spec))
    (_data, training_args, model_config, peft_lora_config), _ = parse_args_with_yaml(
        (DataConfig, TrainingConfig, ModelConfig, PEFTLoraConfig), str(config_path), is_train=False
    )
    model, _proc, _peft = create_model_and_processor(model_config, peft_lora_config, training_args)
    import safetensors.torch

    torch.manual_seed(1)
    with torch.no_grad():  # a non-trivial head, so that mu varies with the image
        for p in model.rm_head.parameters():
            p.normal_(0, 0.05)
    safetensors.torch.save_file({k: v.contiguous() for k, v in model.state_dict().items()},
                                str(out / "hpsv3_tiny.safetensors"))


if __name__ == "__main__":
    build(Path(sys.argv[1]))
    print("ok")
