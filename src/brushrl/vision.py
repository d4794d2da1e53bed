"""Pixel inputs of a vision-language policy (``rollout.revision.show_image``): one context's images,
a trajectory's, a batch's.

A context's vision inputs are a dict of the processor's image-indexed tensors without their batch
axis (Idefics3 / SmolVLM layout, the one supported: ``pixel_values`` (N, C, H, W) float32 and
``pixel_attention_mask`` (N, H, W) long, N images of that context in the order of their
placeholders). A batch stacks them on a new first axis, padding the image axis (and the pixel axes,
as Idefics3's processor pads images of different sizes) with zeros: Idefics3's model drops an
all-zero image (``Idefics3Model.get_image_features``: ``real_images_inds``), so a padded slot adds
no image features, and a padded pixel is masked by ``pixel_attention_mask`` 0.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import torch

#: Keys of a processor's output that are text, not vision inputs.
TEXT_KEYS = ("input_ids", "attention_mask")


def png_image(png: bytes):
    """The PIL RGB image of PNG bytes (an RGBA canvas is flattened onto white first, as a page
    background shows it).

    Raises:
        PIL.UnidentifiedImageError: ``png`` is not an image.
    """
    from PIL import Image

    img = Image.open(io.BytesIO(png))
    if img.mode in ("RGBA", "LA", "P"):
        img = img.convert("RGBA")
        flat = Image.new("RGB", img.size, (255, 255, 255))
        flat.paste(img, mask=img.getchannel("A"))
        return flat
    return img.convert("RGB")


def from_processor(out) -> dict[str, torch.Tensor]:
    """The vision inputs of one processed text (a processor's ``BatchFeature`` of batch 1): every
    tensor but ``input_ids`` / ``attention_mask``, first (batch) axis removed, on the CPU.

    Raises:
        ValueError: a tensor's batch axis is not 1.
    """
    vision = {}
    for key, value in out.items():
        if key in TEXT_KEYS or not isinstance(value, torch.Tensor):
            continue
        if value.size(0) != 1:
            raise ValueError(f"{key}: batch of {value.size(0)}, expected the inputs of one text")
        vision[key] = value[0].detach().cpu()
    return vision


def _present(parts: Sequence[dict[str, torch.Tensor] | None]) -> list[dict[str, torch.Tensor]]:
    """The parts that hold images; raises ValueError when their keys differ."""
    present = [p for p in parts if p]
    if any(set(p) != set(present[0]) for p in present):
        raise ValueError(f"vision inputs with different keys: {[sorted(p) for p in present]}")
    return present


def concat(parts: Sequence[dict[str, torch.Tensor] | None]) -> dict[str, torch.Tensor] | None:
    """One context's vision inputs from its images' in order (the earlier turns' then this one's):
    each key concatenated on the image axis, pixel axes zero-padded to the largest. None when no
    part has any.

    Raises:
        ValueError: the parts' keys differ.
    """
    parts = _present(parts)
    if not parts:
        return None
    return {k: torch.cat(_pad_trailing([p[k] for p in parts]), dim=0) for k in parts[0]}


def num_images(vision: dict[str, torch.Tensor] | None) -> int:
    """N, the images of one context's vision inputs (0 for None)."""
    return 0 if not vision else int(next(iter(vision.values())).size(0))


def stack(rows: Sequence[dict[str, torch.Tensor] | None]) -> dict[str, torch.Tensor] | None:
    """A batch's vision inputs: per key (B, N_max, ...) with zero-filled slots for rows with fewer
    images (or none: None). None when no row has an image.

    Raises:
        ValueError: the rows' keys differ.
    """
    present = _present(rows)
    if not present:
        return None
    n_max = max(num_images(r) for r in present)
    out = {}
    for k in present[0]:
        padded = iter(_pad_trailing([r[k] for r in present]))  # the pixel axes, to the largest
        ref = present[0][k]
        batch = None
        for i, r in enumerate(rows):
            if r:
                t = next(padded)
                if batch is None:
                    batch = ref.new_zeros((len(rows), n_max, *t.shape[1:]))
                batch[i, : t.size(0)] = t
        out[k] = batch
    return out


def _pad_trailing(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    """``tensors`` zero-padded on every axis after the first to the largest size."""
    dims = tensors[0].dim()
    if any(t.dim() != dims for t in tensors):
        raise ValueError("vision tensors of one key with different ranks")
    target = [max(t.size(d) for t in tensors) for d in range(1, dims)]
    out = []
    for t in tensors:
        if list(t.shape[1:]) == target:
            out.append(t)
            continue
        padded = t.new_zeros((t.size(0), *target))
        padded[(slice(None), *[slice(0, n) for n in t.shape[1:]])] = t
        out.append(padded)
    return out
