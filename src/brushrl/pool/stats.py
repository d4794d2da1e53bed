"""``brushrl pool stats POOL``: what a pool holds, how varied its colours are, what repeats.

Writes into ``--out`` (default ``<POOL>.stats/``)::

    stats.json            counts per tier / prompt / source / round, palette spread per tier,
                          near-duplicate pairs
    contact_<tier>.png    a contact sheet of every painting of each non-empty tier

* **Near-duplicates**: 64-bit perceptual hashes (``imagehash.phash``: DCT of a 32x32 grey image);
  two paintings are near-duplicates when their hashes differ in at most ``max_distance`` bits
  (default 6 of 64; pHash is grey-level, so the same composition in another colour also matches,
  which is what a pool that should be varied wants to know).
* **Palette spread** of a tier: each painting's mean colour in CIELAB (``skimage.color.rgb2lab``,
  D65), then the RMS CIE76 distance (Delta E units, ~2.3 = just noticeable) of those means from
  their centroid. 0: every painting has the same average colour.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from itertools import combinations
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from brushrl.pool.store import TIERS, PoolEntry, PoolError, ReferencePool

THUMB = 160
"""Contact-sheet thumbnail side (pixels)."""
COLUMNS = 6
"""Contact-sheet thumbnails per row."""


def mean_lab(path: Path) -> np.ndarray:
    """Mean CIELAB colour of a painting, shape (3,), float64 (L in 0..100)."""
    from skimage.color import rgb2lab

    with Image.open(path) as img:
        rgb = np.asarray(img.convert("RGB").resize((64, 64)), dtype=np.float64) / 255.0
    return rgb2lab(rgb).reshape(-1, 3).mean(axis=0)


def palette_spread(entries: list[PoolEntry]) -> float | None:
    """RMS Delta E (CIE76) of the paintings' mean Lab colours from their centroid; None if empty."""
    if not entries:
        return None
    labs = np.stack([mean_lab(e.path) for e in entries])
    return float(np.sqrt(((labs - labs.mean(axis=0)) ** 2).sum(axis=1).mean()))


def near_duplicates(entries: list[PoolEntry], max_distance: int = 6) -> list[dict]:
    """Pairs whose 64-bit pHashes differ in at most ``max_distance`` bits, closest first:
    ``[{"a": id, "b": id, "distance": bits}, ...]``."""
    import imagehash

    hashes = []
    for e in entries:
        with Image.open(e.path) as img:
            hashes.append((e.id, imagehash.phash(img)))
    pairs = [
        {"a": a, "b": b, "distance": int(ha - hb)}
        for (a, ha), (b, hb) in combinations(hashes, 2) if ha - hb <= max_distance
    ]
    return sorted(pairs, key=lambda p: (p["distance"], p["a"], p["b"]))


def contact_sheet(entries: list[PoolEntry], title: str) -> Image.Image:
    """One RGB image: a title line, then ``COLUMNS`` thumbnails per row, each captioned with its
    id and prompt (drawn as text, never interpreted)."""
    font = ImageFont.load_default()
    caption_h, title_h, pad = 30, 28, 6
    rows = max(1, -(-len(entries) // COLUMNS))
    cell_w, cell_h = THUMB + pad, THUMB + caption_h + pad
    sheet = Image.new("RGB", (COLUMNS * cell_w + pad, title_h + rows * cell_h + pad), "white")
    draw = ImageDraw.Draw(sheet)
    draw.text((pad, 8), title, fill="black", font=font)
    for i, e in enumerate(entries):
        x, y = pad + (i % COLUMNS) * cell_w, title_h + (i // COLUMNS) * cell_h
        with Image.open(e.path) as img:
            thumb = img.convert("RGB")
            thumb.thumbnail((THUMB, THUMB))
        sheet.paste(thumb, (x, y))
        draw.text((x, y + THUMB + 2), e.id[:26], fill="black", font=font)
        draw.text((x, y + THUMB + 15), e.prompt[:26], fill="#555", font=font)
    return sheet


def pool_stats(pool: ReferencePool, out: Path, max_distance: int = 6, progress=None) -> dict:
    """Compute the statistics of ``pool``, write ``stats.json`` and the contact sheets to ``out``.

    Returns:
        The ``stats.json`` content (``contact_sheets`` maps tier -> PNG path).
    """
    out.mkdir(parents=True, exist_ok=True)
    entries = pool.entries
    stats = {
        "pool": pool.version_id,
        "paintings": len(entries),
        "tiers": {t: len(pool.tier(t)) for t in TIERS},
        "prompts": dict(Counter(e.prompt for e in entries).most_common()),
        "sources": dict(Counter(e.source for e in entries).most_common()),
        "rounds": {str(k): v for k, v in sorted(Counter(e.round for e in entries).items())},
        "palette_spread_delta_e": {t: palette_spread(pool.tier(t)) for t in TIERS},
        "near_duplicates": {"max_distance_bits": max_distance, "pairs": near_duplicates(entries, max_distance)},
        "contact_sheets": {},
    }
    for t in TIERS:
        members = pool.tier(t)
        if members:
            path = out / f"contact_{t}.png"
            contact_sheet(members, f"{pool.version_id} - {t} ({len(members)})").save(path)
            stats["contact_sheets"][t] = str(path)
        if progress:
            progress(t)
    (out / "stats.json").write_text(json.dumps(stats, indent=2) + "\n")
    return stats


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``pool stats``."""
    a = sub.add_parser("stats", help="counts, palette spread, near-duplicates and contact sheets of a pool",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    a.add_argument("pool", metavar="POOL")
    a.add_argument("--out", help="output folder (default: POOL.stats next to the pool)")
    a.add_argument("--max-distance", type=int, default=6, metavar="BITS",
                   help="pHash bits (of 64) within which two paintings are near-duplicates (default 6)")
    a.add_argument("--json", action="store_true", help="print stats.json instead of tables")
    a.set_defaults(func=_run)


def _run(args) -> int:
    from rich.console import Console
    from rich.table import Table

    try:
        pool = ReferencePool(args.pool)
    except PoolError as exc:
        print(exc, file=sys.stderr)
        return 1
    out = Path(args.out) if args.out else Path(str(Path(args.pool).resolve()) + ".stats")
    console = Console()
    with console.status("hashing and drawing contact sheets…"):
        stats = pool_stats(pool, out, args.max_distance)
    if args.json:
        print(json.dumps(stats, indent=2))
        return 0
    for name in ("tiers", "prompts", "sources", "rounds"):
        table = Table(title=f"{stats['pool']}: {name}")
        table.add_column(name[:-1])
        table.add_column("paintings", justify="right")
        if name == "tiers":
            table.add_column("palette spread (ΔE)", justify="right")
        for key, n in stats[name].items():
            extra = []
            if name == "tiers":
                spread = stats["palette_spread_delta_e"][key]
                extra = ["-" if spread is None else f"{spread:.1f}"]
            table.add_row(str(key), str(n), *extra)
        console.print(table)
    pairs = stats["near_duplicates"]["pairs"]
    console.print(f"{len(pairs)} near-duplicate pair(s) within {args.max_distance} bits"
                  + "".join(f"\n  {p['a']} ~ {p['b']} ({p['distance']} bits)" for p in pairs[:20]))
    console.print(f"contact sheets and stats.json in {out}")
    return 0
