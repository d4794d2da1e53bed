"""``brushrl pool stats``: counts, near-duplicates by perceptual hash, palette spread, contact sheets."""

from __future__ import annotations

import io
import json
from pathlib import Path

from PIL import Image, ImageEnhance

from brushrl.cli import main
from brushrl.pool.stats import pool_stats
from brushrl.pool.store import PoolRow, ReferencePool, init_pool, sha256_hex

STARTER = Path(__file__).resolve().parents[1] / "pools" / "starter"


def test_stats_counts_duplicates_and_contact_sheets(tmp_path):
    src = {e.id: e for e in ReferencePool(STARTER).entries}
    w = init_pool(tmp_path / "p", "stats")
    picks = [("rose-0", "love"), ("tulip-0", "good"), ("lotus-0", "good"), ("zinnia-0", "unrated")]
    for pid, tier in picks:
        e = src[pid]
        w.add(PoolRow(id=pid, tier=tier, png=f"{pid}.png", sha256=e.sha256, prompt=e.prompt, source="corpus"),
              e.path.read_bytes())
    # a near-copy of the rose: slightly brighter, re-encoded (different bytes, same picture)
    with Image.open(src["rose-0"].path) as img:
        buf = io.BytesIO()
        ImageEnhance.Brightness(img.convert("RGB")).enhance(1.05).save(buf, "PNG")
    data = buf.getvalue()
    w.add(PoolRow(id="rose-copy", tier="unrated", png="rose-copy.png", sha256=sha256_hex(data),
                  prompt="a red rose", source="model-x", round=1), data)
    stats = pool_stats(ReferencePool(tmp_path / "p"), tmp_path / "out")
    assert stats["tiers"] == {"love": 1, "good": 2, "reject": 0, "unrated": 2}
    assert stats["prompts"]["a red rose"] == 2 and stats["sources"] == {"corpus": 4, "model-x": 1}
    assert stats["rounds"] == {"0": 4, "1": 1}
    pairs = {(p["a"], p["b"]) for p in stats["near_duplicates"]["pairs"]}
    assert ("rose-0", "rose-copy") in pairs
    assert ("lotus-0", "tulip-0") not in pairs and ("rose-0", "zinnia-0") not in pairs
    spread = stats["palette_spread_delta_e"]
    assert spread["love"] == 0.0 and spread["good"] > 1.0 and spread["reject"] is None
    assert set(stats["contact_sheets"]) == {"love", "good", "unrated"}
    with Image.open(stats["contact_sheets"]["good"]) as sheet:
        assert sheet.width > 2 * 160 and sheet.height > 160
        # the first thumbnail holds the tulip's pixels, not a blank cell
        assert len(sheet.crop((6, 28, 166, 188)).getcolors(maxcolors=1 << 16) or []) > 50
    assert json.loads((tmp_path / "out" / "stats.json").read_text())["paintings"] == 5


def test_stats_cli_writes_next_to_pool_by_default(tmp_path, capsys):
    import shutil

    shutil.copytree(STARTER, tmp_path / "starter")
    assert main(["pool", "stats", str(tmp_path / "starter")]) == 0
    assert (tmp_path / "starter.stats" / "contact_love.png").is_file()
    assert (tmp_path / "starter.stats" / "contact_good.png").is_file()
    assert "near-duplicate" in capsys.readouterr().out
