"""Build the starter reference pool from the project's own corpus.

The pool ships in ``pools/starter/`` so that the CPU default and the tests run offline. Its tiers
were chosen by a person looking at the renders (``STARTER_TIERS``); rebuild it with::

    python -m brushrl.pool.starter --out pools/starter

Each painting is rendered at the config's canvas size and stored downscaled to ``--thumb`` pixels
(the pool scorer works at 128x128, so 256 keeps the pool small without losing what it measures).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
from pathlib import Path

from PIL import Image

from brushrl.pool.store import PoolWriter

#: corpus sketch name -> tier, picked by eye from a contact sheet of the canonical renders
#: (variant 0 of all 49 base sketches, ``--all``): ``love`` for the most watercolour-like ones.
STARTER_TIERS: dict[str, str] = {
    **dict.fromkeys(
        ["peach_hibiscus/0", "yellow_hibiscus/0", "red_poppy/0", "anemone/0", "rose/0", "camellia/0",
         "violet_iris/0", "zinnia/0"],
        "love",
    ),
    **dict.fromkeys(
        ["magenta_hibiscus/0", "coral_poppy/0", "white_anemone/0", "wild_rose/0", "lotus/0", "tulip/0",
         "marigold/0", "cosmos/0"],
        "good",
    ),
}


def write_pool(out: Path, items: list[dict], thumb: int) -> None:
    """Write PNGs and ``manifest.jsonl`` for ``items`` (dicts with id, tier, prompt, code, png bytes),
    then publish the folder as version 1 (``pool.json``; see ``brushrl.pool.store``).

    Raises:
        FileExistsError: ``out`` already has a manifest (pools are immutable once written).
    """
    out.mkdir(parents=True, exist_ok=True)
    if (out / "manifest.jsonl").exists():
        raise FileExistsError(f"{out}/manifest.jsonl exists: a published pool is immutable")
    rows = []
    for item in items:
        img = Image.open(io.BytesIO(item["png"])).convert("RGB").resize((thumb, thumb), Image.LANCZOS)
        buf = io.BytesIO()
        img.save(buf, "PNG", optimize=True)
        data = buf.getvalue()
        name = f"{item['id']}.png"
        (out / name).write_bytes(data)
        rows.append({
            "id": item["id"], "tier": item["tier"], "png": name, "prompt": item["prompt"],
            "source": "brushrl-corpus", "rated_by": "brushrl-dev", "sha256": hashlib.sha256(data).hexdigest(),
            "code": item["code"],
        })
    (out / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    PoolWriter(out).publish(note="starter pool rendered from the brushrl corpus, rated by eye")


def main(argv: list[str] | None = None) -> int:
    from brushrl.config import RenderConfig
    from brushrl.corpus import build_corpus
    from brushrl.render.browser import Renderer

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=Path("pools/starter"))
    p.add_argument("--thumb", type=int, default=256, help="stored side in pixels")
    p.add_argument("--all", action="store_true", help="render every base sketch as 'unrated' (for picking tiers)")
    args = p.parse_args(argv)
    cfg = RenderConfig()
    corpus = [c for c in build_corpus(1, seed=0)]
    renderer = Renderer.from_config(cfg)
    items = []
    try:
        for c in corpus:
            tier = "unrated" if args.all else STARTER_TIERS.get(c.name)
            if tier is None:
                continue
            r = renderer.render(c.code, seed=0, size=cfg.canvas_size, deadline_s=cfg.deadline_s, attempts=cfg.attempts)
            if r.status != "ok":
                raise RuntimeError(f"{c.name}: render {r.status} {r.detail} {r.js_errors}")
            items.append({"id": c.name.replace("/", "-"), "tier": tier, "prompt": c.subject, "code": c.code, "png": r.png})
            print(f"{c.name:32s} {tier:8s} {r.wall_s:5.1f}s paint {r.paint_fraction:.2f}", flush=True)
    finally:
        renderer.close()
    write_pool(args.out, items, args.thumb)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
