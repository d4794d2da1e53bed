"""Does the CPU reward order paintings the way a person would? A fixed, defensible test set.

Three tiers of honest sketches, each rendered with the project's renderer:

* ``love``: corpus variants (not the canonical sketch, so not a pool image) of the subject of
  the bases whose canonical painting the starter pool rates ``love``;
* ``good``: the same for the bases the pool rates ``good``;
* ``broken``: variants of the same bases with their shapes broken, one of three ways
  (:data:`BREAKERS`): vertices shuffled and jittered inside each shape (torn, self-crossing
  shapes), the whole painting shrunk into the top-left corner, or pushed mostly off the canvas.

A reward that a person would agree with ranks ``love`` > ``good`` > ``broken``; :func:`kendall_tau`
measures it (Kendall's tau-b between the scores and the tier ranks 2 / 1 / 0, ties counted as
``scipy.stats.kendalltau`` does). ``python -m brushrl.reward.ranking`` renders the set, scores it
with the CPU scorer, prints per-tier medians and tau and writes JSON (docs/reward.md).
"""

from __future__ import annotations

import argparse
import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

#: Tier -> rank in the defensible order.
TIER_RANK = {"love": 2, "good": 1, "broken": 0}

_VERTEX = re.compile(r"brush\.vertex\((-?\d+), (-?\d+)\);")
_CIRCLE = re.compile(r"brush\.circle\((-?\d+), (-?\d+), (\d+)\);")


def _map_points(code: str, fn: Callable[[float, float], tuple[float, float]], scale: float = 1.0) -> str:
    """``code`` with every ``brush.vertex`` / ``brush.circle`` centre moved by ``fn`` (canvas px)
    and every circle radius multiplied by ``scale``."""
    def vertex(m: re.Match) -> str:
        x, y = fn(float(m[1]), float(m[2]))
        return f"brush.vertex({round(x)}, {round(y)});"

    def circle(m: re.Match) -> str:
        x, y = fn(float(m[1]), float(m[2]))
        return f"brush.circle({round(x)}, {round(y)}, {max(1, round(float(m[3]) * scale))});"

    return _CIRCLE.sub(circle, _VERTEX.sub(vertex, code))


def torn(code: str, rng: random.Random) -> str:
    """Each shape's vertices shuffled and jittered by up to 60 px: self-crossing, torn shapes."""
    shapes = code.split("brush.beginShape(")
    out = [shapes[0]]
    for shape in shapes[1:]:
        points = _VERTEX.findall(shape)
        rng.shuffle(points)
        it = iter(points)

        def vertex(_m: re.Match) -> str:
            x, y = next(it)
            return f"brush.vertex({int(x) + rng.randint(-60, 60)}, {int(y) + rng.randint(-60, 60)});"

        out.append(_VERTEX.sub(vertex, shape))
    return "brush.beginShape(".join(out)


def cornered(code: str, rng: random.Random) -> str:
    """The painting shrunk to a third of its size into the top-left corner."""
    return _map_points(code, lambda x, y: (x * 0.33, y * 0.33), scale=0.33)


def off_canvas(code: str, rng: random.Random) -> str:
    """The painting pushed 330 px right and 270 px down: most of it lands off the canvas."""
    return _map_points(code, lambda x, y: (x + 330, y + 270))


#: The ways of breaking a sketch's shapes, by name.
BREAKERS: dict[str, Callable[[str, random.Random], str]] = {"torn": torn, "cornered": cornered,
                                                            "off_canvas": off_canvas}


@dataclass(frozen=True)
class RankItem:
    """One painting of the ranking set: ``name`` (``<base>/<variant>[:<breaker>]``), its tier, the
    subject prompt it is scored against and its sketch code."""

    name: str
    tier: str
    subject: str
    code: str


def ranking_set(pool_subjects: dict[str, tuple[str, str]], per_base: int = 2, seed: int = 0,
                max_tries: int = 60) -> list[RankItem]:
    """The ranking set for a pool.

    Args:
        pool_subjects: corpus base name -> (tier, subject) of the pool image that is its canonical
            sketch (e.g. ``rose -> ("love", "a red rose")``).
        per_base: variants kept per base: the first ones (variant 1, 2, ...) that paint the pool
            image's subject (a variant may change the colour, e.g. ``a purple tulip``), so each is
            scored against its own subject's reference.
        seed: seed of the corpus variants and of the breakers.
        max_tries: variants tried per base before giving up on more.

    Returns:
        Per base, ``per_base`` honest items in the base's tier and one broken copy of each
        (breakers taken in turn).

    Raises:
        KeyError: a base is not a corpus base.
    """
    from brushrl.corpus import make_variant

    rng = random.Random(seed)
    items, names, k = [], list(BREAKERS), 0
    for base, (tier, subject) in sorted(pool_subjects.items()):
        kept = [v for v in (make_variant(base, i, seed=seed) for i in range(1, max_tries + 1))
                if v.subject == subject][:per_base]
        for item in kept:
            breaker = names[k % len(names)]
            k += 1
            items.append(RankItem(item.name, tier, item.subject, item.code))
            items.append(RankItem(f"{item.name}:{breaker}", "broken", item.subject, BREAKERS[breaker](item.code, rng)))
    return items


def kendall_tau(scores: list[float], tiers: list[str]) -> float:
    """Kendall's tau-b in [-1, 1] between ``scores`` and the tiers' ranks (:data:`TIER_RANK`)."""
    from scipy.stats import kendalltau

    return float(kendalltau(scores, [TIER_RANK[t] for t in tiers]).statistic)


def _sketch(body: str) -> str:
    from brushrl.corpus.sketch import sketch_source

    return sketch_source([body])


#: A legal sketch that paints the whole canvas with one opaque shape of one colour.
FLOOD_FILL = _sketch('brush.noStroke();\nbrush.fill("#e08a72", 255);\nbrush.beginShape(0);\n'
                     "brush.vertex(-10, -10);\nbrush.vertex(610, -10);\nbrush.vertex(610, 610);\n"
                     "brush.vertex(-10, 610);\nbrush.endShape(true);")


def dominant_colour(png: bytes) -> str:
    """The hex colour of the commonest 16-level RGB bin among the clearly pigmented pixels of ``png``
    (RGB distance from the paper, its commonest bin, above 0.25): its main pigment."""
    import numpy as np

    from brushrl.reward.base import png_on_white

    rgb = np.asarray(png_on_white(png), dtype=np.int32)
    keys = ((rgb >> 4) * np.array([256, 16, 1])).sum(axis=-1).ravel()
    paper = np.bincount(keys).argmax()
    paper_rgb = np.array([(paper >> 8) & 15, (paper >> 4) & 15, paper & 15]) * 16 + 8
    pigmented = np.linalg.norm(rgb.reshape(-1, 3) - paper_rgb, axis=1) > 0.25 * 255
    k = int(np.bincount(keys[pigmented], minlength=4096).argmax()) if pigmented.any() else int(paper)
    return "#" + "".join(f"{((k >> sh) & 15) * 16 + 8:02x}" for sh in (8, 4, 0))


def hacks(reference: bytes, rendered: dict[str, bytes], seed: int = 0) -> dict[str, bytes]:
    """The known reward hacks as 600 px PNGs: copies of ``reference`` (exact, rotated 1.5 deg, moved
    (30, -20) px, mirrored), a flat colour, one flat disc of the reference's main pigment
    (:func:`dominant_colour`) in the middle (right colour, place and amount, one flat fill, no
    shape), RGB and pastel noise, plus the ``rendered`` ones (name -> PNG of a legal sketch such as
    :data:`FLOOD_FILL`)."""
    import io

    import numpy as np
    from PIL import Image, ImageDraw

    def png(img: Image.Image) -> bytes:
        buf = io.BytesIO()
        img.save(buf, "PNG")
        return buf.getvalue()

    ref = Image.open(io.BytesIO(reference)).convert("RGB").resize((600, 600), Image.LANCZOS)
    moved = Image.new("RGB", ref.size, "#fdf8ee")
    moved.paste(ref, (30, -20))
    disc = Image.new("RGB", ref.size, "#fdf8ee")
    ImageDraw.Draw(disc).ellipse([150, 130, 450, 430], fill=dominant_colour(reference))
    rng = np.random.default_rng(seed)
    return {
        "copy_of_reference": png(ref),
        "copy_rotated_1.5deg": png(ref.rotate(1.5, fillcolor="#fdf8ee")),
        "copy_moved_30px": png(moved),
        "copy_mirrored": png(ref.transpose(Image.Transpose.FLIP_LEFT_RIGHT)),
        "flat_colour": png(Image.new("RGB", (600, 600), "#e08a72")),
        "flat_disc": png(disc),
        "noise_canvas": png(Image.fromarray(rng.integers(0, 256, (600, 600, 3), dtype=np.uint8))),
        "pastel_noise": png(Image.fromarray(rng.integers(150, 256, (600, 600, 3), dtype=np.uint8))),
        **rendered,
    }


def _png_name(name: str) -> str:
    return name.replace("/", "_").replace(":", "__") + ".png"


def render_all(items: list[RankItem], cache: Path) -> dict[str, bytes]:
    """Each item's PNG, rendered once with the project's renderer (600 px, seed 0, llvmpipe) and
    kept in ``cache`` (a render that fails is reported and left out)."""
    from brushrl.config import RenderConfig
    from brushrl.render.browser import Renderer

    cache.mkdir(parents=True, exist_ok=True)
    out, renderer = {}, None
    try:
        for item in items:
            path = cache / _png_name(item.name)
            if not path.exists():
                renderer = renderer or Renderer.from_config(RenderConfig())
                r = renderer.render(item.code, seed=0, size=600, deadline_s=240, attempts=1)
                if r.status != "ok" or r.png is None:
                    print(f"{item.name}: {r.status} {r.js_errors[:1]}")
                    continue
                path.write_bytes(r.png)
            out[item.name] = path.read_bytes()
    finally:
        if renderer is not None:
            renderer.close()
    return out


def group_spread(run_dir: Path, scorer, weights: dict[str, float]) -> dict:
    """Within-group standard deviation of the total reward among a run's gate-passing samples,
    over its groups with at least two of them: as the run recorded it and with ``scorer``
    (rescoring its PNGs; total = ``gate + length * length + pool_similarity * score``)."""
    import numpy as np
    import pandas as pd

    rows = pd.read_parquet(run_dir / "rollouts.parquet")
    rows = rows[(rows.gate_verdict == "pass") & rows.png.notna() & rows.total.notna()]
    recorded, rescored = [], []
    for _, g in rows.groupby(["step", "group_id"]):
        if len(g) < 2:
            continue
        recorded.append(float(g.total.std()))
        new = [weights.get("gate", 0) + weights.get("length", 0) * r.reward_length
               + weights.get("pool_similarity", 0) * scorer.score(_read(run_dir, r.png), scorer.subject_references(r.prompt))
               for r in g.itertuples()]
        rescored.append(float(np.std(new, ddof=1)))
    med = (lambda xs: float(np.median(xs)) if xs else None)
    return {"run": str(run_dir), "groups": len(recorded), "passing_samples": int(len(rows)),
            "recorded_std_median": med(recorded), "rescored_std_median": med(rescored)}


def _read(run_dir: Path, png: str) -> bytes:
    path = Path(png)
    if not path.is_absolute() or not path.exists():  # a run directory moved since
        path = run_dir / "png" / path.parent.name / path.name
    return path.read_bytes()


def figures(pool, rendered: dict[str, bytes], items: list[RankItem]) -> dict:
    """Scores of the ranking set (per item, per tier, Kendall tau) and of the hacks (each hack's
    highest score over every subject of the set, with and without the copy guard, against the
    median honest painting); ``scorer`` is the scorer used."""
    import statistics

    from brushrl.config import PoolScorerConfig
    from brushrl.reward.pool_scorer import PoolSimilarityScorer

    cfg = PoolScorerConfig()
    scorer = PoolSimilarityScorer(pool.entries, cfg.tiers, cfg.copy_min_corr)
    unguarded = PoolSimilarityScorer(pool.entries, cfg.tiers, copy_min_corr=2.0)
    scored = []
    for item in items:
        if item.name not in rendered:
            continue
        score, terms = scorer.score_terms(rendered[item.name], scorer.subject_references(item.subject))
        scored.append({"name": item.name, "tier": item.tier, "subject": item.subject, "score": score, **terms})
    by = lambda pred: [r["score"] for r in scored if pred(r)]  # noqa: E731
    tiers = {t: statistics.median(by(lambda r, t=t: r["tier"] == t)) for t in TIER_RANK}
    kinds = {k: statistics.median(by(lambda r, k=k: r["name"].endswith(":" + k))) for k in BREAKERS}
    honest = statistics.median(by(lambda r: r["tier"] != "broken"))
    from brushrl.reward.pool_scorer import TERMS

    worst: dict[str, tuple[float, float, str, str]] = {}
    for entry in pool.entries:
        if entry.prompt not in {i.subject for i in items}:
            continue
        refs = scorer.subject_references(entry.prompt)
        for name, png in hacks(entry.path.read_bytes(), {"flood_fill": rendered["flood_fill"]}).items():
            score, terms = unguarded.score_terms(png, refs)
            guarded = 0.0 if terms["copy"] >= cfg.copy_min_corr else score
            weakest = "copy guard" if guarded < score else min(TERMS, key=terms.get)
            worst[name] = max(worst.get(name, (-1.0, 0.0, "", "")), (guarded, score, entry.prompt, weakest))
    return {
        "kendall_tau": kendall_tau([r["score"] for r in scored], [r["tier"] for r in scored]),
        "tier_median": tiers, "broken_median": kinds, "honest_median": honest,
        "hacks": {k: {"score": v, "without_copy_guard": u, "subject": s, "stopped_by": w}
                  for k, (v, u, s, w) in worst.items()},
        "items": scored, "scorer": scorer,
    }


def main(argv: list[str] | None = None) -> dict:
    """Render (or reuse) the ranking set and the hacks, score them, optionally measure runs' group
    spread, print the tables and write JSON; returns the JSON record."""
    ap = argparse.ArgumentParser(prog="python -m brushrl.reward.ranking", description=__doc__.split("\n\n")[0])
    ap.add_argument("--pool", default="pools/starter", help="reference pool folder (default: %(default)s)")
    ap.add_argument("--cache", default="runs/ranking", help="folder for the rendered PNGs (reused; default: %(default)s)")
    ap.add_argument("--run", action="append", default=[], metavar="RUN_DIR",
                    help="also measure a run's within-group reward spread among passing samples (repeatable)")
    ap.add_argument("--out", default="docs/perf/reward.json", help="JSON written here (default: %(default)s)")
    args = ap.parse_args(argv)
    from brushrl.config import REWARD_PRESETS
    from brushrl.pool import ReferencePool

    pool = ReferencePool(args.pool)
    items = ranking_set({e.id.rsplit("-", 1)[0]: (e.tier, e.prompt) for e in pool.entries})
    rendered = render_all([*items, RankItem("flood_fill", "hack", "", FLOOD_FILL)], Path(args.cache))
    fig = figures(pool, rendered, items)
    spread = [group_spread(Path(r), fig.pop("scorer"), REWARD_PRESETS["cpu"]) for r in args.run]
    fig.pop("scorer", None)
    print(f"ranking set: {len(fig['items'])} paintings, Kendall tau-b vs love > good > broken: {fig['kendall_tau']:.3f}")
    print("median score: " + ", ".join(f"{t} {v:.3f}" for t, v in fig["tier_median"].items())
          + " (broken: " + ", ".join(f"{k} {v:.3f}" for k, v in fig["broken_median"].items()) + ")")
    print(f"anti-hacking (each hack's best score over {len({i.subject for i in items})} subjects) vs honest median "
          f"{fig['honest_median']:.3f}:")
    print(f"  {'hack':<22} score  without the copy guard  stopped by")
    for name, h in fig["hacks"].items():
        print(f"  {name:<22} {h['score']:.3f}  {h['without_copy_guard']:<22.3f}  {h['stopped_by']}")
    for s in spread:
        print(f"run {s['run']}: {s['groups']} groups with >= 2 passing samples; within-group reward std, median: "
              f"recorded {s['recorded_std_median']}, this scorer {s['rescored_std_median']}")
    record = {**fig, "runs": spread}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(record, indent=1, default=float) + "\n")
    print(f"wrote {args.out}")
    return record


if __name__ == "__main__":
    main()
