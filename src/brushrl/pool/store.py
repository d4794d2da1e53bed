"""A reference pool version on disk: one folder with ``pool.json``, ``manifest.jsonl`` and PNGs.

Layout of one pool version (any folder; ``pools/<name>`` by convention)::

    pool.json         PoolMeta: name, version, parent, published, content_hash
    manifest.jsonl    one PoolRow (JSON object) per line
    <id>.png          one painting per row (the row's ``png``)
    .lock             lock file of writers (not part of the pool)

Manifest row::

    {"id": "peach_hibiscus-0", "tier": "love", "png": "peach_hibiscus-0.png",
     "prompt": "a peach hibiscus", "source": "brushrl-corpus", "sha256": "<hex of the PNG>",
     "code": "<sketch source>", "rated_by": "brushrl-dev", "rated_at": "2026-11-30T13:00:00Z",
     "round": 0, "parent_id": null}

Invariants:

* A **published** version is immutable: ``pool.json`` holds the SHA-256 of ``manifest.jsonl``
  (``content_hash``), the manifest holds the SHA-256 of every PNG, so loading detects any change;
  ``PoolWriter`` refuses to touch it. New work goes into a **draft** made with ``new_version``,
  whose ``pool.json`` records its parent's version id (``name@vN+hash12``).
* Every manifest write is atomic (temporary file, fsync, ``os.replace``, fsync of the folder)
  under an inter-process lock (``filelock``), so a killed writer leaves the old or the new
  manifest, never a torn one, and two writers never lose each other's rows.
* A folder without ``pool.json`` loads as an unpublished draft named after the folder, version 0.
"""

from __future__ import annotations

import hashlib
import io
import os
import random
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from filelock import FileLock
from PIL import Image, UnidentifiedImageError
from pydantic import BaseModel, ConfigDict, Field, ValidationError

#: Tiers a painting can have. ``unrated``: added by ``pool build``, not yet seen by a person.
TIERS = ("love", "good", "reject", "unrated")

#: Kinds of load problem (``PoolProblem.kind``).
PROBLEM_KINDS = (
    "missing_manifest", "bad_meta", "bad_row", "unknown_tier", "duplicate_id", "missing_image",
    "corrupt_image", "hash_mismatch", "manifest_changed",
)

_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
LOCK_TIMEOUT_S = 30.0
"""Seconds a writer waits for the pool lock before ``filelock.Timeout``."""


def utc_now() -> str:
    """The current UTC time as ISO 8601 with a ``Z`` suffix, to the second."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def sha256_hex(data: bytes) -> str:
    """Lower-case hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


class PoolRow(BaseModel):
    """One manifest line. ``tier`` is checked by the loader (so an unknown tier is its own kind)."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=_ID.pattern)
    """Unique within the pool; letters, digits, ``_.-`` (it names files)."""
    tier: str
    """One of ``TIERS``."""
    png: str = Field(pattern=r"^[^/\\]+\.png$")
    """PNG file name inside the pool folder (no directories)."""
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    """SHA-256 of the PNG bytes."""
    prompt: str = ""
    """The subject/prompt the painting answers (untrusted text)."""
    source: str = ""
    """Who made it: a model name, ``brushrl-corpus`` or a person (untrusted text)."""
    code: str = ""
    """The p5.brush sketch source (untrusted text, never executed by the pool tools)."""
    rated_by: str | None = None
    """Who set ``tier`` (None while unrated)."""
    rated_at: str | None = None
    """When ``tier`` was set, ISO 8601 UTC."""
    round: int = Field(0, ge=0)
    """Refinement round of ``pool build`` (0: first draft)."""
    parent_id: str | None = None
    """The id this painting was refined from (round > 0), else None."""


class PoolMeta(BaseModel):
    """``pool.json`` of one pool version."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=_ID.pattern)
    version: int = Field(ge=0)
    """1, 2, ... (0 only for a legacy folder without ``pool.json``)."""
    parent: str | None = None
    """Version id (``name@vN+hash12``) of the version this one was made from, or None."""
    published: bool = False
    """Published versions are immutable (``content_hash`` set)."""
    content_hash: str | None = None
    """SHA-256 of ``manifest.jsonl`` at publication (covers every PNG through its row hash)."""
    created_at: str = Field(default_factory=utc_now)
    published_at: str | None = None
    note: str = ""
    """Free text: how this version was made."""


@dataclass(frozen=True)
class PoolProblem:
    """One thing wrong with a pool folder: ``kind`` (one of ``PROBLEM_KINDS``) and the ``file``."""

    kind: str
    file: Path
    message: str

    def __str__(self) -> str:
        return f"{self.file}: [{self.kind}] {self.message}"


class PoolError(ValueError):
    """A pool folder is missing, malformed or inconsistent. ``problems`` lists every problem found,
    each naming its file; the message has one line per problem."""

    def __init__(self, problems: list[PoolProblem] | str):
        if isinstance(problems, str):
            problems = [PoolProblem("bad_meta", Path("."), problems)]
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))

    @property
    def kinds(self) -> set[str]:
        return {p.kind for p in self.problems}


@dataclass(frozen=True)
class PoolEntry:
    """One reference painting: ``path`` is the absolute PNG path."""

    id: str
    tier: str
    path: Path
    prompt: str
    source: str
    sha256: str
    code: str = ""
    rated_by: str | None = None
    rated_at: str | None = None
    round: int = 0
    parent_id: str | None = None


def read_meta(root: Path) -> PoolMeta:
    """``root/pool.json``, or a draft named after the folder (version 0) when there is none.

    Raises:
        PoolError: ``bad_meta`` (unreadable JSON or a bad field, named).
    """
    path = root / "pool.json"
    if not path.exists():
        return PoolMeta(name=safe_name(root.name), version=0, created_at="")
    try:
        return PoolMeta.model_validate_json(path.read_bytes())
    except ValidationError as exc:
        fields = "; ".join(f"{'.'.join(map(str, e['loc'])) or '<root>'}: {e['msg']}" for e in exc.errors())
        raise PoolError([PoolProblem("bad_meta", path, fields)]) from None


def safe_name(name: str) -> str:
    """``name`` with characters outside ``[A-Za-z0-9_.-]`` replaced, usable as a pool name or id."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name).lstrip("_.-") or "pool"


def read_rows(manifest: Path, data: bytes | None = None) -> tuple[list[PoolRow], list[PoolProblem]]:
    """Parse ``manifest.jsonl`` (or its bytes ``data``) without touching images: the valid rows
    and the bad-row problems."""
    rows, problems = [], []
    text = manifest.read_text() if data is None else data.decode()
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(PoolRow.model_validate_json(line))
        except ValidationError as exc:
            fields = "; ".join(f"{'.'.join(map(str, e['loc'])) or '<row>'}: {e['msg']}" for e in exc.errors())
            problems.append(PoolProblem("bad_row", Path(f"{manifest}:{lineno}"), fields))
    return rows, problems


def manifest_text(rows: list[PoolRow]) -> str:
    """The manifest file for ``rows``: one compact JSON object per line, fields in declared order."""
    return "".join(r.model_dump_json() + "\n" for r in rows)


class ReferencePool:
    """One pool version, validated on load (every problem is collected before raising).

    Attributes:
        root: the folder. meta: its ``PoolMeta``. entries: ``PoolEntry`` per row, manifest order.

    Raises:
        PoolError: with one ``PoolProblem`` per problem: ``missing_manifest``, ``bad_meta``,
            ``bad_row`` (invalid JSON or field), ``unknown_tier``, ``duplicate_id``,
            ``missing_image``, ``corrupt_image`` (Pillow cannot decode it), ``hash_mismatch``
            (PNG bytes differ from the row's ``sha256``) and ``manifest_changed`` (a published
            manifest whose SHA-256 differs from ``pool.json``).
    """

    def __init__(self, root: str | Path, check_images: bool = True):
        self.root = Path(root)
        manifest = self.root / "manifest.jsonl"
        if not manifest.is_file():
            raise PoolError([PoolProblem("missing_manifest", manifest, "reference pool manifest not found")])
        self.meta = read_meta(self.root)
        data = manifest.read_bytes()
        self.manifest_hash = sha256_hex(data)
        rows, problems = read_rows(manifest)
        if self.meta.published and self.meta.content_hash != self.manifest_hash:
            problems.append(PoolProblem(
                "manifest_changed", manifest,
                f"published version {self.meta.name}@v{self.meta.version} was modified "
                f"(SHA-256 {self.manifest_hash[:12]}, pool.json says {str(self.meta.content_hash)[:12]})",
            ))
        entries: list[PoolEntry] = []
        seen: set[str] = set()
        for row in rows:
            path = self.root / row.png
            where = Path(f"{manifest}:{row.id}")
            if row.tier not in TIERS:
                problems.append(PoolProblem("unknown_tier", where, f"unknown tier {row.tier!r} (expected one of {TIERS})"))
            if row.id in seen:
                problems.append(PoolProblem("duplicate_id", where, f"duplicate id {row.id!r}"))
            seen.add(row.id)
            if check_images:
                problems.extend(_check_image(path, row.sha256))
            entries.append(PoolEntry(
                id=row.id, tier=row.tier, path=path, prompt=row.prompt, source=row.source,
                sha256=row.sha256, code=row.code, rated_by=row.rated_by, rated_at=row.rated_at,
                round=row.round, parent_id=row.parent_id,
            ))
        if problems:
            raise PoolError(problems)
        self.entries = entries

    @property
    def version_id(self) -> str:
        """``name@vN+<first 12 hex of the manifest SHA-256>``: names this exact content."""
        return f"{self.meta.name}@v{self.meta.version}+{self.manifest_hash[:12]}"

    def version_record(self) -> dict:
        """What a run directory records about the pool it used (JSON-ready)."""
        return {
            "path": str(self.root.resolve()), "version_id": self.version_id, "name": self.meta.name,
            "version": self.meta.version, "published": self.meta.published, "parent": self.meta.parent,
            "manifest_sha256": self.manifest_hash,
            "counts": {t: len(self.tier(t)) for t in TIERS},
        }

    def get(self, entry_id: str) -> PoolEntry:
        """The entry with ``entry_id``; raises ``KeyError`` if absent."""
        for e in self.entries:
            if e.id == entry_id:
                return e
        raise KeyError(entry_id)

    def tier(self, name: str) -> list[PoolEntry]:
        """Entries of one tier, in manifest order."""
        return [e for e in self.entries if e.tier == name]

    def sample(self, tiers: list[str], k: int, seed: int) -> list[PoolEntry]:
        """Draw ``k`` references per tier (fewer if a tier is smaller), reproducibly from ``seed``.

        Every member of a GRPO group is scored against the same draw (the group seed), so that
        the group's rewards are comparable (HF reproduction: the draw alone moved a judge score
        from 0.250 to 0.625 on one painting).
        """
        return self.draw({name: k for name in tiers}, seed)

    def draw(self, mix: Mapping[str, int], seed: int) -> list[PoolEntry]:
        """Draw ``mix[tier]`` references from each tier (fewer if a tier is smaller), in ``mix``
        order, reproducibly from ``seed`` (``sample`` is the equal mix)."""
        rng = random.Random(seed)
        out: list[PoolEntry] = []
        for name, k in mix.items():
            members = self.tier(name)
            out.extend(rng.sample(members, min(k, len(members))))
        return out


def _check_image(path: Path, expected_sha: str) -> list[PoolProblem]:
    if not path.is_file():
        return [PoolProblem("missing_image", path, "image listed in the manifest is missing")]
    data = path.read_bytes()
    problems = []
    if sha256_hex(data) != expected_sha:
        problems.append(PoolProblem("hash_mismatch", path, "SHA-256 of the PNG differs from the manifest"))
    try:
        with Image.open(io.BytesIO(data)) as img:
            img.verify()  # checks structure and CRCs; load() would decode the pixels too
        with Image.open(io.BytesIO(data)) as img:
            img.load()
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        problems.append(PoolProblem("corrupt_image", path, f"not a readable image ({exc})"))
    return problems


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` durably: readers and a crash see the old or the new file.

    Writes a temporary file in the same folder, fsyncs it, ``os.replace``s it over ``path`` and
    fsyncs the folder (so the rename itself survives a power cut).
    """
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


class PoolWriter:
    """Changes a draft pool version: add paintings, rate them, publish.

    Each change takes the pool lock, re-reads the manifest (another process may have written it),
    applies the change and writes the manifest atomically before returning; a change that returned
    is on disk.

    Raises:
        PoolError: ``root`` is published (immutable) or unreadable.
    """

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.manifest = self.root / "manifest.jsonl"
        self.meta = read_meta(self.root)
        if self.meta.published:
            raise PoolError([PoolProblem(
                "bad_meta", self.root / "pool.json",
                f"{self.meta.name}@v{self.meta.version} is published and immutable: "
                f"make a draft with `brushrl pool new-version {self.root} OUT`",
            )])
        if not self.manifest.is_file():
            raise PoolError([PoolProblem("missing_manifest", self.manifest, "reference pool manifest not found")])
        self._lock = FileLock(str(self.root / ".lock"), timeout=LOCK_TIMEOUT_S)
        self._cache: tuple[bytes, list[PoolRow]] | None = None

    def _load_locked(self) -> list[PoolRow]:
        """The manifest rows (a new list); call with the lock held. The file is read every time
        but parsed again only when its bytes differ from the last parse (comparing bytes is
        milliseconds, parsing thousands of rows with their code is not; file stat times are too
        coarse to tell two quick writes of another process apart)."""
        data = self.manifest.read_bytes()
        if self._cache is None or self._cache[0] != data:
            rows, problems = read_rows(self.manifest, data)
            if problems:
                raise PoolError(problems)
            self._cache = (data, rows)
        return list(self._cache[1])

    @contextmanager
    def _edit(self) -> Iterator[list[PoolRow]]:
        """Yield the current rows under the lock; write them back atomically on normal exit."""
        with self._lock:
            if read_meta(self.root).published:
                raise PoolError(f"{self.root}: published meanwhile; it is immutable")
            rows = self._load_locked()
            yield rows
            data = manifest_text(rows).encode()
            atomic_write(self.manifest, data)
            self._cache = (data, list(rows))

    def rows(self) -> list[PoolRow]:
        """The manifest rows as they are on disk now (a new list; the rows are not to be mutated)."""
        with self._lock:
            return self._load_locked()

    def add(self, row: PoolRow, png: bytes) -> None:
        """Add a painting: writes ``row.png`` (atomically) and appends ``row``.

        Raises:
            ValueError: ``row.sha256`` does not match ``png`` or the id exists already.
        """
        if sha256_hex(png) != row.sha256:
            raise ValueError(f"{row.id}: sha256 does not match the PNG bytes")
        with self._edit() as rows:
            if any(r.id == row.id for r in rows):
                raise ValueError(f"{row.id}: id exists in {self.manifest}")
            atomic_write(self.root / row.png, png)
            rows.append(row)

    def rate(self, entry_id: str, tier: str, rated_by: str) -> PoolRow:
        """Set the tier of ``entry_id`` (``unrated`` clears the rating, e.g. for undo).

        Returns:
            The row as it was before (so a caller can undo).

        Raises:
            KeyError: no such id. ValueError: unknown tier.
        """
        if tier not in TIERS:
            raise ValueError(f"unknown tier {tier!r} (expected one of {TIERS})")
        with self._edit() as rows:
            for i, r in enumerate(rows):
                if r.id == entry_id:
                    before = r
                    rated = tier != "unrated"
                    rows[i] = r.model_copy(update={
                        "tier": tier, "rated_by": rated_by if rated else None,
                        "rated_at": utc_now() if rated else None,
                    })
                    return before
            raise KeyError(entry_id)

    def publish(self, note: str | None = None) -> PoolMeta:
        """Validate the whole version (images included), then freeze it: ``published``, the
        manifest's SHA-256 in ``pool.json``. Raises ``PoolError`` with every problem found."""
        with self._lock:
            pool = ReferencePool(self.root)
            meta = self.meta.model_copy(update={
                "published": True, "content_hash": pool.manifest_hash, "published_at": utc_now(),
                "created_at": self.meta.created_at or utc_now(),
                "version": max(self.meta.version, 1), **({"note": note} if note is not None else {}),
            })
            atomic_write(self.root / "pool.json", (meta.model_dump_json(indent=2) + "\n").encode())
        self.meta = meta
        return meta


def init_pool(root: str | Path, name: str, note: str = "") -> PoolWriter:
    """Create an empty draft version 1 at ``root`` (which must not hold a manifest)."""
    root = Path(root)
    if (root / "manifest.jsonl").exists():
        raise FileExistsError(f"{root}/manifest.jsonl exists")
    root.mkdir(parents=True, exist_ok=True)
    meta = PoolMeta(name=name, version=1, note=note)
    atomic_write(root / "pool.json", (meta.model_dump_json(indent=2) + "\n").encode())
    atomic_write(root / "manifest.jsonl", b"")
    return PoolWriter(root)


def new_version(parent: str | Path, root: str | Path, note: str = "",
                keep: Callable[[PoolEntry], bool] | None = None) -> PoolWriter:
    """Start a draft at ``root`` from ``parent`` (validated first): its rows (those ``keep``
    accepts; all by default) and PNGs, version ``parent.version + 1``, ``parent`` recorded.

    PNGs are hard-linked when the file system allows (published files are never written again),
    else copied.

    Raises:
        PoolError: the parent does not load. FileExistsError: ``root`` holds a manifest.
    """
    src = ReferencePool(parent)
    root = Path(root)
    if (root / "manifest.jsonl").exists():
        raise FileExistsError(f"{root}/manifest.jsonl exists")
    root.mkdir(parents=True, exist_ok=True)
    rows, _ = read_rows(src.root / "manifest.jsonl")
    kept = {e.id for e in src.entries if keep is None or keep(e)}
    rows = [r for r in rows if r.id in kept]
    for r in rows:
        target = root / r.png
        target.unlink(missing_ok=True)
        try:
            os.link(src.root / r.png, target)
        except OSError:
            shutil.copy2(src.root / r.png, target)
    meta = PoolMeta(name=src.meta.name, version=src.meta.version + 1, parent=src.version_id, note=note)
    atomic_write(root / "manifest.jsonl", manifest_text(rows).encode())
    atomic_write(root / "pool.json", (meta.model_dump_json(indent=2) + "\n").encode())
    return PoolWriter(root)
