"""The run directory: resolved config, per-completion table, PNGs, checkpoints, metrics, gallery."""

from brushrl.artifacts.run_dir import RunDir

__all__ = ["RunDir"]
