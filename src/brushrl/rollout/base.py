"""The rollout engine interface: sample GRPO groups from the current policy, swap LoRA weights."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import torch

from brushrl.types import Completion, Critique


@runtime_checkable
class RolloutEngine(Protocol):
    """Samples completions from the behaviour policy and tracks which policy version it is.

    Invariant: every completion returned after ``load_adapter(..., version=v)`` (and before the
    next ``load_adapter``) carries ``policy_version == v``; before any call it is 0 (the
    warm-started policy). Except with partial rollouts (the vLLM engine, ``rollout.partial_rollouts``):
    a completion whose generation a ``load_adapter`` interrupted carries the version of its first
    token and ``version_spans`` naming each token's.
    """

    def generate(self, prompts: list[str], n: int, seed: int | None = None) -> list[list[Completion]]:
        """Sample ``n`` completions for each user prompt (one GRPO group per prompt).

        Args:
            prompts: user prompt texts (the system prompt is the engine's own).
            n: group size G.
            seed: seeds the sampler for this call (same seed, same weights -> same completions);
                None continues the engine's random stream.

        Returns:
            ``len(prompts)`` lists of ``n`` completions, in prompt order.
        """
        ...

    def revise(self, requests: list[tuple[Completion, Critique]], seed: int | None = None) -> list[Completion]:
        """One revised reply per ``(previous turn, critique of its painting)`` of a multi-turn
        trajectory (``rollout.turns`` > 1).

        Invariant (``brushrl.conversation``): each returned completion's ``prompt_ids`` is the
        previous turn's ``prompt_ids + completion_ids`` followed by the critique's user turn and the
        assistant header, tokens as sampled (never re-tokenised), and its ``prompt`` is the previous
        turn's user prompt.

        With ``rollout.revision.show_image`` (the transformers engine of a vision-language
        policy) a critique's ``image`` is shown in its user turn as image tokens, and the returned
        completion's ``vision`` holds the pixel inputs of every image in its context.

        Args:
            requests: ``(previous completion, critique)`` pairs, one per trajectory going on.
            seed: as in :meth:`generate`.

        Returns:
            ``len(requests)`` completions, in request order.
        """
        ...

    def load_adapter(self, state: dict[str, torch.Tensor] | str, version: int) -> None:
        """Replace the LoRA weights with ``state`` (a ``peft.get_peft_model_state_dict`` mapping
        or the folder of a saved adapter) and set the policy version to ``version``."""
        ...

    def score(self, prompt_ids: list[int], completion_ids: list[int], adapter: bool = True) -> list[float]:
        """Log-probs (natural log, temperature 1, before top-k/top-p) of each token of
        ``completion_ids`` following ``prompt_ids``, under the adapter the engine serves now
        (``adapter`` False: under the base policy, no adapter). The weight-sync canary compares
        them with the learner's (``brushrl.orchestrator.sync_check``).

        Returns:
            ``len(completion_ids)`` floats.
        """
        ...

    def policy_version(self) -> int:
        """The learner step whose weights the engine samples from (0 = warm start)."""
        ...
