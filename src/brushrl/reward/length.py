"""The length reward component."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # no pydantic at import time: this package also loads in the HPSv3 env
    from brushrl.config import LengthConfig


def length_score(code: str, cfg: "LengthConfig") -> float:
    """Length ramp in [0, 1] over approximate tokens ``len(code) / cfg.chars_per_token``.

    0 below ``min_tokens`` or above ``max_tokens``; rises linearly from ``min_tokens`` to 1 at
    ``full_tokens`` and stays 1 up to ``max_tokens``. Source: the HF reproduction's
    ``core/scoring.py`` (150 / 3,000 / 6,000 tokens at 4 characters a token), after the original's
    "code length ramp targeting around 3,000 tokens".
    """
    tokens = len(code) / cfg.chars_per_token
    if tokens < cfg.min_tokens or tokens > cfg.max_tokens:
        return 0.0
    if tokens >= cfg.full_tokens:
        return 1.0
    return (tokens - cfg.min_tokens) / max(cfg.full_tokens - cfg.min_tokens, 1e-9)
