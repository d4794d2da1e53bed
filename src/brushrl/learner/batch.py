"""Pad a list of samples into the tensors TRL's GRPO loss reads."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from trl.trainer.utils import pad

from brushrl import vision
from brushrl.learner.samples import TrainSample


def collate(
    samples: Sequence[TrainSample],
    advantages: Sequence[float],
    pad_token_id: int,
    device: torch.device | str = "cpu",
) -> dict[str, torch.Tensor]:
    """Pad ``samples`` the way ``GRPOTrainer._generate_and_score_completions`` does.

    Prompts are LEFT-padded and completions RIGHT-padded, so that every completion starts at the
    same column (TRL keeps the last ``T`` logits). A constant position shift of the real tokens does
    not change a RoPE model's log-probs (measured: max difference 1e-6 on a tiny Qwen3).

    Args:
        samples: B samples, each with a non-empty completion.
        advantages: B floats, one per sample.
        pad_token_id: id written into padded positions (masked out everywhere).
        device: where the tensors go.

    Returns:
        ``prompt_ids`` (B, P) long, ``prompt_mask`` (B, P) long, ``completion_ids`` (B, T) long,
        ``completion_mask`` (B, T) long, ``behaviour_logps`` (B, T) float32 (0 at padding),
        ``advantages`` (B,) float32; P and T are the longest prompt and completion. When a sample has
        a ``loss_mask`` (a multi-turn trajectory), also ``tool_mask`` (B, T) long: 1 on the
        policy's tokens, 0 on critique tokens, 1 at padding (TRL's own padding value; its loss
        mask is ``completion_mask * tool_mask``). Critique tokens stay in ``completion_mask``:
        the model attends to them, only the loss skips them. When a sample has ``vision``
        (images in its sequence, ``rollout.revision.show_image``), also each vision key stacked
        (``brushrl.vision.stack``; Idefics3: ``pixel_values`` (B, N, C, H, W) float32,
        ``pixel_attention_mask`` (B, N, H, W) long; zero slots for rows with fewer images) and
        ``num_images``, a list of B ints (what TRL's forward reads to slice them).

    Raises:
        ValueError: lengths of ``samples`` and ``advantages`` differ, or an empty completion.
    """
    if len(samples) != len(advantages):
        raise ValueError(f"{len(samples)} samples but {len(advantages)} advantages")
    if any(not s.completion_ids for s in samples):
        raise ValueError("empty completion in batch")
    prompts = [torch.tensor(s.prompt_ids, dtype=torch.long) for s in samples]
    completions = [torch.tensor(s.completion_ids, dtype=torch.long) for s in samples]
    logps = [torch.tensor(s.logprobs, dtype=torch.float32) for s in samples]
    out = {
        "prompt_ids": pad(prompts, padding_value=pad_token_id, padding_side="left"),
        "prompt_mask": pad([torch.ones_like(p) for p in prompts], padding_value=0, padding_side="left"),
        "completion_ids": pad(completions, padding_value=pad_token_id, padding_side="right"),
        "completion_mask": pad([torch.ones_like(c) for c in completions], padding_value=0, padding_side="right"),
        "behaviour_logps": pad(logps, padding_value=0.0, padding_side="right"),
        "advantages": torch.tensor(list(advantages), dtype=torch.float32),
    }
    if any(s.loss_mask is not None for s in samples):
        masks = [torch.tensor(s.loss_mask if s.loss_mask is not None else [1] * len(s.completion_ids),
                              dtype=torch.long) for s in samples]
        out["tool_mask"] = pad(masks, padding_value=1, padding_side="right")
    pixels = vision.stack([s.vision for s in samples])
    if pixels is not None:
        out.update(pixels)
    out = {k: v.to(device) for k, v in out.items()}
    if pixels is not None:
        out["num_images"] = [vision.num_images(s.vision) for s in samples]
    return out
