"""CPU proxy scorer: how close a painting is to a group's references from the reference pool.

This stands in, on the CPU default, for the real scorers (HPSv3 and the pairwise VLM judge, which
need GPUs): it compares colour and edge statistics of the painting with those of references drawn
from the tiers of a reference pool. It rewards paintings that use colour and soft edges the way the
references do; it has no notion of composition or subject and is gameable by copying a reference.
Treat its value as a smoke signal for the pipeline, not as taste.

Features (scikit-image), on the canvas composited on white and resized to 128x128 pixels:
    * colour: a CIELAB histogram (4 L* x 6 a* x 6 b* bins) of the painted pixels;
    * edges: a histogram (8 bins on [0, 0.4]) of Sobel gradient magnitudes of the painted pixels;
      watercolour washes have many soft, few hard edges;
    * coverage: the painted fraction of the canvas.
A pixel is painted when its RGB distance from the modal (background) colour exceeds 32/255 (the HF
reproduction's paint-fraction rule). Similarity of two paintings is
``0.5 * BC(colour) + 0.3 * BC(edges) + 0.2 * (1 - min(1, |cov_a - cov_b| / max(cov_b, 0.05)))``
with BC the Bhattacharyya coefficient ``sum(sqrt(p * q))`` of two normalised histograms, so it lies
in [0, 1]. A painting's score is the mean over its references of ``tier_value * similarity``.

Copy guard: a painting whose 32x32 grey thumbnail (composited on white) has a Pearson correlation
of at least ``copy_min_corr`` with that of any pool image (or its mirror image), of any tier, at
any shift of up to ``COPY_MAX_SHIFT`` thumbnail pixels (4 of 32: 75 px on a 600 px canvas) scores
0: copying a reference is the one hack that the (translation-invariant) similarity would reward
most. The shifted correlation is scikit-image's ``match_template`` (zero-normalised
cross-correlation) of the pool thumbnail over the painting's thumbnail padded with white paper.
Measured on the starter pool without shifts: honest corpus variants reach at most 0.76 against any
pool image; an exact copy 1.0, rotated 1.5 deg 0.99, 5 deg 0.91, and a copy shifted by 20 px
dropped to 0.79 and escaped. With the shift and mirror search: a copy moved by (30, -20) px 0.96,
a mirrored copy 1.0 (both caught); honest renders in ``tests/test_anti_hacking.py`` 0.61-0.71; 45
paintings of a 20-step CPU run 0.79 at most (0.76 unshifted), none flagged; pool images against
the rest of the pool unchanged (median 0.79; the peach/yellow/magenta hibiscus are one composition
in three colours, 0.98).
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np
from PIL import Image
from skimage import color, filters, transform
from skimage.feature import match_template

from brushrl.pool.store import PoolEntry

_SIDE = 128
_LAB_BINS = (4, 6, 6)
_LAB_RANGE = ((0.0, 100.0), (-60.0, 80.0), (-60.0, 80.0))
_EDGE_BINS = 8
_EDGE_MAX = 0.4
_PAINT_DIST = 32.0 / 255.0
_THUMB = 32
#: Largest shift, in thumbnail pixels, at which the copy guard still compares (module docstring).
COPY_MAX_SHIFT = 4


def grey_thumbnail(png: bytes) -> np.ndarray:
    """float64 ``[32, 32]`` grey levels in [0, 1] of ``png`` composited on white (Lanczos)."""
    img = Image.open(io.BytesIO(png)).convert("RGBA")
    white = Image.new("RGBA", img.size, (255, 255, 255, 255))
    grey = Image.alpha_composite(white, img).convert("L").resize((_THUMB, _THUMB), Image.LANCZOS)
    return np.asarray(grey, dtype=np.float64) / 255.0


@dataclass(frozen=True)
class ImageFeatures:
    """Feature vectors of one painting.

    Attributes:
        colour: float64 ``[144]`` normalised CIELAB histogram of painted pixels (zeros if none).
        edges: float64 ``[8]`` normalised Sobel-magnitude histogram of painted pixels.
        coverage: painted fraction of the canvas in [0, 1].
    """

    colour: np.ndarray
    edges: np.ndarray
    coverage: float


def _normalise(h: np.ndarray) -> np.ndarray:
    total = h.sum()
    return h / total if total > 0 else np.zeros_like(h, dtype=np.float64)


def image_features(png: bytes) -> ImageFeatures:
    """Compute ``ImageFeatures`` of a PNG (any size, RGB or RGBA).

    Raises:
        PIL.UnidentifiedImageError: ``png`` is not a readable image.
    """
    img = Image.open(io.BytesIO(png)).convert("RGBA")
    white = Image.new("RGBA", img.size, (255, 255, 255, 255))
    rgb = np.asarray(Image.alpha_composite(white, img).convert("RGB"), dtype=np.float64) / 255.0
    rgb = transform.resize(rgb, (_SIDE, _SIDE, 3), anti_aliasing=True)
    quantised = (rgb * 255).astype(np.uint8) >> 4
    keys = quantised[..., 0].astype(np.int32) * 256 + quantised[..., 1] * 16 + quantised[..., 2]
    modal = np.bincount(keys.ravel()).argmax()
    background = np.array([(modal >> 8) & 15, (modal >> 4) & 15, modal & 15]) * 16 / 255.0 + 8 / 255.0
    painted = np.linalg.norm(rgb - background, axis=-1) > _PAINT_DIST
    lab = color.rgb2lab(rgb)[painted]
    colour, _ = np.histogramdd(lab, bins=_LAB_BINS, range=_LAB_RANGE)
    magnitude = filters.sobel(color.rgb2gray(rgb))[painted]
    edges, _ = np.histogram(np.clip(magnitude, 0, _EDGE_MAX), bins=_EDGE_BINS, range=(0, _EDGE_MAX))
    return ImageFeatures(
        colour=_normalise(colour.ravel()),
        edges=_normalise(edges.astype(np.float64)),
        coverage=float(painted.mean()),
    )


def similarity(a: ImageFeatures, b: ImageFeatures) -> float:
    """Similarity in [0, 1] of painting ``a`` to reference ``b`` (formula in the module docstring)."""
    bc_colour = float(np.sqrt(a.colour * b.colour).sum())
    bc_edges = float(np.sqrt(a.edges * b.edges).sum())
    coverage = 1.0 - min(1.0, abs(a.coverage - b.coverage) / max(b.coverage, 0.05))
    return 0.5 * bc_colour + 0.3 * bc_edges + 0.2 * coverage


class PoolSimilarityScorer:
    """Scores paintings against references of a reference pool (features cached per reference).

    Args:
        entries: the pool's references (any tiers).
        tier_values: tier -> value in [0, 1]; references of other tiers are ignored for scoring
            but still guarded against copies.
        copy_min_corr: see the module docstring (above 1 disables the guard).
    """

    def __init__(self, entries: list[PoolEntry], tier_values: dict[str, float], copy_min_corr: float = 0.9):
        self.tier_values = dict(tier_values)
        self.copy_min_corr = copy_min_corr
        self._refs = {
            e.id: (e.tier, image_features(e.path.read_bytes()))
            for e in entries
            if e.tier in self.tier_values
        }
        thumbs = [t for t in (grey_thumbnail(e.path.read_bytes()) for e in entries) if t.std() > 1e-9]
        self._thumbs = thumbs + [np.fliplr(t) for t in thumbs]  # a mirrored copy is a copy too; flat ones match nothing

    def copy_correlation(self, png: bytes) -> float:
        """Largest Pearson correlation in [-1, 1] between the grey thumbnail of ``png``, shifted by
        up to ``COPY_MAX_SHIFT`` pixels each way (white paper fills the border), and that of any pool
        image or its mirror image (0 for a flat image or an empty pool)."""
        thumb = grey_thumbnail(png)
        if not self._thumbs or thumb.std() < 1e-9:
            return 0.0
        padded = np.pad(thumb, COPY_MAX_SHIFT, constant_values=1.0)
        return max((float(match_template(padded, ref).max()) for ref in self._thumbs), default=0.0)

    def score(self, png: bytes, ref_ids: list[str]) -> float:
        """Mean over ``ref_ids`` of ``tier_value * similarity`` in [0, 1]; 0 for a copy of a pool image.

        Raises:
            KeyError: a reference id is not in the pool (or its tier is not scored).
            ValueError: ``ref_ids`` is empty.
        """
        if not ref_ids:
            raise ValueError("no references to score against")
        if self.copy_correlation(png) >= self.copy_min_corr:
            return 0.0
        feats = image_features(png)
        values = []
        for ref_id in ref_ids:
            tier, ref = self._refs[ref_id]
            values.append(self.tier_values[tier] * similarity(feats, ref))
        return float(np.mean(values))

    def score_many(self, pngs: list[bytes], ref_ids: list[str]) -> list[float | None]:
        """``score`` for each PNG; a PNG that cannot be scored gets None (the error is not raised)."""
        out: list[float | None] = []
        for png in pngs:
            try:
                out.append(self.score(png, ref_ids))
            except Exception:  # noqa: BLE001 - one bad image must not fail its group
                out.append(None)
        return out
