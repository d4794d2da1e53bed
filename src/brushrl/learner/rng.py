"""The random-number-generator states a learner checkpoint carries (torch, Python, NumPy, CUDA)."""

from __future__ import annotations

import random

import numpy as np
import torch


def rng_state() -> dict:
    """This process's RNG states: ``torch``, ``python``, ``numpy`` and, on a GPU, ``cuda``."""
    state = {"torch": torch.get_rng_state(), "python": random.getstate(), "numpy": np.random.get_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    """Restore :func:`rng_state`'s output (``cuda`` only where saved and a GPU is present)."""
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
