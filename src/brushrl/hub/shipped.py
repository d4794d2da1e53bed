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


#: Bytes per element of a dtype name (``config.json`` ``torch_dtype``/``dtype``; brushrl's dtypes).
DTYPE_BYTES = {"float32": 4, "float": 4, "bfloat16": 2, "float16": 2, "half": 2, "fp8": 1, "float8_e4m3fn": 1}

#: Parameter counts the hub reports for the shipped ids (not part of a ``config.json``; sources in
#: ``brushrl.plan.models``' docstring).
HUB_PARAMETERS = {
    "Qwen/Qwen3.5-35B-A3B": 35_950_000_000,
    "Qwen/Qwen3-VL-30B-A3B-Instruct": 31_070_000_000,
    "Qwen/Qwen2-VL-7B-Instruct": 8_290_000_000,
}


def _shipped() -> dict[str, dict]:
    """:data:`SHIPPED`: each shipped ``config.json`` with its hub parameter
    count; the judge's ``-FP8`` release is the same architecture with FP8 linear weights."""
    out = {model: {**shipped_config(model), "num_parameters": n} for model, n in HUB_PARAMETERS.items()}
    out["Qwen/Qwen3-VL-30B-A3B-Instruct-FP8"] = {**out["Qwen/Qwen3-VL-30B-A3B-Instruct"], "fp8_linear": True}
    return out


#: ``config.json`` of the hub ids the shipped configs name (``brushrl/hub/configs/``), with
#: ``num_parameters`` as the hub reports it.
SHIPPED: dict[str, dict] = _shipped()
