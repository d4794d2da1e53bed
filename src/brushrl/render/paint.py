"""How much of a canvas is painted."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image

#: Euclidean RGB distance (0-255 scale) from the background above which a pixel is paint.
PAINT_DISTANCE = 32.0


def paint_mask(png_bytes: bytes) -> np.ndarray:
    """Which pixels are paint: bool ``[H, W]`` (definition in :func:`paint_fraction`).

    Raises:
        PIL.UnidentifiedImageError: if the bytes are not an image.
    """
    return background_distance(png_bytes) > PAINT_DISTANCE


def background_distance(png_bytes: bytes) -> np.ndarray:
    """Each pixel's Euclidean RGB distance (0-255 scale) from the canvas background: float32
    ``[H, W]`` (background as in :func:`paint_fraction`).

    Raises:
        PIL.UnidentifiedImageError: if the bytes are not an image.
    """
    image = Image.open(io.BytesIO(png_bytes)).convert("RGBA")
    white = Image.new("RGBA", image.size, (255, 255, 255, 255))
    white.alpha_composite(image)
    rgb = np.asarray(white.convert("RGB"), dtype=np.float32)  # H x W x 3 in 0..255
    q = rgb.astype(np.uint32) >> 4
    key = (q[..., 0] << 8) | (q[..., 1] << 4) | q[..., 2]
    modal_key = np.bincount(key.ravel(), minlength=4096).argmax()
    background = rgb[key == modal_key].mean(axis=0)
    return np.sqrt(((rgb - background) ** 2).sum(axis=-1))


def paint_fraction(png_bytes: bytes) -> float:
    """Share of pixels that differ from the canvas background, in [0, 1].

    Definition (the HF reproduction's ``core/render.py``, adithya-s-k/HuggingEnvs
    ``02-watercolour``): composite the image on opaque white; bin every pixel by its RGB quantised
    to 16 levels (``channel >> 4``); the most populated bin is the background and its colour is the
    mean of the pixels in it; a pixel is paint when its Euclidean RGB distance to that colour
    exceeds ``PAINT_DISTANCE`` (32). A wash over the whole canvas therefore counts as background,
    not paint.

    Args:
        png_bytes: a PNG (any mode; alpha is composited on white).

    Raises:
        PIL.UnidentifiedImageError: if the bytes are not an image.
    """
    return float(paint_mask(png_bytes).mean())
