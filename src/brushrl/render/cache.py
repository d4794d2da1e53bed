"""Render cache: identical sketches are not rendered twice.

Key: SHA-256 of (code, seed, size, the renderer's environment), where the environment string
(``RendererWorker.ping()["env"]``) names the p5 + p5.brush file contents (SHA-256 of the bytes the
page loads, stricter than version numbers), the Chromium version and the GL backend: a different
library build, browser or backend gives a different painting and a different key.

Only ``ok`` and ``error`` results are cached: both are deterministic outcomes of the sketch (a
thrown error throws again). A ``timeout`` may be the machine's load, and ``infra`` is never the
sketch's, so neither is stored. A hit is a copy of the stored result with ``cache_hit=True``,
``wall_s = cpu_s = 0`` and ``attempts = 0`` (nothing was rendered); ``draw_s`` and the telemetry
are the original render's.

Two tiers: an in-memory LRU of ``max_entries`` results (PNG bytes included; at 600x600 a painting
is 0.2-0.6 MB, so 1024 entries hold up to ~0.6 GB) and, optionally, a folder
(``<dir>/<key[:2]>/<key>.json`` + ``.png``, written atomically) that survives restarts and can be
shared by runs on one machine.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
from collections import OrderedDict
from pathlib import Path

from brushrl.types import RenderResult

CACHED_STATUSES = ("ok", "error")


def library_digest(assets: dict[str, bytes]) -> str:
    """SHA-256 (hex, first 16 digits) of the library files the page loads, in path order."""
    h = hashlib.sha256()
    for path in sorted(assets):
        h.update(path.encode() + b"\0" + assets[path] + b"\0")
    return h.hexdigest()[:16]


def render_key(code: str, seed: int, size: int, env: str) -> str:
    """Cache key (64 hex digits) of one render; ``env`` as in the module docstring."""
    blob = json.dumps([code, int(seed) & 0xFFFFFFFF, int(size), env], ensure_ascii=False).encode()
    return hashlib.sha256(blob).hexdigest()


class RenderCache:
    """In-memory LRU of render results with an optional on-disk tier.

    Args:
        max_entries: results kept in memory (0: no memory tier).
        disk_dir: folder of the disk tier (created), or None.

    Attributes:
        hits, misses: lookups answered / not answered since creation.
    """

    def __init__(self, max_entries: int = 1024, disk_dir: str | Path | None = None):
        self.max_entries = max_entries
        self.disk_dir = Path(disk_dir) if disk_dir else None
        if self.disk_dir:
            self.disk_dir.mkdir(parents=True, exist_ok=True)
        self._mem: OrderedDict[str, RenderResult] = OrderedDict()
        self.hits = 0
        self.misses = 0

    @property
    def hit_rate(self) -> float:
        """hits / lookups (0.0 before the first lookup)."""
        n = self.hits + self.misses
        return self.hits / n if n else 0.0

    def stats(self) -> dict:
        """``{"hits", "misses", "hit_rate", "entries"}``."""
        return {"hits": self.hits, "misses": self.misses, "hit_rate": self.hit_rate, "entries": len(self._mem)}

    def get(self, key: str) -> RenderResult | None:
        """The cached result for ``key`` as a hit copy (see the module docstring), or None."""
        found = self._mem.get(key)
        if found is not None:
            self._mem.move_to_end(key)
        elif self.disk_dir:
            found = self._read(key)
            if found is not None:
                self._remember(key, found)
        if found is None:
            self.misses += 1
            return None
        self.hits += 1
        return as_hit(found)

    def put(self, key: str, result: RenderResult) -> bool:
        """Store ``result`` if its status is cacheable; returns whether it was stored."""
        if result.status not in CACHED_STATUSES or result.cache_hit:
            return False
        self._remember(key, result)
        if self.disk_dir:
            self._write(key, result)
        return True

    def _remember(self, key: str, result: RenderResult) -> None:
        if self.max_entries <= 0:
            return
        self._mem[key] = result
        self._mem.move_to_end(key)
        while len(self._mem) > self.max_entries:
            self._mem.popitem(last=False)

    def _paths(self, key: str) -> tuple[Path, Path]:
        folder = self.disk_dir / key[:2]
        return folder / f"{key}.json", folder / f"{key}.png"

    def _write(self, key: str, result: RenderResult) -> None:
        meta, png = self._paths(key)
        meta.parent.mkdir(exist_ok=True)
        if result.png is not None:
            _atomic_write(png, result.png)
        record = {k: v for k, v in dataclasses.asdict(result).items() if k != "png"}
        _atomic_write(meta, json.dumps(record).encode())  # written last: its presence means complete

    def _read(self, key: str) -> RenderResult | None:
        meta, png = self._paths(key)
        try:
            record = json.loads(meta.read_text())
            data = png.read_bytes() if record["status"] == "ok" else None
            return RenderResult(png=data, **record)
        except (OSError, ValueError, TypeError, KeyError):  # absent, partial or from another version
            return None


def as_hit(result: RenderResult) -> RenderResult:
    """A copy of a stored result as served from the cache."""
    return dataclasses.replace(result, cache_hit=True, wall_s=0.0, cpu_s=0.0, attempts=0,
                               js_errors=list(result.js_errors), console=list(result.console),
                               refused=list(result.refused), brush_calls=dict(result.brush_calls), phases={},
                               forbidden=dict(result.forbidden))


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
