"""Export / import a pool version as a Hugging Face ``datasets`` folder (Parquet with images).

Exported layout (what ``datasets.load_dataset(folder)`` and the Hub read)::

    README.md                          dataset card: features, the pool's version id
    brushrl_pool.json                  the pool's pool.json plus its version id
    data/train-00000-of-00001.parquet  one row per painting: ``image`` (datasets ``Image``:
                                       PNG bytes), then the PoolRow fields except ``png``

Import accepts a local folder or a dataset id (``datasets.load_dataset``; offline it needs
``HF_DATASETS_OFFLINE=1`` and a local path) and writes a new draft pool whose ``parent`` is the
exported version id (from ``brushrl_pool.json`` when the folder has one, else ``hf:<source>``).
Every PNG's SHA-256 is checked against the row's ``sha256`` column.
"""

from __future__ import annotations

import json
from pathlib import Path

from brushrl.pool.store import (
    PoolError, PoolMeta, PoolProblem, PoolRow, ReferencePool, safe_name, atomic_write, manifest_text,
    sha256_hex,
)

#: PoolRow fields exported as columns (``png`` becomes the ``image`` column).
COLUMNS = tuple(f for f in PoolRow.model_fields if f != "png")
DATA_FILE = "data/train-00000-of-00001.parquet"


def _features():
    from datasets import Features, Image, Value

    kinds = {"round": Value("int64")}
    return Features({"image": Image(), **{c: kinds.get(c, Value("string")) for c in COLUMNS}})


def export_pool(pool_root: str | Path, out: str | Path) -> Path:
    """Write pool ``pool_root`` (validated first) as a datasets folder at ``out``.

    Returns:
        ``out`` as a Path. Raises ``PoolError`` if the pool does not load and
        ``FileExistsError`` if ``out`` already holds a dataset.
    """
    from datasets import Dataset

    pool = ReferencePool(pool_root)
    out = Path(out)
    if (out / DATA_FILE).exists():
        raise FileExistsError(f"{out / DATA_FILE} exists")
    (out / "data").mkdir(parents=True, exist_ok=True)
    rows = [
        {"image": {"bytes": e.path.read_bytes(), "path": e.path.name},
         **{c: getattr(e, c) for c in COLUMNS}}
        for e in pool.entries
    ]
    ds = Dataset.from_list(rows, features=_features())
    ds.to_parquet(str(out / DATA_FILE))
    meta = {**pool.meta.model_dump(mode="json"), "version_id": pool.version_id}
    atomic_write(out / "brushrl_pool.json", (json.dumps(meta, indent=2) + "\n").encode())
    counts = ", ".join(f"{t}: {n}" for t, n in pool.version_record()["counts"].items())
    card = (
        "---\nconfigs:\n- config_name: default\n  data_files:\n  - split: train\n    path: data/train-*\n"
        "tags:\n- brushrl\n- p5.brush\n---\n"
        f"# brushrl reference pool {pool.version_id}\n\n"
        f"{len(pool.entries)} paintings ({counts}). Columns: image (PNG), {', '.join(COLUMNS)}.\n"
        "Import with `brushrl pool import THIS_FOLDER_OR_ID OUT`.\n"
    )
    atomic_write(out / "README.md", card.encode())
    return out


def import_pool(source: str, out: str | Path, name: str | None = None, cache_dir: str | None = None) -> ReferencePool:
    """Load a datasets folder or id (``split="train"``) into a new draft pool at ``out``.

    Args:
        source: local folder (as written by ``export_pool``) or a dataset id.
        out: the new pool folder (must not hold a manifest).
        name: pool name (default: the exported pool's name, else the folder/id's last part).
        cache_dir: datasets cache (default: the library's).

    Returns:
        The imported pool, loaded and validated.

    Raises:
        PoolError: a row whose image bytes do not match its ``sha256`` (``hash_mismatch``), or a
            bad field (``bad_row``); nothing is written then. FileExistsError: ``out`` is a pool.
    """
    from datasets import Image, load_dataset

    out = Path(out)
    if (out / "manifest.jsonl").exists():
        raise FileExistsError(f"{out}/manifest.jsonl exists")
    ds = load_dataset(source, split="train", cache_dir=cache_dir).cast_column("image", Image(decode=False))
    exported = {}
    if (Path(source) / "brushrl_pool.json").is_file():
        exported = json.loads((Path(source) / "brushrl_pool.json").read_text())
    rows, images, problems = [], {}, []
    for i, rec in enumerate(ds):
        data = rec["image"]["bytes"]
        where = Path(f"{source}:row{i}")
        try:
            row = PoolRow(png=f"{rec['id']}.png", **{c: rec[c] for c in COLUMNS if rec.get(c) is not None})
        except ValueError as exc:
            problems.append(PoolProblem("bad_row", where, str(exc).replace("\n", " ")))
            continue
        if sha256_hex(data) != row.sha256:
            problems.append(PoolProblem("hash_mismatch", where, f"{row.id}: image bytes differ from the sha256 column"))
        rows.append(row)
        images[row.png] = data
    if problems:
        raise PoolError(problems)
    out.mkdir(parents=True, exist_ok=True)
    for file, data in images.items():
        atomic_write(out / file, data)
    meta = PoolMeta(
        name=name or exported.get("name") or safe_name(Path(source.rstrip("/")).name),
        version=int(exported.get("version", 0)) + 1,
        parent=exported.get("version_id") or f"hf:{source}",
        note=f"imported from {source}",
    )
    atomic_write(out / "manifest.jsonl", manifest_text(rows).encode())
    atomic_write(out / "pool.json", (meta.model_dump_json(indent=2) + "\n").encode())
    return ReferencePool(out)
