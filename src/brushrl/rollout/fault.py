"""Test-only faults in the weight sync, in the style of Ray's ``RAY_testing_*`` variables.

With ``BRUSHRL_TESTING_HOLD_DECODE=K`` in the vLLM rollout actor's environment, the engine serves
no adapter load until its first decode run has taken K steps, and that run holds at its K-th step
until a load is posted (``VLLMEngine.post``), then serves it there and goes on: a sync that lands
mid-generation on every machine, however fast the decode and whichever call reaches the actor
first (``tests/test_vllm_engine.py``, partial rollouts). Once per engine; that run's sequences
must still be decoding at step K.

With ``BRUSHRL_TESTING_SYNC_FAULT=key_prefix`` in the rollout actor's environment (the driver's
value is forwarded to it by ``brushrl.rollout.make_rollout_actor``), every adapter the engine loads
has its keys moved under a module path the policy does not have
(``base_model.model.model.layers.0...`` -> ``base_model.model.brushrl_fault.model.layers.0...``)
before the engine applies it. An engine then applies no LoRA weight at all and keeps serving what it
served before (the base policy when the fault is on from the start): the silent failure of an
adapter whose key layout does not match the engine's module names (vLLM checks only the module
*suffix*, ``q_proj``, so such an adapter registers fine and changes nothing). The sync canary
(``brushrl.orchestrator.sync_check``) must stop the run; ``tests/test_sync_check.py`` checks that
it does.

Never set it outside tests: it breaks every sync on purpose (and the vLLM engine leaves each
renamed copy, ``<adapter folder>.fault``, next to the folder it copied).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

#: The environment variable that turns the fault on; its only value is ``key_prefix``.
FAULT_ENV = "BRUSHRL_TESTING_SYNC_FAULT"
#: PEFT's prefix of every adapter key, and what the fault puts after it.
_PEFT_PREFIX, _WRONG = "base_model.model.", "brushrl_fault."


def sync_fault() -> str | None:
    """The fault asked for in this process's environment, or None.

    Raises:
        ValueError: an unknown value (a typo must not look like a healthy sync).
    """
    value = os.environ.get(FAULT_ENV) or None
    if value not in (None, "key_prefix"):
        raise ValueError(f"{FAULT_ENV}={value!r}: the only fault is 'key_prefix'")
    return value


def wrong_prefix(key: str) -> str:
    """``key`` moved under a module path no policy has (``base_model.model.`` kept, so the key
    still looks like a PEFT adapter key and its module suffix like a LoRA target)."""
    if not key.startswith(_PEFT_PREFIX):
        return _WRONG + key
    return _PEFT_PREFIX + _WRONG + key[len(_PEFT_PREFIX):]


def wrong_prefix_state(state: dict) -> dict:
    """A state dict with every key passed through :func:`wrong_prefix` (same tensors)."""
    return {wrong_prefix(k): v for k, v in state.items()}


def wrong_prefix_folder(src: str | Path, dst: str | Path) -> Path:
    """Copy the PEFT adapter folder ``src`` to ``dst`` with every tensor key of
    ``adapter_model.safetensors`` passed through :func:`wrong_prefix`; ``adapter_config.json`` is
    copied unchanged. Returns ``dst``.

    Raises:
        FileNotFoundError: ``src`` has no ``adapter_model.safetensors``.
    """
    from safetensors.torch import load_file, save_file

    src, dst = Path(src), Path(dst)
    weights = src / "adapter_model.safetensors"
    if not weights.exists():
        raise FileNotFoundError(f"{weights}: no adapter weights to rename")
    dst.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.is_file() and f.name != weights.name:
            shutil.copy2(f, dst / f.name)
    save_file(wrong_prefix_state(load_file(str(weights))), str(dst / weights.name), metadata={"format": "pt"})
    return dst


#: Hold the engine's first decode run at this step until an adapter load is posted (module docstring).
HOLD_ENV = "BRUSHRL_TESTING_HOLD_DECODE"


def hold_at_step() -> int | None:
    """The decode step to hold at, from :data:`HOLD_ENV`, or None.

    Raises:
        ValueError: not a positive integer.
    """
    value = os.environ.get(HOLD_ENV)
    if not value:
        return None
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"{HOLD_ENV}={value!r}: a decode step >= 1")
    return int(value)
