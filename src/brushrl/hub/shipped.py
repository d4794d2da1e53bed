"""The shipped real ``config.json`` files (``configs/<org>--<name>.json``; sources in ``configs/README.md``)."""

from __future__ import annotations

import json
from pathlib import Path

#: Folder of the shipped ``config.json`` files, one per hub id (``/`` spelled ``--``).
CONFIGS = Path(__file__).with_name("configs")


class NotShipped(LookupError):
    """No shipped ``config.json`` for a hub id (the message lists the shipped ones)."""


def shipped_models() -> list[str]:
    """Hub ids with a shipped ``config.json``, sorted."""
    return sorted(p.stem.replace("--", "/", 1) for p in CONFIGS.glob("*.json"))


def config_file(model_id: str) -> Path:
    """The shipped ``config.json`` of hub id ``model_id`` (``Qwen/Qwen3.5-35B-A3B`` ->
    ``configs/Qwen--Qwen3.5-35B-A3B.json``).

    Raises:
        NotShipped: none is shipped for ``model_id``.
    """
    path = CONFIGS / f"{model_id.replace('/', '--')}.json"
    if not path.is_file():
        raise NotShipped(f"no shipped config.json for {model_id!r}; shipped: {shipped_models()}")
    return path


def shipped_config(model_id: str) -> dict:
    """The real ``config.json`` mapping of ``model_id`` (see :func:`config_file`), a fresh copy."""
    return json.loads(config_file(model_id).read_text())
