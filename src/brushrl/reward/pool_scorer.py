"""CPU proxy scorer: how much a painting looks like a good painting of its subject.

This stands in, on the CPU default, for the real scorers (HPSv3 and the pairwise VLM judge, which
need GPUs). It is a hand-made proxy, not taste: five image statistics that a person would agree
make one valid painting better than another, calibrated on the starter pool and on the tiny
policy's own paintings (docs/reward.md has the figures). Every term is in [0, 1]; on the canvas
composited on white and resized to 128x128 pixels (a pixel is painted when its RGB distance from
the modal, background, colour exceeds 32/255: the HF reproduction's paint-fraction rule):

* ``palette``: resemblance of the painted colours to the references'. Painted pixels are binned in
  CIELAB (10 L* x 14 a* x 14 b* bins of 10 units); the distance of two paintings is the symmetric
  mass-weighted chamfer distance of their occupied bins,
  ``D = (sum_i w_i min_j |c_i - c'_j| + sum_j w'_j min_i |c_i - c'_j|) / 2`` in CIE76 Delta E units
  (Delta E ~2.3 is a just-noticeable difference, Sharma 2003), and ``palette = exp(-D / 5)``.
  A coral poppy painted in blues scores low, whatever its shapes.
* ``shape``: the Ruzicka (weighted Jaccard) similarity ``sum(min(a, b)) / sum(max(a, b))`` of the
  two paintings' paint masks, area-averaged to 32x32 and blurred (Gaussian, sigma 1 cell = 19 px),
  so it is tolerant to a shift of a few petals but not to a different size, place or outline.
* ``composition``: paint on the canvas, not off it or in a corner:
  ``clip(1 - off / 0.3) * clip(1 - border / 0.25)``, with ``off`` the distance (canvas fractions)
  of the painted bounding box's centre (5th-95th percentiles of painted x and y) from the canvas
  centre and ``border`` the painted share of the outermost 4 pixels (3%) of the canvas.
* ``coverage``: the painted fraction, a trapezoid 0 at 0.01, 1 on [0.10, 0.50], 0 at 0.90. The
  starter pool covers 0.05-0.21 (128 px rule), the reproduction's ``love`` tier 0.04-0.66 (median
  0.22), and the seeds' own "future direction" is to reward coverage.
* ``layering``: translucent washes laid over each other, and p5.brush's watercolour texture and
  bleed, leave several pigment densities; one flat opaque fill leaves one. ``H`` is the normalised
  entropy of the painted pixels' distances from the background (12 bins on [32/255, 0.9], divided
  by ln 12) and ``layering = clip((H - 0.2) / 0.25)`` (starter pool H 0.55-0.91, the tiny policy's
  paintings 0.60-0.94, one flat opaque disc 0.13-0.19).

``palette`` and ``shape`` are measured against each reference; the painting's score is
``R ** 0.65 * composition ** 0.15 * coverage ** 0.1 * layering ** 0.1`` (a weighted geometric
mean, ``WEIGHTS``: a painting must do well on every count) with ``R`` the tier-value-weighted mean
over references of ``palette ** (0.4 / 0.65) * shape ** (0.25 / 0.65)``. References are the pool
images of the prompt's subject (``PoolSimilarityScorer.subject_references``); the scorer actor
draws ``refs_per_tier`` per tier with the group seed for a subject the pool lacks. Exponents and scales were set by hand on the
ranking set and the tiny policy's paintings (``python -m brushrl.reward.ranking``), not fitted to
any judge.

Copy guard: a painting whose 32x32 grey thumbnail (composited on white) has a Pearson correlation
of at least ``copy_min_corr`` with that of any pool image (or its mirror image), of any tier, at
any shift of up to ``COPY_MAX_SHIFT`` thumbnail pixels (4 of 32: 75 px on a 600 px canvas) scores
0: copying a reference is the one hack that resemblance terms reward most. The shifted correlation
is scikit-image's ``match_template`` (zero-normalised cross-correlation) of the pool thumbnail over
the painting's thumbnail padded with white paper. Measured on the starter pool without shifts:
honest corpus variants reach at most 0.76 against any pool image; an exact copy 1.0, rotated 1.5
deg 0.99, 5 deg 0.91, and a copy shifted by 20 px dropped to 0.79 and escaped. With the shift and
mirror search: a copy moved by (30, -20) px 0.96, a mirrored copy 1.0 (both caught); honest renders
in ``tests/test_anti_hacking.py`` 0.61-0.71; 45 paintings of a 20-step CPU run 0.79 at most (0.76
unshifted), none flagged; pool images against the rest of the pool unchanged (median 0.79; the
peach/yellow/magenta hibiscus are one composition in three colours, 0.98).
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass

import numpy as np
from PIL import Image
from scipy.ndimage import gaussian_filter
from skimage import color, transform
from skimage.feature import match_template

from brushrl.pool.store import PoolEntry

_SIDE = 128
_PAINT_DIST = 32.0 / 255.0
_THUMB = 32
#: Largest shift, in thumbnail pixels, at which the copy guard still compares (module docstring).
COPY_MAX_SHIFT = 4
#: CIELAB bins of the palette: (L*, a*, b*) counts and ranges, 10 units a bin.
_LAB_BINS = (10, 14, 14)
_LAB_RANGE = ((0.0, 100.0), (-70.0, 70.0), (-70.0, 70.0))
#: Delta E (CIE76) at which the palette term falls to 1/e.
PALETTE_SCALE = 5.0
#: Side of the paint-mask grid of the shape term, and its blur in cells.
_MASK_GRID = 32
_MASK_BLUR = 1.0
#: Composition: bounding-box centre offset (canvas fractions) and border share that score 0.
OFF_CENTRE_MAX = 0.3
BORDER_MAX = 0.25
_BORDER_PX = 4
#: Coverage trapezoid: 0 at or below the first, 1 between the middle two, 0 at or above the last.
COVERAGE_RAMP = (0.01, 0.10, 0.50, 0.90)
#: Pigment-density levels of the layering term (bins on [32/255, 0.9]) and its ramp: the normalised
#: entropy at which it scores 0 and from which it scores 1.
_LEVEL_BINS = 12
_LEVEL_MAX = 0.9
LAYERING_RAMP = (0.2, 0.45)
#: Exponents of the weighted geometric mean (they sum to 1).
WEIGHTS = {"palette": 0.40, "shape": 0.25, "composition": 0.15, "coverage": 0.10, "layering": 0.10}
#: The terms every score reports, in order.
TERMS = tuple(WEIGHTS)


def _on_white(png: bytes) -> Image.Image:
    img = Image.open(io.BytesIO(png)).convert("RGBA")
    return Image.alpha_composite(Image.new("RGBA", img.size, (255, 255, 255, 255)), img)


def grey_thumbnail(png: bytes) -> np.ndarray:
    """float64 ``[32, 32]`` grey levels in [0, 1] of ``png`` composited on white (Lanczos)."""
    grey = _on_white(png).convert("L").resize((_THUMB, _THUMB), Image.LANCZOS)
    return np.asarray(grey, dtype=np.float64) / 255.0


@dataclass(frozen=True)
class ImageFeatures:
    """What the scorer keeps of one painting (module docstring for the definitions).

    Attributes:
        palette: float64 ``[K, 3]`` CIELAB centres of the occupied colour bins of painted pixels.
        palette_mass: float64 ``[K]`` their shares of the painted pixels (sum 1; K = 0 when blank).
        mask: float64 ``[32, 32]`` blurred area share of paint per cell, in [0, 1].
        coverage: painted fraction of the canvas in [0, 1].
        off_centre: distance of the painted bounding box's centre from the canvas centre, in
            canvas fractions (0 when blank).
        border: painted share of the canvas's outermost 4 (of 128) pixels, in [0, 1].
        levels: normalised entropy in [0, 1] of the painted pixels' pigment densities.
    """

    palette: np.ndarray
    palette_mass: np.ndarray
    mask: np.ndarray
    coverage: float
    off_centre: float
    border: float
    levels: float


def image_features(png: bytes) -> ImageFeatures:
    """Compute ``ImageFeatures`` of a PNG (any size, RGB or RGBA).

    Raises:
        PIL.UnidentifiedImageError: ``png`` is not a readable image.
    """
    rgb = np.asarray(_on_white(png).convert("RGB"), dtype=np.float64) / 255.0
    rgb = transform.resize(rgb, (_SIDE, _SIDE, 3), anti_aliasing=True)
    quantised = (rgb * 255).astype(np.uint8) >> 4
    keys = quantised[..., 0].astype(np.int32) * 256 + quantised[..., 1] * 16 + quantised[..., 2]
    modal = np.bincount(keys.ravel()).argmax()
    background = np.array([(modal >> 8) & 15, (modal >> 4) & 15, modal & 15]) * 16 / 255.0 + 8 / 255.0
    distance = np.linalg.norm(rgb - background, axis=-1)
    painted = distance > _PAINT_DIST
    cells = _SIDE // _MASK_GRID
    mask = gaussian_filter(painted.reshape(_MASK_GRID, cells, _MASK_GRID, cells).mean(axis=(1, 3)), _MASK_BLUR)
    ring = np.ones_like(painted)
    ring[_BORDER_PX:-_BORDER_PX, _BORDER_PX:-_BORDER_PX] = False
    if not painted.any():
        return ImageFeatures(np.zeros((0, 3)), np.zeros(0), mask, 0.0, 0.0, 0.0, 0.0)
    hist, edges = np.histogramdd(color.rgb2lab(rgb)[painted], bins=_LAB_BINS, range=_LAB_RANGE)
    occupied = np.nonzero(hist)
    centres = np.stack([(edges[k][occupied[k]] + edges[k][occupied[k] + 1]) / 2 for k in range(3)], axis=1)
    ys, xs = np.nonzero(painted)
    box = np.array([np.percentile(xs, [5, 95]).mean(), np.percentile(ys, [5, 95]).mean()]) / (_SIDE - 1)
    levels, _ = np.histogram(distance[painted], bins=_LEVEL_BINS, range=(_PAINT_DIST, _LEVEL_MAX))
    p = levels[levels > 0] / levels.sum()
    return ImageFeatures(
        palette=centres,
        palette_mass=hist[occupied] / hist.sum(),
        mask=mask,
        coverage=float(painted.mean()),
        off_centre=float(np.hypot(*(box - 0.5))),
        border=float(painted[ring].mean()),
        levels=float(-(p * np.log(p)).sum() / math.log(_LEVEL_BINS)),
    )


def palette_distance(a: ImageFeatures, b: ImageFeatures) -> float:
    """Symmetric mass-weighted chamfer distance (CIE76 Delta E) of two palettes; inf if either is blank."""
    if not len(a.palette) or not len(b.palette):
        return math.inf
    d = np.linalg.norm(a.palette[:, None, :] - b.palette[None, :, :], axis=-1)
    return float(0.5 * ((a.palette_mass * d.min(axis=1)).sum() + (b.palette_mass * d.min(axis=0)).sum()))


def shape_similarity(a: ImageFeatures, b: ImageFeatures) -> float:
    """Ruzicka similarity in [0, 1] of two paintings' blurred paint masks (0 if both are blank)."""
    top = np.maximum(a.mask, b.mask).sum()
    return float(np.minimum(a.mask, b.mask).sum() / top) if top > 0 else 0.0


def _trapezoid(x: float, ramp: tuple[float, float, float, float]) -> float:
    lo, full, last, hi = ramp
    if x <= lo or x >= hi:
        return 0.0
    return min(1.0, (x - lo) / (full - lo), (hi - x) / (hi - last))


def own_terms(f: ImageFeatures) -> dict[str, float]:
    """The terms that need no reference: ``composition``, ``coverage``, ``layering`` in [0, 1]."""
    composition = max(0.0, 1 - f.off_centre / OFF_CENTRE_MAX) * max(0.0, 1 - f.border / BORDER_MAX)
    return {"composition": composition if f.coverage else 0.0, "coverage": _trapezoid(f.coverage, COVERAGE_RAMP),
            "layering": min(1.0, max(0.0, (f.levels - LAYERING_RAMP[0]) / (LAYERING_RAMP[1] - LAYERING_RAMP[0])))}


def _palette_shape(a: ImageFeatures, b: ImageFeatures) -> tuple[float, float]:
    """The ``palette`` and ``shape`` terms, each in [0, 1], of painting ``a`` against reference ``b``."""
    return math.exp(-palette_distance(a, b) / PALETTE_SCALE), shape_similarity(a, b)


def _combine_resemblance(palette: float, shape: float) -> float:
    """``palette ** (0.4 / 0.65) * shape ** (0.25 / 0.65)``: the two reference terms' weighted
    geometric mean (module docstring)."""
    wp, ws = WEIGHTS["palette"], WEIGHTS["shape"]
    return palette ** (wp / (wp + ws)) * shape ** (ws / (wp + ws))


def resemblance(a: ImageFeatures, b: ImageFeatures) -> float:
    """The score's per-reference resemblance in [0, 1] of ``a`` and ``b`` (module docstring: the
    weighted geometric mean of ``palette`` and ``shape``); symmetric, 1 for identical non-blank
    paintings, 0 when either is blank."""
    return _combine_resemblance(*_palette_shape(a, b))


def score_terms(f: ImageFeatures, refs: list[tuple[float, ImageFeatures]]) -> tuple[float, dict[str, float]]:
    """The painting's score in [0, 1] and its terms against ``refs`` (``(value, features)`` pairs;
    ``palette`` and ``shape`` reported as value-weighted means over the references).

    Raises:
        ValueError: no references, or their values sum to 0.
    """
    total = sum(v for v, _ in refs)
    if not refs or total <= 0:
        raise ValueError("no references to score against")
    per_ref = [(v, *_palette_shape(f, r)) for v, r in refs]
    resembles = sum(v * _combine_resemblance(p, s) for v, p, s in per_ref) / total
    terms = {"palette": sum(v * p for v, p, _ in per_ref) / total, "shape": sum(v * s for v, _, s in per_ref) / total,
             **own_terms(f)}
    score = resembles ** (WEIGHTS["palette"] + WEIGHTS["shape"])
    for name in ("composition", "coverage", "layering"):
        score *= terms[name] ** WEIGHTS[name]
    return float(score), terms


def similarity(a: ImageFeatures, b: ImageFeatures) -> float:
    """Score in [0, 1] of painting ``a`` with ``b`` as its one reference (module docstring)."""
    return score_terms(a, [(1.0, b)])[0]


def subject_key(phrase: str) -> str:
    """A subject phrase as compared with others: lower case, full stops and extra spaces dropped."""
    return " ".join(phrase.lower().replace(".", " ").split())


class PoolSimilarityScorer:
    """Scores paintings against references of a reference pool (features cached per reference).

    Args:
        entries: the pool's references (any tiers).
        tier_values: tier -> value in (0, 1]: how much a reference of that tier counts in the mean
            over references; references of other tiers are never scored against but still
            guarded against copies.
        copy_min_corr: see the module docstring (above 1 disables the guard).
    """

    def __init__(self, entries: list[PoolEntry], tier_values: dict[str, float], copy_min_corr: float = 0.9):
        self.tier_values = dict(tier_values)
        self.copy_min_corr = copy_min_corr
        self.entries = [e for e in entries if e.tier in self.tier_values]
        self._refs = {e.id: (e.tier, image_features(e.path.read_bytes())) for e in self.entries}
        thumbs = [t for t in (grey_thumbnail(e.path.read_bytes()) for e in entries) if t.std() > 1e-9]
        self._thumbs = thumbs + [np.fliplr(t) for t in thumbs]  # a mirrored copy is a copy too; flat ones match nothing

    def reference_features(self, ref_id: str) -> ImageFeatures:
        """The cached features of scored pool image ``ref_id``.

        Raises:
            KeyError: ``ref_id`` is not in the pool, or its tier is not scored.
        """
        return self._refs[ref_id][1]

    def named_subjects(self, prompt: str) -> list[str]:
        """The subjects (``subject_key`` form) of the scored pool images (``PoolEntry.prompt``, e.g.
        ``a coral poppy``) that are the longest found as a phrase in ``prompt`` (case and full stops
        ignored: ``Paint a wild rose.`` names ``a wild rose``, not ``a rose``), sorted; [] if none.
        More than one only when the prompt names several subjects of that same length."""
        text = f" {subject_key(prompt)} "
        found = {subject_key(e.prompt) for e in self.entries if e.prompt and f" {subject_key(e.prompt)} " in text}
        longest = max(map(len, found), default=0)
        return sorted(k for k in found if len(k) == longest)

    def subject_references(self, prompt: str) -> list[str]:
        """Ids of the scored pool images of the prompt's subject(s) (:meth:`named_subjects`); [] if none."""
        named = set(self.named_subjects(prompt))
        return sorted(e.id for e in self.entries if e.prompt and subject_key(e.prompt) in named)

    def copy_correlation(self, png: bytes) -> float:
        """Largest Pearson correlation in [-1, 1] between the grey thumbnail of ``png``, shifted by
        up to ``COPY_MAX_SHIFT`` pixels each way (white paper fills the border), and that of any pool
        image or its mirror image (0 for a flat image or an empty pool)."""
        thumb = grey_thumbnail(png)
        if not self._thumbs or thumb.std() < 1e-9:
            return 0.0
        padded = np.pad(thumb, COPY_MAX_SHIFT, constant_values=1.0)
        return max((float(match_template(padded, ref).max()) for ref in self._thumbs), default=0.0)

    def score_terms(self, png: bytes, ref_ids: list[str]) -> tuple[float, dict[str, float]]:
        """``(score, terms)`` of ``png`` against ``ref_ids`` (:func:`score_terms`) plus the term
        ``copy`` (the copy correlation); the score is 0 for a copy of a pool image.

        Raises:
            KeyError: a reference id is not in the pool (or its tier is not scored).
            ValueError: ``ref_ids`` is empty.
        """
        if not ref_ids:
            raise ValueError("no references to score against")
        return self.score_features(image_features(png), self.copy_correlation(png), ref_ids)

    def score_features(self, f: ImageFeatures, copy: float, ref_ids: list[str]) -> tuple[float, dict[str, float]]:
        """:meth:`score_terms` of a painting whose features ``f`` and copy correlation ``copy``
        (:meth:`copy_correlation`) are computed already (the pool scorer actor computes them once for
        every component it gives). Raises as :meth:`score_terms`."""
        if not ref_ids:
            raise ValueError("no references to score against")
        refs = [(self.tier_values[self._refs[i][0]], self._refs[i][1]) for i in ref_ids]
        score, terms = score_terms(f, refs)
        terms["copy"] = copy
        return (0.0 if copy >= self.copy_min_corr else score), terms

    def score(self, png: bytes, ref_ids: list[str]) -> float:
        """The score in [0, 1] of ``png`` against ``ref_ids``; 0 for a copy of a pool image (raises as
        :meth:`score_terms`)."""
        return self.score_terms(png, ref_ids)[0]

    def score_many(self, pngs: list[bytes], ref_ids: list[str]) -> list[tuple[float, dict[str, float]] | None]:
        """:meth:`score_terms` for each PNG; a PNG that cannot be scored gets None (not raised)."""
        out: list[tuple[float, dict[str, float]] | None] = []
        for png in pngs:
            try:
                out.append(self.score_terms(png, ref_ids))
            except Exception:  # noqa: BLE001 - one bad image must not fail its group
                out.append(None)
        return out
