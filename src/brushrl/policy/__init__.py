"""The policy: a corpus-trained tokenizer, the tiny Qwen3 model, its SFT warm start, and the
loader for real Hugging Face causal LMs."""

from brushrl.policy.model import build_tiny_model, load_pretrained, load_policy
from brushrl.policy.sft import warm_start, warm_start_policy
from brushrl.policy.tokenizer import train_tokenizer

__all__ = [
    "build_tiny_model",
    "load_policy",
    "load_pretrained",
    "train_tokenizer",
    "warm_start",
    "warm_start_policy",
]
