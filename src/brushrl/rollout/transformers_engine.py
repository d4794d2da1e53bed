"""Rollout with ``transformers``' ``generate`` on a PEFT-LoRA-wrapped policy (CPU or one GPU)."""

from __future__ import annotations

import logging
import time
from contextlib import nullcontext

import torch
from peft import LoraConfig as PeftLoraConfig
from peft import get_peft_model, get_peft_model_state_dict, set_peft_model_state_dict
from peft.utils import load_peft_weights
from transformers import GenerationConfig

from brushrl import vision
from brushrl.config import LoraConfig, PolicyConfig, RolloutConfig
from brushrl.learner.moe import lora_targets
from brushrl.conversation import next_context, next_context_with_image
from brushrl.policy import load_policy
from brushrl.policy.model import load_processor
from brushrl.prompts import chat_messages
from brushrl.rollout.fault import sync_fault, wrong_prefix_state
from brushrl.types import Completion, Critique

log = logging.getLogger(__name__)


class TransformersEngine:
    """A :class:`~brushrl.rollout.base.RolloutEngine` backed by ``model.generate``.

    The policy (``load_policy(policy_cfg)``) is wrapped with a LoRA adapter shaped like the
    learner's (``lora_cfg``). PEFT initialises LoRA's B matrices to zero, so before the first
    ``load_adapter`` the engine samples exactly the base policy; ``load_adapter`` then only swaps
    the adapter weights.

    Behaviour log-probabilities come from the raw logits of each decoding step
    (``output_logits=True``): ``log_softmax`` at temperature 1 before top-k/top-p, which is what
    the learner's importance ratio compares against (``brushrl.types.Completion.logprobs``).

    With ``rollout.revision.show_image`` the policy is a vision-language model (``load_policy``
    loads it with ``AutoModelForImageTextToText``) and its processor (``AutoProcessor``) is
    loaded too: :meth:`revise` shows each painting (``Critique.image``) in the critique turn
    (``brushrl.conversation.next_context_with_image``), generates with the context's pixel inputs
    and keeps them on the completion (``Completion.vision``).

    Args:
        policy_cfg: which model (a tiny-model cache folder, a local path or a hub id), its dtype and
            ``torch_threads`` (intra-op threads; 1 measured fastest per actor on 2 cores).
        rollout_cfg: sampling (``temperature``, ``top_p``, ``top_k``; 0 disables top-k) and
            ``max_new_tokens``.
        system_prompt: the system message of every prompt.
        lora_cfg: rank, alpha, dropout and target modules; must match the learner's.

    Raises:
        ValueError: ``show_image`` with a policy whose processor has no image processor.
    """

    def __init__(
        self, policy_cfg: PolicyConfig, rollout_cfg: RolloutConfig, system_prompt: str, lora_cfg: LoraConfig
    ) -> None:
        torch.set_num_threads(policy_cfg.torch_threads)
        self.rollout_cfg = rollout_cfg
        self.system_prompt = system_prompt
        base, self.tokenizer = load_policy(policy_cfg)
        #: the vision-language processor (``rollout.revision.show_image``), else None
        self.processor = load_processor(policy_cfg.model) if rollout_cfg.revision.show_image else None
        # the learner's rule (brushrl.learner.moe.lora_targets), so both hold the same adapter keys
        target_modules, target_parameters = lora_targets(base, lora_cfg.target_modules, lora_cfg.experts)
        peft_config = PeftLoraConfig(
            r=lora_cfg.r,
            lora_alpha=lora_cfg.alpha,
            lora_dropout=lora_cfg.dropout,
            target_modules=target_modules,
            target_parameters=target_parameters,
            task_type="CAUSAL_LM",
        )
        self.model = get_peft_model(base, peft_config).eval()
        self.device = next(self.model.parameters()).device
        eos = base.generation_config.eos_token_id
        eos = eos if eos is not None else self.tokenizer.eos_token_id
        #: Token ids that end a completion (``<|im_end|>``; real checkpoints may list several).
        self.stop_ids: set[int] = set(eos) if isinstance(eos, list) else {eos}
        self._version = 0

    # ------------------------------------------------------------------ RolloutEngine
    def policy_version(self) -> int:
        """The learner step whose adapter is loaded (0 = warm start, B = 0)."""
        return self._version

    def load_adapter(self, state: dict[str, torch.Tensor] | str, version: int) -> None:
        """Swap in new LoRA weights and set the policy version.

        Args:
            state: ``peft.get_peft_model_state_dict`` output of the learner, or a folder written by
                ``save_pretrained`` of a PEFT model (``adapter_model.safetensors``).
            version: the learner step that produced the weights.

        Raises:
            ValueError: the keys of ``state`` are not exactly this engine's LoRA weights (an
                adapter of another rank, target set or base model).
        """
        if isinstance(state, str):
            state = load_peft_weights(state, device=str(self.device))
        expected = set(get_peft_model_state_dict(self.model))
        if set(state) != expected:
            missing, extra = sorted(expected - set(state)), sorted(set(state) - expected)
            raise ValueError(f"adapter keys differ: missing {missing[:3]}..., unexpected {extra[:3]}...")
        if sync_fault() == "key_prefix":  # test-only (brushrl.rollout.fault): load nothing, silently
            state = wrong_prefix_state(state)
        with torch.no_grad():
            set_peft_model_state_dict(self.model, state)
        self._version = version
        log.info("rollout engine: adapter of policy version %d loaded", version)

    @torch.no_grad()
    def score(self, prompt_ids: list[int], completion_ids: list[int], adapter: bool = True) -> list[float]:
        """Per-token log-probs (natural log, temperature 1, float32 softmax) of ``completion_ids``
        after ``prompt_ids`` under the adapter this engine serves, or under the base policy with
        ``adapter`` False (PEFT's ``disable_adapter``); see ``RolloutEngine.score``.

        Returns:
            ``len(completion_ids)`` floats.
        """
        ids = torch.tensor([list(prompt_ids) + list(completion_ids)], device=self.device)
        with nullcontext() if adapter else self.model.disable_adapter():
            logits = self.model(input_ids=ids).logits[0, len(prompt_ids) - 1 : -1].float()  # [T, V]
        target = ids[0, len(prompt_ids):].unsqueeze(1)
        return torch.log_softmax(logits, dim=-1).gather(1, target).squeeze(1).tolist()

    def generate(self, prompts: list[str], n: int, seed: int | None = None) -> list[list[Completion]]:
        """Sample one group of ``n`` completions per user prompt (see ``RolloutEngine.generate``).

        Groups are generated one after another (``num_return_sequences=n``), so prompts need no
        padding and ``gen_s`` is the wall time of the group's own ``generate`` call.
        """
        if seed is not None:
            torch.manual_seed(seed)
        return [self._group(prompt, n) for prompt in prompts]

    # ------------------------------------------------------------------ helpers
    def prompt_ids(self, prompt: str) -> list[int]:
        """Token ids of the chat-formatted prompt: system + user turn + assistant header."""
        text = self.tokenizer.apply_chat_template(
            chat_messages(self.system_prompt, prompt), add_generation_prompt=True, tokenize=False
        )
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def _generation_config(self, n: int, max_new_tokens: int | None = None) -> GenerationConfig:
        cfg = self.rollout_cfg
        return GenerationConfig(
            do_sample=True,
            temperature=cfg.temperature,
            top_p=cfg.top_p,
            top_k=cfg.top_k,
            max_new_tokens=max_new_tokens or cfg.max_new_tokens,
            num_return_sequences=n,
            eos_token_id=sorted(self.stop_ids),
            pad_token_id=self.tokenizer.pad_token_id,
            output_logits=True,
            return_dict_in_generate=True,
        )

    def revise(self, requests: list[tuple[Completion, Critique]], seed: int | None = None) -> list[Completion]:
        """One revised reply per ``(previous turn, critique of its painting)`` (see
        ``RolloutEngine.revise``); the contexts are left-padded into one ``generate`` call.

        With a processor (``rollout.revision.show_image``) a critique's ``image`` (PNG bytes) is
        shown in its user turn and each completion's ``vision`` holds its context's pixel inputs
        (earlier turns' images, then this one); without one, ``image`` is ignored.
        """
        if seed is not None:
            torch.manual_seed(seed)
        if self.processor is None:
            turns = [(next_context(self.tokenizer, self.system_prompt, prev, crit.text), None) for prev, crit in requests]
        else:
            turns = [next_context_with_image(self.processor, self.system_prompt, prev, crit.text, crit.image)
                     for prev, crit in requests]
        contexts, visions = [ids for ids, _ in turns], [v for _, v in turns]
        rows, gen_s = self._sample(contexts, 1, visions)
        return [self._completion(prev.prompt, ctx, row, gen_s, vis)
                for (prev, _), ctx, vis, row in zip(requests, contexts, visions, rows)]

    def _group(self, prompt: str, n: int) -> list[Completion]:
        prompt_ids = self.prompt_ids(prompt)
        rows, gen_s = self._sample([prompt_ids], n)
        return [self._completion(prompt, prompt_ids, row, gen_s) for row in rows]

    @torch.no_grad()
    def _sample(self, contexts: list[list[int]], n: int,
                visions: list[dict | None] | None = None) -> tuple[list[tuple[list[int], list[float]]], float]:
        """``n`` samples per context in one ``generate`` call (contexts left-padded to a common
        length; pad positions are masked). Returns per sample, context-major, ``(token ids, raw
        log-probs)`` of the whole generated length T (stop token and padding included), and the
        call's wall seconds. At most ``rollout.max_new_tokens`` new tokens, fewer where the context
        would otherwise outgrow the model's ``max_position_embeddings`` (a long revision turn: its
        reply is then cut, ``truncated``). ``visions``: per context its pixel inputs or None
        (``brushrl.vision``), stacked into the batch's (``vision.stack``) and passed to
        ``generate`` (``n`` must then be 1)."""
        width = max(len(c) for c in contexts)
        max_new = self.rollout_cfg.max_new_tokens
        config = self.model.config
        limit = getattr(config, "max_position_embeddings", None)
        if limit is None and hasattr(config, "get_text_config"):  # a VLM: its language model's
            limit = getattr(config.get_text_config(), "max_position_embeddings", None)
        if limit:
            max_new = max(1, min(max_new, limit - width))
        pad = self.tokenizer.pad_token_id
        ids = torch.tensor([[pad] * (width - len(c)) + c for c in contexts], device=self.device)
        mask = torch.tensor([[0] * (width - len(c)) + [1] * len(c) for c in contexts], device=self.device)
        pixels = vision.stack(visions) if visions else None
        extra = {} if pixels is None else {k: v.to(self.device) for k, v in pixels.items()}
        t0 = time.perf_counter()
        out = self.model.generate(input_ids=ids, attention_mask=mask,
                                  generation_config=self._generation_config(n, max_new), **extra)
        gen_s = time.perf_counter() - t0
        tokens = out.sequences[:, width:]  # [len(contexts) * n, T]
        # Raw (unprocessed) logits of each step, [rows, V] each -> log-prob of the sampled token, [rows, T].
        logprobs = torch.stack(
            [torch.log_softmax(step.float(), dim=-1).gather(1, tokens[:, t : t + 1]).squeeze(1)
             for t, step in enumerate(out.logits)],
            dim=1,
        )
        return [(tokens[row].tolist(), logprobs[row].tolist()) for row in range(tokens.shape[0])], gen_s

    def _completion(self, prompt: str, prompt_ids: list[int], row: tuple[list[int], list[float]],
                    gen_s: float, vision_inputs: dict | None = None) -> Completion:
        """A :class:`Completion` of one sampled row, cut after its first stop token."""
        ids_row, logprobs = row
        end = next((i + 1 for i, tok in enumerate(ids_row) if tok in self.stop_ids), None)
        kept = ids_row if end is None else ids_row[:end]
        return Completion(
            prompt=prompt,
            text=self.tokenizer.decode(kept, skip_special_tokens=True),
            prompt_ids=list(prompt_ids),
            completion_ids=kept,
            logprobs=logprobs[: len(kept)],
            policy_version=self._version,
            truncated=end is None,
            gen_s=gen_s,
            vision=vision_inputs,
        )
