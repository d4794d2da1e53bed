"""HPSv3 human-preference score as a Ray actor in its own Python environment.

HPSv3 (MizzenAI/HPSv3, ICCV 2025, arXiv 2508.03789; PyPI ``hpsv3``) is a Qwen2-VL-7B reward model
whose ``HPSv3RewardInferencer.reward(images, prompts)`` returns logits ``[B, 2]`` = (mu, sigma); mu,
an unbounded real, is the score ("we select miu as the final output", hpsv3/inference.py).

* Mapping: ``score = 1 / (1 + exp(-mu / mu_scale))`` with ``mu_scale`` 4, the HF reproduction's
  logistic (its pool: mu -9.2 .. +5.2 at 448x448, blank canvas -9.98; tiers meh 0.13, love 0.70).
  The raw mu and sigma are kept in ``ScoreOut.raw``.
* Environment: ``hpsv3`` 1.0.0 pins ``transformers==4.45.2`` (its model class rejects how
  transformers 5.x constructs models) and imports matplotlib/tensorboard without declaring them;
  the learner runs transformers 5.x. The actor therefore runs under another interpreter through
  Ray's ``runtime_env={"py_executable": cfg.python, "env_vars": {"PYTHONPATH": <brushrl's src>}}``; that env needs
  ``ray`` of the cluster's version, ``hpsv3`` and a torch/torchvision pair that import together.
  ``scripts/build_hpsv3_env.sh`` (``make hpsv3-env``) builds it as ``.venv-hpsv3``. Never downgrade
  the main environment.
* Device: ``cuda`` in the checkpoint's bf16; on ``cpu`` the model is cast to fp32 (bf16 fails on
  CPU). Images are composited on white first (``Image.convert("RGB")`` would blacken a
  transparent canvas).

This module imports only the standard library at import time (it is loaded in that other env).
"""

from __future__ import annotations

import logging
import math
import sys
from typing import Sequence

from brushrl.reward.base import ScoreOut, png_on_white, runtime_env_for

log = logging.getLogger(__name__)


def mu_to_score(mu: float, scale: float = 4.0) -> float:
    """HPSv3 mu -> [0, 1]: ``1 / (1 + exp(-mu / scale))`` (HF reproduction, scale 4).

    Overflow-safe for any finite mu; monotone increasing; 0.5 at mu = 0.
    """
    z = -mu / scale
    if z > 700:
        return 0.0
    return 1.0 / (1.0 + math.exp(z))


class HPSv3Scorer:
    """Wraps ``hpsv3.HPSv3RewardInferencer``; one instance per actor.

    Args:
        cfg: ``HPSv3Config.model_dump()`` (a plain dict, so that pydantic need not be importable here).
        inferencer: an already built inferencer (tests); None builds one from ``cfg``.

    Raises:
        ImportError: ``hpsv3`` is not importable by this interpreter; the message names
            ``reward.hpsv3.python`` and the build script.
    """

    def __init__(self, cfg: dict, inferencer=None):
        self.cfg = dict(cfg)
        if inferencer is None:
            try:
                from hpsv3 import HPSv3RewardInferencer
            except ImportError as exc:
                raise ImportError(
                    f"hpsv3 is not importable by {sys.executable} ({exc}); set reward.hpsv3.python to the "
                    "Python of an env built with scripts/build_hpsv3_env.sh"
                ) from exc
            config_path = cfg.get("config_path")
            if cfg.get("base_model"):
                config_path = derived_model_yaml(config_path, cfg["base_model"])
            inferencer = HPSv3RewardInferencer(
                config_path=config_path,
                checkpoint_path=cfg.get("checkpoint_path"),
                device=cfg.get("device", "cuda"),
            )
        if str(inferencer.device).startswith("cpu"):
            inferencer.model.float()
        self.inferencer = inferencer

    def mu_sigma(self, pngs: Sequence[bytes], prompt: str) -> list[tuple[float, float] | str]:
        """(mu, sigma) per PNG, in batches of ``batch_size``; instead a cause string for an
        unreadable PNG (``bad_image``) or a batch whose forward pass raised (``error:<Type>``, logged)."""
        import torch

        out: list[tuple[float, float] | str] = ["bad_image"] * len(pngs)
        images = []
        for i, png in enumerate(pngs):
            try:
                images.append((i, png_on_white(png)))
            except Exception:  # noqa: BLE001 - a bad image is that sample's None
                pass
        step = int(self.cfg.get("batch_size", 8))
        for k in range(0, len(images), step):
            chunk = images[k : k + step]
            try:
                with torch.inference_mode():
                    logits = self.inferencer.reward([img for _, img in chunk], [prompt] * len(chunk))
                for (i, _), row in zip(chunk, logits.float().cpu().tolist()):
                    out[i] = (float(row[0]), float(row[1]))
            except Exception as exc:  # noqa: BLE001 - a failed batch is None for its samples
                log.warning("HPSv3 batch failed: %r", exc)
                for i, _ in chunk:
                    out[i] = f"error:{type(exc).__name__}"
        return out

    def score_group(self, pngs: Sequence[bytes], prompt: str, seed: int) -> list[ScoreOut]:
        """``GroupScorer``: score = ``mu_to_score(mu)``, raw = {mu, sigma}. The group's user prompt
        is ignored: every image is scored with ``cfg["prompt"]`` (a fixed style prompt, as in the
        reproduction)."""
        scale = float(self.cfg.get("mu_scale", 4.0))
        results = []
        for ms in self.mu_sigma(pngs, self.cfg.get("prompt", "a loose watercolour flower")):
            if isinstance(ms, str):
                results.append(ScoreOut(None, cause=ms))
            else:
                results.append(ScoreOut(mu_to_score(ms[0], scale), {"mu": ms[0], "sigma": ms[1]}))
        return results


def derived_model_yaml(config_path: str | None, base_model: str, out_dir: str | None = None) -> str:
    """Write hpsv3's model YAML with ``model_name_or_path`` set to ``base_model`` and return its path.

    The template is ``config_path``, or the hpsv3 package's ``config/HPSv3_7B.yaml`` (where
    ``HPSv3RewardInferencer`` finds it when given no config). Without this, hpsv3 loads the base VLM
    named in its own YAML (``Qwen/Qwen2-VL-7B-Instruct``), downloading it from the hub in every actor
    process. Runs in the hpsv3 env (PyYAML is hpsv3's dependency); ``out_dir`` None: a new temp dir.

    Raises:
        OSError: the template cannot be read.
    """
    import tempfile
    from pathlib import Path

    import yaml

    if config_path is None:
        import hpsv3

        config_path = str(Path(hpsv3.__file__).parent / "config" / "HPSv3_7B.yaml")
    spec = yaml.safe_load(Path(config_path).read_text()) or {}
    spec["model_name_or_path"] = base_model
    out = Path(out_dir or tempfile.mkdtemp(prefix="brushrl-hpsv3-")) / "hpsv3_model.yaml"
    out.write_text(yaml.safe_dump(spec, sort_keys=False))
    return str(out)


def hpsv3_runtime_env(python: str | None) -> dict:
    """Ray ``runtime_env`` for the HPSv3 actor: :func:`brushrl.reward.base.runtime_env_for` its env."""
    return runtime_env_for(python)


def make_hpsv3_actor(cfg, placement=None, max_restarts: int = -1):
    """Start an ``HPSv3Scorer`` actor from an ``HPSv3Config``: ``cfg.num_cpus`` CPUs plus what
    ``placement`` (``resources.hpsv3``: GPUs, memory, custom resources) asks for, in its own env
    (:func:`hpsv3_runtime_env`), restarted by Ray if it dies."""
    import ray

    from brushrl.ray_setup import ray_options

    options = ray_options(placement) if placement is not None else {}
    remote = ray.remote(num_cpus=cfg.num_cpus, max_restarts=max_restarts,
                        runtime_env=hpsv3_runtime_env(cfg.python), **options)(HPSv3Scorer)
    return remote.remote(cfg.model_dump())
