"""``runs/<name>/control.yaml``: settings a running trainer picks up between steps.

Today one setting: the number of renderer actors::

    render:
      num_actors: 8

``brushrl scale runs/X --renderers 8`` writes the file (atomically); the trainer reads it between
steps (``apply_control``) and resizes its ``RenderPool`` without restarting. On a cluster, renderers
that ask for a custom resource no node has left stay pending until the autoscaler adds a renderer
node; the pool only sends work to renderers that have started. A file that cannot be read or holds a bad value is reported and
ignored, and the run goes on.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from brushrl.artifacts.run_dir import atomic_write

CONTROL_FILE = "control.yaml"


class _RenderControl(BaseModel):
    model_config = ConfigDict(extra="forbid")
    num_actors: int = Field(ge=1)
    """Renderer actors the pool should hold."""


class Control(BaseModel):
    """The validated contents of ``control.yaml``."""

    model_config = ConfigDict(extra="forbid")
    render: _RenderControl | None = None


class ControlError(ValueError):
    """``control.yaml`` is unreadable or invalid; the message names the file and the field."""


def write_control(run_dir: str | Path, num_renderers: int) -> Path:
    """Write ``control.yaml`` asking the trainer of ``run_dir`` for ``num_renderers`` renderers.

    Raises:
        FileNotFoundError: ``run_dir`` is not a run directory (no ``config.yaml``).
        ControlError: ``num_renderers`` < 1.
    """
    root = Path(run_dir)
    if not (root / "config.yaml").exists():
        raise FileNotFoundError(f"{root} is not a run directory (no config.yaml)")
    try:
        control = Control(render={"num_actors": num_renderers})
    except ValidationError as exc:
        raise ControlError(f"render.num_actors: {exc.errors()[0]['msg']}") from None
    path = root / CONTROL_FILE
    atomic_write(path, yaml.safe_dump(control.model_dump(exclude_none=True), sort_keys=False))
    return path


class ControlFile:
    """Watches one ``control.yaml``; ``poll()`` returns its contents when they changed.

    Args:
        path: the file (it need not exist yet).
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._seen: str | None = None

    def poll(self) -> Control | None:
        """The new contents if the file changed since the last call, else None.

        Raises:
            ControlError: the changed file is not valid YAML or has a bad field (named). The same
                bad contents raise only once.
        """
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise ControlError(f"cannot read {self.path}: {exc}") from None
        if text == self._seen:
            return None
        self._seen = text
        try:
            data = yaml.safe_load(text) or {}
            return Control.model_validate(data)
        except yaml.YAMLError as exc:
            raise ControlError(f"invalid YAML in {self.path}: {exc}") from None
        except ValidationError as exc:
            fields = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            raise ControlError(f"{self.path}: {fields}") from None


def apply_control(control: ControlFile, render_pool, say) -> bool:
    """Apply a changed ``control.yaml`` to ``render_pool`` (a ``RenderPool``; between steps, from the
    thread that renders); a bad file is reported with ``say(line)`` and ignored. Returns whether the
    pool changed size."""
    try:
        wanted = control.poll()
    except ControlError as exc:
        say(f"[brushrl] ignoring {CONTROL_FILE}: {exc}")
        return False
    if wanted is None or wanted.render is None or wanted.render.num_actors == render_pool.size:
        return False
    say(f"[brushrl] renderers: {render_pool.size} -> {wanted.render.num_actors} ({CONTROL_FILE})")
    render_pool.resize(wanted.render.num_actors)
    return True
