"""Build the tiny Qwen3 policy from a config, or load a real causal LM by path or hub id."""

from __future__ import annotations

import torch
from transformers import (
    AutoModelForCausalLM,
    AutoModelForImageTextToText,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    Qwen3Config,
    Qwen3ForCausalLM,
)

from brushrl.config import PolicyConfig, TinyModelConfig

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def torch_dtype(name: str) -> torch.dtype:
    """Map a config dtype name (``float32``, ``bfloat16``, ``float16``) to a ``torch.dtype``.

    Raises:
        KeyError: unknown name.
    """
    return _DTYPES[name]


def build_tiny_model(cfg: TinyModelConfig, tokenizer: PreTrainedTokenizerBase) -> Qwen3ForCausalLM:
    """A randomly initialised Qwen3 causal LM sized by ``cfg``, with the vocabulary of ``tokenizer``.

    Input and output embeddings are tied (as in the small Qwen3 checkpoints), which keeps the
    parameter count of the default config (hidden 256, 4 layers, vocab 2048) near 3.7 M.
    ``head_dim`` is ``hidden_size // num_attention_heads`` (Qwen3's own default of 128 would not
    fit a 256-wide model).

    Args:
        cfg: sizes; ``cfg.vocab_size`` is ignored in favour of ``len(tokenizer)`` so that every
            token id the tokenizer can produce has an embedding row.
        tokenizer: supplies the vocabulary size and the EOS / pad ids.

    Returns:
        A float32 ``Qwen3ForCausalLM`` in eval mode.

    Raises:
        ValueError: ``hidden_size`` not divisible by ``num_attention_heads``, or heads not
            divisible by ``num_key_value_heads``.
    """
    if cfg.hidden_size % cfg.num_attention_heads:
        raise ValueError(f"hidden_size {cfg.hidden_size} not divisible by {cfg.num_attention_heads} heads")
    if cfg.num_attention_heads % cfg.num_key_value_heads:
        raise ValueError("num_attention_heads must be a multiple of num_key_value_heads")
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=cfg.hidden_size,
        intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_hidden_layers,
        num_attention_heads=cfg.num_attention_heads,
        num_key_value_heads=cfg.num_key_value_heads,
        head_dim=cfg.hidden_size // cfg.num_attention_heads,
        max_position_embeddings=cfg.max_position_embeddings,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )
    model = Qwen3ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.bos_token_id = None
    return model.eval()


def load_pretrained(path_or_id: str, dtype: str = "float32") -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load any Hugging Face causal LM and its tokenizer from a local folder or a hub id.

    The model class is :func:`policy_class`: the one the checkpoint declares (``architectures[0]``),
    which is the class vLLM serves, so the LoRA adapter's keys are the ones vLLM's weight mapper
    knows (Qwen3.5-MoE: ``Qwen3_5MoeForConditionalGeneration``, keys ``model.language_model.layers.N``;
    ``AutoModelForCausalLM`` would load the text-only ``Qwen3_5MoeForCausalLM``, keys
    ``model.layers.N``, which reach no vLLM module: vllm-project/vllm#48019). A vision-language
    checkpoint generates and scores text like a causal LM and takes pixel inputs
    (``rollout.revision.show_image``).

    The tokenizer must carry a chat template (instruct checkpoints do). A missing pad token is set
    to the EOS token, which is what left-padded batched generation needs.

    Args:
        path_or_id: a folder written by ``save_pretrained`` or a hub id (needs the hub cache or
            network).
        dtype: ``float32``, ``bfloat16`` or ``float16``.

    Returns:
        ``(model, tokenizer)``, the model in eval mode.

    Raises:
        OSError: the path/id cannot be resolved.
        ValueError: the tokenizer has no chat template.
    """
    tokenizer = AutoTokenizer.from_pretrained(path_or_id)
    if tokenizer.chat_template is None:
        raise ValueError(f"{path_or_id}: tokenizer has no chat_template")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(path_or_id)  # read once, handed to from_pretrained
    model = policy_class(config).from_pretrained(path_or_id, config=config, dtype=torch_dtype(dtype))
    return model.eval(), tokenizer


def policy_class(config):
    """The class :func:`load_pretrained` loads a checkpoint with (``from_pretrained`` / ``from_config``).

    ``config.architectures[0]`` when transformers has a generative class of that name (what the
    checkpoint was saved from, and what vLLM resolves it to); otherwise (no ``architectures``, a
    remote-code or unknown name) ``AutoModelForCausalLM``, or ``AutoModelForImageTextToText`` for a
    vision-language configuration the causal-LM mapping does not know (Idefics3 / SmolVLM).
    """
    import transformers
    from transformers import GenerationMixin

    name = (getattr(config, "architectures", None) or [None])[0]
    cls = getattr(transformers, name, None) if name else None
    if isinstance(cls, type) and issubclass(cls, GenerationMixin):
        return cls
    return AutoModelForImageTextToText if is_vision_language(config) else AutoModelForCausalLM


def meta_model(config) -> PreTrainedModel:
    """The model :func:`load_pretrained` would load for ``config`` (:func:`policy_class`), built on the
    meta device: the module tree without weights or memory (LoRA targets, parameter counts)."""
    return random_model(config, "meta")


def random_model(config, device: str | torch.device, dtype: torch.dtype | None = None) -> PreTrainedModel:
    """The model :func:`load_pretrained` would load for ``config`` (:func:`policy_class`), with
    transformers' random initialisation, its parameters created directly on ``device`` (no copy
    through host memory: a 35 B model in bf16 is 67 GiB; ``"meta"``: no memory at all).

    Args:
        config: a transformers configuration (``AutoConfig``).
        device: where the parameters are allocated and initialised (``"cuda"``, ``"cpu"``, ``"meta"``).
        dtype: parameter dtype; None: transformers' default (float32 unless ``config`` says otherwise).

    Returns:
        The model in training mode (as ``from_config`` leaves it).
    """
    cls = policy_class(config)
    build = cls.from_config if hasattr(cls, "from_config") else cls._from_config
    kwargs = {} if dtype is None else {"dtype": dtype}
    with torch.device(device):
        return build(config, **kwargs)


def is_vision_language(config) -> bool:
    """Whether a checkpoint's configuration (``AutoConfig``) is an image-text-to-text model that
    ``AutoModelForCausalLM`` cannot load (in ``AutoModelForImageTextToText``'s mapping, not the
    causal LM's)."""
    from transformers.models.auto.modeling_auto import (MODEL_FOR_CAUSAL_LM_MAPPING,
                                                        MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING)

    return type(config) not in MODEL_FOR_CAUSAL_LM_MAPPING and type(config) in MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING


def load_processor(path_or_id: str):
    """The vision-language processor (``AutoProcessor``) of a policy checkpoint, for showing it
    images (``rollout.revision.show_image``).

    Raises:
        OSError: the path/id cannot be resolved.
        ValueError: the checkpoint has no image processor (a text-only model), or its tokenizer
            has no chat template.
    """
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(path_or_id)
    if getattr(processor, "image_processor", None) is None or getattr(processor, "tokenizer", None) is None:
        raise ValueError(f"{path_or_id}: rollout.revision.show_image needs a vision-language policy; its processor "
                         f"({type(processor).__name__}) has no image processor")
    if processor.tokenizer.chat_template is None:
        raise ValueError(f"{path_or_id}: tokenizer has no chat_template")
    if processor.tokenizer.pad_token is None:
        processor.tokenizer.pad_token = processor.tokenizer.eos_token
    return processor


def load_policy(cfg: PolicyConfig) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The rollout/learner policy described by ``cfg``: ``load_pretrained(cfg.model, cfg.dtype)``.

    ``policy.model: tiny`` names no weights yet: the run's warm start
    (``brushrl.policy.warm_start_policy``) turns it into the cache folder first.

    Returns:
        ``(model, tokenizer)``, the model in eval mode.

    Raises:
        ValueError: ``cfg.model`` is ``tiny`` (not warm-started).
        OSError: the model cannot be found.
    """
    if cfg.model == "tiny":
        raise ValueError("policy.model 'tiny' must be warm-started first (brushrl.policy.warm_start_policy)")
    return load_pretrained(cfg.model, cfg.dtype)
