"""Pool versions on disk: validation per problem kind, drafts, publication, atomic concurrent
writes, and the Hugging Face datasets export/import round trip (offline, local folder)."""

from __future__ import annotations

import io
import json
import multiprocessing as mp
import shutil
from pathlib import Path

import pytest
from PIL import Image

from brushrl.pool.store import (
    PoolError, PoolRow, PoolWriter, ReferencePool, init_pool, new_version, sha256_hex,
)

STARTER = Path(__file__).resolve().parents[1] / "pools" / "starter"


def png_bytes(colour: tuple[int, int, int], size: int = 32) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (size, size), colour).save(buf, "PNG")
    return buf.getvalue()


def make_pool(root: Path, n: int = 3, tier: str = "unrated") -> PoolWriter:
    """A draft pool with ``n`` flat-colour paintings (ids p0..p{n-1})."""
    w = init_pool(root, "test")
    for i in range(n):
        data = png_bytes((40 * i, 100, 200 - 40 * i))
        w.add(PoolRow(id=f"p{i}", tier=tier, png=f"p{i}.png", sha256=sha256_hex(data),
                      prompt=f"prompt {i % 2}", source="unit", code=f"// sketch {i}"), data)
    return w


def rewrite_rows(root: Path, edit) -> None:
    rows = [json.loads(line) for line in (root / "manifest.jsonl").read_text().splitlines()]
    edit(rows)
    (root / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def load_problems(root: Path) -> list:
    with pytest.raises(PoolError) as err:
        ReferencePool(root)
    return err.value.problems


def test_starter_pool_is_published_and_valid():
    pool = ReferencePool(STARTER)
    assert pool.meta.published and pool.meta.version == 1
    assert len(pool.tier("love")) == 8 and len(pool.tier("good")) == 8
    assert pool.version_id.startswith("starter@v1+")


def test_missing_manifest(tmp_path):
    (problem,) = load_problems(tmp_path)
    assert problem.kind == "missing_manifest" and problem.file == tmp_path / "manifest.jsonl"


def test_missing_image_names_file(tmp_path):
    make_pool(tmp_path)
    (tmp_path / "p1.png").unlink()
    (problem,) = load_problems(tmp_path)
    assert problem.kind == "missing_image" and problem.file == tmp_path / "p1.png"


def test_corrupt_image_with_matching_hash(tmp_path):
    make_pool(tmp_path)
    broken = png_bytes((1, 2, 3))[:60]  # a truncated PNG whose hash the manifest records
    (tmp_path / "p2.png").write_bytes(broken)
    rewrite_rows(tmp_path, lambda rows: rows[2].update(sha256=sha256_hex(broken)))
    (problem,) = load_problems(tmp_path)
    assert problem.kind == "corrupt_image" and problem.file == tmp_path / "p2.png"


def test_hash_mismatch(tmp_path):
    make_pool(tmp_path)
    (tmp_path / "p0.png").write_bytes(png_bytes((9, 9, 9)))  # a valid PNG, other bytes
    (problem,) = load_problems(tmp_path)
    assert problem.kind == "hash_mismatch" and problem.file == tmp_path / "p0.png"


def test_unknown_tier(tmp_path):
    make_pool(tmp_path)
    rewrite_rows(tmp_path, lambda rows: rows[1].update(tier="meh"))
    (problem,) = load_problems(tmp_path)
    assert problem.kind == "unknown_tier" and "p1" in str(problem.file) and "'meh'" in problem.message


def test_duplicate_id(tmp_path):
    make_pool(tmp_path)
    rewrite_rows(tmp_path, lambda rows: rows[2].update(id="p0", png="p2.png"))
    (problem,) = load_problems(tmp_path)
    assert problem.kind == "duplicate_id" and "p0" in problem.message


def test_bad_row_names_line_and_field(tmp_path):
    make_pool(tmp_path)
    rewrite_rows(tmp_path, lambda rows: rows[1].pop("sha256"))
    (problem,) = load_problems(tmp_path)
    assert problem.kind == "bad_row" and str(problem.file).endswith("manifest.jsonl:2")
    assert "sha256" in problem.message


def test_every_problem_is_reported_at_once(tmp_path):
    make_pool(tmp_path, n=4)
    (tmp_path / "p3.png").unlink()
    rewrite_rows(tmp_path, lambda rows: (rows[0].update(tier="meh"), rows[1].update(id="p2", png="p1.png")))
    kinds = sorted(p.kind for p in load_problems(tmp_path))
    assert kinds == ["duplicate_id", "missing_image", "unknown_tier"]


def test_published_version_is_immutable(tmp_path):
    w = make_pool(tmp_path / "v1")
    meta = w.publish()
    assert meta.published and meta.content_hash == sha256_hex((tmp_path / "v1" / "manifest.jsonl").read_bytes())
    with pytest.raises(PoolError, match="immutable"):
        PoolWriter(tmp_path / "v1")
    rewrite_rows(tmp_path / "v1", lambda rows: rows[0].update(tier="love"))  # edited behind our back
    (problem,) = load_problems(tmp_path / "v1")
    assert problem.kind == "manifest_changed"


def test_new_version_records_parent_and_keeps_parent_unchanged(tmp_path):
    make_pool(tmp_path / "v1").publish()
    parent = ReferencePool(tmp_path / "v1")
    w = new_version(tmp_path / "v1", tmp_path / "v2", keep=lambda e: e.id != "p1")
    w.rate("p0", "love", "tester")
    child = ReferencePool(tmp_path / "v2")
    assert child.meta.version == 2 and child.meta.parent == parent.version_id and not child.meta.published
    assert [e.id for e in child.entries] == ["p0", "p2"] and child.get("p0").tier == "love"
    again = ReferencePool(tmp_path / "v1")  # still valid, nothing changed
    assert again.manifest_hash == parent.manifest_hash and again.get("p0").tier == "unrated"


def test_rate_records_who_and_when_and_undo_clears(tmp_path):
    w = make_pool(tmp_path)
    before = w.rate("p1", "good", "ana")
    assert before.tier == "unrated"
    e = ReferencePool(tmp_path).get("p1")
    assert (e.tier, e.rated_by) == ("good", "ana") and e.rated_at.endswith("Z")
    w.rate("p1", "unrated", "ana")
    e = ReferencePool(tmp_path).get("p1")
    assert (e.tier, e.rated_by, e.rated_at) == ("unrated", None, None)
    with pytest.raises(KeyError):
        w.rate("nope", "good", "ana")
    with pytest.raises(ValueError, match="unknown tier"):
        w.rate("p1", "great", "ana")


def _rate_many(root: str, ids: list[str], tier: str) -> None:
    w = PoolWriter(root)
    for i in ids:
        w.rate(i, tier, f"proc-{tier}")


def test_two_processes_rating_at_once_lose_nothing(tmp_path):
    n = 40
    make_pool(tmp_path, n=n)
    ids = [f"p{i}" for i in range(n)]
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_rate_many, args=(str(tmp_path), ids[0::2], "love")),
             ctx.Process(target=_rate_many, args=(str(tmp_path), ids[1::2], "reject"))]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    pool = ReferencePool(tmp_path)
    assert {e.id for e in pool.tier("love")} == set(ids[0::2])
    assert {e.id for e in pool.tier("reject")} == set(ids[1::2])
    assert not list(tmp_path.glob(".manifest.jsonl.*.tmp"))


# ------------------------------------------------------------------------- datasets export/import
def test_hf_export_import_round_trip(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from datasets import load_dataset

    from brushrl.pool.hf import export_pool, import_pool

    src = ReferencePool(STARTER)
    export_pool(STARTER, tmp_path / "ds")
    ds = load_dataset(str(tmp_path / "ds"), split="train", cache_dir=str(tmp_path / "cache"))
    assert len(ds) == 16 and ds.features["image"].__class__.__name__ == "Image"
    assert ds[0]["image"].size == (256, 256)  # decodes as a PIL image
    pool = import_pool(str(tmp_path / "ds"), tmp_path / "imported", cache_dir=str(tmp_path / "cache"))
    assert pool.meta.parent == src.version_id and pool.meta.version == 2 and pool.meta.name == "starter"
    assert [(e.id, e.tier, e.sha256, e.code) for e in pool.entries] == [
        (e.id, e.tier, e.sha256, e.code) for e in src.entries]


def test_hf_import_rejects_tampered_image(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    import pyarrow.parquet as pq

    from brushrl.pool.hf import DATA_FILE, export_pool, import_pool

    make_pool(tmp_path / "pool", n=2)
    export_pool(tmp_path / "pool", tmp_path / "ds")
    table = pq.read_table(tmp_path / "ds" / DATA_FILE)
    rows = table.to_pylist()
    rows[1]["image"]["bytes"] = png_bytes((0, 0, 0))
    pq.write_table(table.from_pylist(rows, schema=table.schema), tmp_path / "ds" / DATA_FILE)
    with pytest.raises(PoolError) as err:
        import_pool(str(tmp_path / "ds"), tmp_path / "imported", cache_dir=str(tmp_path / "cache"))
    assert err.value.kinds == {"hash_mismatch"} and "p1" in str(err.value)
    assert not (tmp_path / "imported" / "manifest.jsonl").exists()


def test_copy_of_starter_loads(tmp_path):
    shutil.copytree(STARTER, tmp_path / "s")
    assert len(ReferencePool(tmp_path / "s").entries) == 16


def test_run_directory_records_the_pool_version(tmp_path):
    from brushrl.artifacts.run_dir import RunDir

    pool = ReferencePool(STARTER)
    run = RunDir(tmp_path / "run")
    run.save_pool(pool.version_record())
    record = json.loads((tmp_path / "run" / "pool.json").read_text())
    assert record["version_id"] == pool.version_id and record["published"] is True
    assert record["manifest_sha256"] == sha256_hex((STARTER / "manifest.jsonl").read_bytes())
    assert record["counts"] == {"love": 8, "good": 8, "reject": 0, "unrated": 0}


def test_cli_check_new_version_publish_and_rate_refusal(tmp_path, capsys):
    from brushrl.cli import main

    make_pool(tmp_path / "v1", n=3)
    (tmp_path / "v1" / "p2.png").unlink()
    rewrite_rows(tmp_path / "v1", lambda rows: rows[0].update(tier="great"))
    assert main(["pool", "check", str(tmp_path / "v1")]) == 1
    err = capsys.readouterr().err
    assert "2 problem(s)" in err and "[unknown_tier]" in err and f"{tmp_path / 'v1' / 'p2.png'}: [missing_image]" in err
    rewrite_rows(tmp_path / "v1", lambda rows: (rows[0].update(tier="reject"), rows.pop()))
    assert main(["pool", "publish", str(tmp_path / "v1")]) == 0
    assert main(["pool", "rate", str(tmp_path / "v1")]) == 1
    assert "immutable" in capsys.readouterr().err
    assert main(["pool", "new-version", str(tmp_path / "v1"), str(tmp_path / "v2"), "--drop-tier", "reject"]) == 0
    assert main(["pool", "check", str(tmp_path / "v2"), "--json"]) == 0
    record = json.loads(capsys.readouterr().out.split("\n", 1)[1])
    assert record["version"] == 2 and record["parent"].startswith("test@v1+") and record["counts"]["unrated"] == 1
