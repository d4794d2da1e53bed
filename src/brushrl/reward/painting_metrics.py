"""What the passing paintings of an evaluation look like against the reference pool: subject
fidelity, within-prompt diversity and copying (issue 24, part 2; docs/reward.md, "Subject, variety,
copying").

A reward that rises while every subject is painted as the same flower is not learning to paint the
subject. These three numbers, from the pool scorer's own image features
(:mod:`brushrl.reward.pool_scorer`), say whether that happened:

* **subject fidelity**: the painting is attributed to the pool subject it resembles most, the
  subject's score being the tier-value-weighted mean over its references of the pool scorer's
  per-reference ``resemblance`` (``palette ** (0.4/0.65) * shape ** (0.25/0.65)``: CIELAB palette
  chamfer distance and blurred paint-mask overlap). Fidelity is the share of paintings attributed
  to their own subject; chance is ``1 / subjects``. (A mean of similarities rather than a distance
  to a centroid: the palette distance is not a vector space. With one reference per subject, as in
  the starter pool, the two are the same thing: the nearest reference.) Ties go to the first
  subject in pool order (a blank painting resembles nothing: all 0).
* **within-prompt diversity**: the mean of ``1 - resemblance`` over the pairs of a prompt's passing
  paintings (of one policy), in [0, 1]; 0 when they are identical. A prompt needs two passing
  paintings to count.
* **copying**: the distance ``1 - c`` to the nearest pool image, c the copy guard's correlation
  (:meth:`PoolSimilarityScorer.copy_correlation
  <brushrl.reward.pool_scorer.PoolSimilarityScorer.copy_correlation>`: the 32x32 grey thumbnails'
  zero-normalised cross-correlation, shifts up to 4 thumbnail pixels and mirror images included,
  any tier); a painting is flagged a copy when ``c >= copy_min_corr`` (``reward.pool``, 0.9), the
  threshold at which the pool scorer scores it 0. It is measured here too because the eval's
  reward may not include the pool scorer (HPSv3 and judge presets).

``python -m brushrl.reward.painting_metrics [POOL]`` measures their range on a pool itself (the
figures in docs/reward.md).
"""

from __future__ import annotations

import argparse
import io
import json
import random
from dataclasses import dataclass
from itertools import combinations

import numpy as np
from PIL import Image

from brushrl.pool.store import PoolEntry, ReferencePool
from brushrl.reward.pool_scorer import ImageFeatures, PoolSimilarityScorer, image_features, resemblance, subject_key


@dataclass(frozen=True)
class Painting:
    """One painting to measure: ``subject`` (the prompt's, any case), ``png`` bytes and the
    ``prompt`` it answers (groups the within-prompt diversity)."""

    subject: str
    png: bytes
    prompt: str


class PoolSubjects:
    """The pool's subjects and references, for :func:`measure`.

    Args:
        entries: the pool's references (any tiers: every one is guarded against copies).
        tier_values: tier -> value (``reward.pool.tiers``): the tiers whose references stand for a
            subject, and their weights in the subject's mean resemblance.
        copy_min_corr: the copy threshold (module docstring).

    Raises:
        ValueError: no entry of a valued tier has a subject (``PoolEntry.prompt``).
    """

    def __init__(self, entries: list[PoolEntry], tier_values: dict[str, float], copy_min_corr: float = 0.9):
        self.copy_min_corr = copy_min_corr
        self._guard = PoolSimilarityScorer(entries, tier_values, copy_min_corr)
        refs: dict[str, list[tuple[float, ImageFeatures]]] = {}
        for e in self._guard.entries:  # the scored tiers' references, their features cached by the scorer
            if e.prompt:
                refs.setdefault(subject_key(e.prompt), []).append((tier_values[e.tier], self._guard.reference_features(e.id)))
        if not refs:
            raise ValueError("no pool reference of a scored tier has a subject")
        self.refs = refs
        #: Subjects in pool order (ties of :meth:`nearest_subject` go to the first).
        self.subjects = list(refs)

    @classmethod
    def from_config(cls, pool_cfg) -> "PoolSubjects":
        """The pool of ``reward.pool`` (``PoolScorerConfig``: path, tiers, ``copy_min_corr``).

        Raises:
            brushrl.pool.store.PoolError, OSError: the pool does not load. ValueError: it has no subject.
        """
        return cls(ReferencePool(pool_cfg.path).entries, pool_cfg.tiers, pool_cfg.copy_min_corr)

    def subject_scores(self, f: ImageFeatures) -> np.ndarray:
        """float64 ``[subjects]``: the weighted mean resemblance in [0, 1] of ``f`` to each subject's references."""
        return np.array([sum(v * resemblance(f, r) for v, r in refs) / sum(v for v, _ in refs)
                         for refs in self.refs.values()])

    def nearest_subject(self, f: ImageFeatures) -> str:
        """The subject (``subject_key`` form) that ``f`` resembles most."""
        return self.subjects[int(np.argmax(self.subject_scores(f)))]

    def copy_distance(self, png: bytes) -> float:
        """``1 - c`` in [0, 2], c the copy guard's largest correlation with any pool image (module docstring)."""
        return max(0.0, 1.0 - self._guard.copy_correlation(png))  # a correlation of 1 + rounding is 0

    def is_copy(self, distance: float) -> bool:
        """Whether a copy distance is at or below the copy threshold (``c >= copy_min_corr``)."""
        return 1.0 - distance >= self.copy_min_corr


def diversity(features: list[ImageFeatures]) -> float | None:
    """Mean ``1 - resemblance`` in [0, 1] over the pairs of ``features``; None for fewer than two."""
    pairs = [1.0 - resemblance(a, b) for a, b in combinations(features, 2)]
    return sum(pairs) / len(pairs) if pairs else None


def measure(pool: PoolSubjects, paintings: list[Painting]) -> dict:
    """The three measures (module docstring) of ``paintings``, per painting and per prompt.

    Returns:
        ``{"correct": [bool | None per painting] (None: its subject has no pool reference),
        "copy_distance": [float per painting], "copy": [bool per painting],
        "diversity": {prompt: float | None}}``.

    Raises:
        PIL.UnidentifiedImageError: a PNG Pillow cannot read.
    """
    feats = [image_features(p.png) for p in paintings]
    correct = [None if subject_key(p.subject) not in pool.refs else pool.nearest_subject(f) == subject_key(p.subject)
               for p, f in zip(paintings, feats)]
    dist = [pool.copy_distance(p.png) for p in paintings]
    by_prompt: dict[str, list[ImageFeatures]] = {}
    for p, f in zip(paintings, feats):
        by_prompt.setdefault(p.prompt, []).append(f)
    return {"correct": correct, "copy_distance": dist, "copy": [pool.is_copy(d) for d in dist],
            "diversity": {k: diversity(v) for k, v in by_prompt.items()}}


#: The ``paint/*`` keys :func:`step_measures` adds to a step's ``metrics.jsonl`` record (docs/metrics.md).
STEP_KEYS = ("paint/measured", "paint/subject_fidelity", "paint/diversity", "paint/copies", "paint/copy_distance_min")


def step_measures(pool: PoolSubjects, paintings: list[Painting]) -> dict:
    """One learner step's ``paint/*`` record keys, from the step's passing paintings (the last turn
    of each trajectory), ``Painting.prompt`` naming the group (diversity is within a group).

    Returns:
        ``{"paint/measured": n paintings, "paint/subject_fidelity": share in [0, 1] attributed to
        their own subject (None: no painting of a subject the pool has), "paint/diversity": mean
        within-group diversity in [0, 1] over groups with two or more (None: no such group),
        "paint/copies": n flagged, "paint/copy_distance_min": float (None: no painting)}``; None is
        never written as 0 (an empty step measured nothing).

    Raises:
        PIL.UnidentifiedImageError: a PNG Pillow cannot read.
    """
    m = measure(pool, paintings)
    known = [c for c in m["correct"] if c is not None]
    div = [d for d in m["diversity"].values() if d is not None]
    return {"paint/measured": len(paintings),
            "paint/subject_fidelity": sum(known) / len(known) if known else None,
            "paint/diversity": sum(div) / len(div) if div else None,
            "paint/copies": int(sum(m["copy"])),
            "paint/copy_distance_min": min(m["copy_distance"], default=None)}


# ------------------------------------------------------------------ measured range on a pool
def _moved(png: bytes, angle: float, dx: int, dy: int, scale: float) -> bytes:
    """``png`` scaled by ``scale``, turned ``angle`` degrees and moved (dx, dy) pixels on its own
    paper (the corner pixel's colour): the reference painted again, elsewhere on the canvas."""
    img = Image.open(io.BytesIO(png)).convert("RGB")
    paper = img.getpixel((0, 0))
    w, h = img.size
    small = img.resize((round(w * scale), round(h * scale)), Image.LANCZOS)
    canvas = Image.new("RGB", (w, h), paper)
    canvas.paste(small, ((w - small.width) // 2, (h - small.height) // 2))
    out = io.BytesIO()
    canvas.rotate(angle, translate=(dx, dy), fillcolor=paper, resample=Image.BICUBIC).save(out, "PNG")
    return out.getvalue()


#: The pool's references painted again (:func:`_moved`): (angle deg, dx, dy, scale) on a 256 px
#: canvas, each turned and resized, so not a pixel copy.
MOVES = ((8.0, 20, -12, 0.9), (-6.0, -16, 10, 0.85), (12.0, 0, 0, 0.8), (-10.0, 10, 20, 0.95))
#: A reference only moved (24, 16) px: 3 thumbnail pixels, within the copy guard's shift search.
SHIFT = (0.0, 24, 16, 1.0)


def pool_ranges(pool: PoolSubjects, entries: list[PoolEntry], seed: int = 0) -> dict:
    """The measures on the pool itself, for reading an evaluation's (docs/reward.md). Cases:

    * ``references``: each scored reference as the painting of its subject (the copy end: fidelity
      1 by construction, copy distance 0);
    * ``one_prompt``: every reference as a painting of one prompt (diversity: how far apart 16
      different subjects' paintings are, the far end of within-prompt diversity);
    * ``shifted``: each reference moved by ``SHIFT`` (a copy the guard must flag);
    * ``moved``: each reference painted again turned, scaled and moved (``MOVES``, 4 a reference,
      one prompt per subject): a painter who paints each subject like its reference without
      copying it (the starter pool has one reference a subject, so there is no leave-one-out);
    * ``shuffled``: ``moved`` with subjects shuffled (``random.Random(seed)``): chance;
    * ``collapsed``: every painting of every prompt is the first reference turned by ``MOVES[0]``:
      a run that paints one flower for everything.

    Returns:
        ``{case: {"fidelity", "chance", "diversity_mean", "copy_distance_min", "copy_distance_median",
        "copies", "n"}}`` (``diversity_mean`` None for one painting a prompt).
    """
    scored = [e for e in entries if subject_key(e.prompt or "") in pool.refs]
    refs = [Painting(e.prompt, e.path.read_bytes(), e.prompt) for e in scored]
    shifted = [Painting(p.subject, _moved(p.png, *SHIFT), p.subject) for p in refs]
    moved = [Painting(p.subject, _moved(p.png, *m), p.subject) for p in refs for m in MOVES]
    labels = [p.subject for p in moved]
    random.Random(seed).shuffle(labels)
    shuffled = [Painting(s, p.png, p.prompt) for s, p in zip(labels, moved)]
    collapsed = [Painting(p.subject, moved[0].png, p.prompt) for p in moved]
    return {name: _summary(pool, measure(pool, paintings)) for name, paintings in
            (("references", refs), ("one_prompt", [Painting(p.subject, p.png, "one") for p in refs]),
             ("shifted", shifted), ("moved", moved), ("shuffled", shuffled),
             ("collapsed", collapsed))}


def _summary(pool: PoolSubjects, m: dict) -> dict:
    known = [c for c in m["correct"] if c is not None]
    div = [d for d in m["diversity"].values() if d is not None]
    return {"fidelity": sum(known) / len(known), "chance": 1 / len(pool.subjects),
            "diversity_mean": sum(div) / len(div) if div else None,
            "copy_distance_min": float(np.min(m["copy_distance"])),
            "copy_distance_median": float(np.median(m["copy_distance"])), "copies": int(sum(m["copy"])),
            "n": len(known)}


def main(argv: list[str] | None = None) -> int:
    """Print :func:`pool_ranges` of a pool as JSON."""
    from brushrl.config import PoolScorerConfig

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("pool", nargs="?", default=PoolScorerConfig().path)
    args = p.parse_args(argv)
    cfg = PoolScorerConfig(path=args.pool)
    print(json.dumps(pool_ranges(PoolSubjects.from_config(cfg), ReferencePool(cfg.path).entries), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
