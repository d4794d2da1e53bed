"""What every scorer actor returns, and the small protocol the producer calls.

Stdlib only: this module is imported inside scorer actors that run in other Python environments
(HPSv3 runs in its own virtualenv with transformers 4.45.2).
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Protocol, Sequence


@dataclass
class ScoreOut:
    """One sample's result from one scorer.

    Attributes:
        value: the component in [0, 1]; None when the scorer could not score this sample.
        raw: the scorer's raw numbers (e.g. ``{"mu": 3.2, "sigma": 0.4}`` for HPSv3,
            ``{"resolved": 8}`` for the judge), stored per sample.
        cause: why ``value`` is None (``bad_image``, ``no_comparison_resolved``, ``error:<Type>``).
    """

    value: float | None
    raw: dict[str, float] = field(default_factory=dict)
    cause: str | None = None


class GroupScorer(Protocol):
    """A scorer actor's interface (called as ``actor.score_group.remote(...)``).

    Invariant: returns exactly one ``ScoreOut`` per PNG, in order; a per-sample failure is a
    ``ScoreOut(None, cause=...)``, never an exception. An exception or a timeout of the whole call
    is handled by the producer (None for the group's samples, counted by cause).
    """

    def score_group(self, pngs: Sequence[bytes], prompt: str, seed: int) -> list[ScoreOut]:
        """Score one group's rendered PNGs; ``prompt`` is the group's user prompt, ``seed`` the
        group seed (scorers that draw references draw them from it)."""
        ...


def png_on_white(png: bytes):
    """Decode a PNG and composite it on white: an ``RGB`` ``PIL.Image`` (a transparent canvas must
    not turn black, which is what ``Image.convert("RGB")`` alone does).

    Raises:
        PIL.UnidentifiedImageError: not an image.
    """
    from PIL import Image

    img = Image.open(io.BytesIO(png)).convert("RGBA")
    white = Image.new("RGBA", img.size, (255, 255, 255, 255))
    return Image.alpha_composite(white, img).convert("RGB")


def runtime_env_for(python: str | None, env_vars: dict[str, str] | None = None) -> dict:
    """Ray ``runtime_env`` of a scorer-side actor in another Python env: ``py_executable`` (that env's
    interpreter; omitted for None, the driver's) and ``PYTHONPATH`` = the folder holding this brushrl
    package, so that env needs no brushrl install (Ray uploads ``py_modules`` only at job level; on a
    multi-node cluster the path must exist on the nodes: the job's working dir or the node image),
    the hub's offline switches the driver runs with (``brushrl.hub.weights.offline_env``), plus
    ``env_vars``."""
    from pathlib import Path

    import brushrl
    from brushrl.hub.weights import offline_env

    env: dict = {"env_vars": {"PYTHONPATH": str(Path(brushrl.__file__).resolve().parents[1]), **offline_env(),
                              **(env_vars or {})}}
    if python:
        env["py_executable"] = python
    return env
