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

The same features give two reward components (off by default; the pool scorer actor,
:class:`brushrl.reward.actor.PoolScorerActor`, computes them; docs/reward.md "subject and novelty"):

* ``subject`` (:func:`subject_values`): the discriminability reward of Luo et al., "Discriminability
  objective for training descriptive captions" (CVPR 2018, arXiv 1803.04376), which rewards a
  caption by how well a retrieval model picks its own image out of distractors. Here the
  distractors are the pool's other subjects: ``softmax(subject_scores(f) / temperature)`` over the
  pool's subjects, the value the probability of the prompt's own subject. It is high only when the
  painting resembles its own subject *more than the others*, which ``pool_similarity`` (resemblance
  to the subject's references alone) does not ask. Its mean over a painting's possible subjects is
  ``1 / subjects`` whatever the painting, so a policy that paints one flower for every subject
  earns chance on average. A copy of a pool image scores 0 (the copy guard, as ``pool_similarity``).
* ``novelty`` (:func:`novelty`): per painting of a group (one prompt's passing paintings),
  ``min(1, (1 - max resemblance to any *other* painting of the group) / distinct)``: 0 for a
  painting another one duplicates, 1 from ``distinct`` on (a near-duplicate penalty that does not
  pay for being ever more different, which would pull away from the subject).

**Colour accuracy** (issue 35; docs/reward.md, "Colour accuracy") asks a simpler question of a painting whose
prompt names a colour word ("a red tulip"): is its dominant painted colour that word, among the
colour words the evaluation's prompts use? :class:`ColourWords` reads it from the pixels alone,
with no pool: the paper is the image's most common colour; a pixel holds paint when it is more than
``PAINTED_DELTA_E`` (CIE76, in CIELAB) from the paper; each painted pixel goes to the candidate
word (or to foliage, ``FOLIAGE``, dropped) whose *glaze curve* passes nearest to it, a word's
curves being each of its reference colours (``brushrl.corpus.colours.COLOUR_REFERENCES``) mixed
into this paper at ``GLAZE_FACTORS`` with p5.brush's own Kubelka-Munk mixing
(:mod:`brushrl.reward.spectral`): watercolour is transparent, and a pale blue wash on cream paper
is grey-green, which a nearest-reference rule reads as white or green. The dominant word is the one
with the most pixels. :func:`colour_results` gives it per painting; ``eval_report`` the split's
accuracy, its interval and chance.

``python -m brushrl.reward.painting_metrics [POOL]`` measures the ranges of the three measures
(``measures``) and of the two components (``reward``) on a pool itself (the figures in
docs/reward.md); ``--colour`` instead renders corpus sketches of colour-named subjects in Chromium
and prints the colour measure's own accuracy on them (:func:`colour_validation`).
"""

from __future__ import annotations

import argparse
import io
import json
import random
from collections import Counter
from dataclasses import dataclass
from itertools import combinations

import numpy as np
from PIL import Image

from brushrl.corpus.colours import COLOUR_REFERENCES, COLOUR_WORDS, colour_word
from brushrl.corpus.palettes import PALETTES
from brushrl.pool.store import PoolEntry, ReferencePool
from brushrl.prompts import user_prompt
from brushrl.reward.base import ScoreOut
from brushrl.reward.pool_scorer import ImageFeatures, PoolSimilarityScorer, image_features, resemblance, subject_key
from brushrl.reward.spectral import glazes


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
        self._init(PoolSimilarityScorer(entries, tier_values, copy_min_corr))

    @classmethod
    def of_scorer(cls, scorer: PoolSimilarityScorer) -> "PoolSubjects":
        """The subjects of a pool scorer already loaded (its cached reference features and copy
        thumbnails; the pool scorer actor loads the pool once for every component). Raises as the
        constructor."""
        self = cls.__new__(cls)
        self._init(scorer)
        return self

    def _init(self, scorer: PoolSimilarityScorer) -> None:
        self.copy_min_corr = scorer.copy_min_corr
        self._guard = scorer
        refs: dict[str, list[tuple[float, ImageFeatures]]] = {}
        for e in scorer.entries:  # the scored tiers' references, their features cached by the scorer
            if e.prompt:
                refs.setdefault(subject_key(e.prompt), []).append(
                    (scorer.tier_values[e.tier], scorer.reference_features(e.id)))
        if not refs:
            raise ValueError("no pool reference of a scored tier has a subject")
        self.refs = refs
        #: Subjects in pool order (ties of :meth:`nearest_subject` go to the first).
        self.subjects = list(refs)

    @property
    def scorer(self) -> PoolSimilarityScorer:
        """The pool scorer whose features and copy guard these measures use."""
        return self._guard

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

    def subject_of(self, prompt: str) -> str | None:
        """The pool subject (``subject_key`` form) that ``prompt`` names, the one whose references
        the pool scorer scores it against (``PoolSimilarityScorer.named_subjects``: the longest pool
        subject found in it); None when it names none, or several."""
        named = self._guard.named_subjects(prompt)
        return named[0] if len(named) == 1 else None

    def unknown(self, subjects: list[str], template: str) -> list[str]:
        """The phrases of ``subjects`` whose prompt (``template`` with ``{subject}`` filled) names no
        pool subject, or several (:meth:`subject_of` is None): the ``subject`` component scores
        every painting of such a prompt None (cause ``unknown_subject``)."""
        return [s for s in subjects if self.subject_of(user_prompt(s, template)) is None]

    def subject_probabilities(self, f: ImageFeatures, temperature: float) -> np.ndarray:
        """float64 ``[subjects]``: ``softmax(subject_scores(f) / temperature)``, summing to 1."""
        z = self.subject_scores(f) / temperature
        p = np.exp(z - z.max())
        return p / p.sum()

    def copy_correlation(self, png: bytes) -> float:
        """The copy guard's largest correlation c in [-1, 1] of ``png`` with any pool image
        (``PoolSimilarityScorer.copy_correlation``; module docstring)."""
        return self._guard.copy_correlation(png)

    def copy_distance(self, png: bytes) -> float:
        """``1 - c`` in [0, 2], c the copy guard's largest correlation with any pool image (module docstring)."""
        return max(0.0, 1.0 - self.copy_correlation(png))  # a correlation of 1 + rounding is 0

    def is_copy(self, distance: float) -> bool:
        """Whether a copy distance is at or below the copy threshold (``c >= copy_min_corr``)."""
        return 1.0 - distance >= self.copy_min_corr


def resemblances(features: list[ImageFeatures]) -> np.ndarray:
    """float64 ``[n, n]``: ``resemblance`` of every pair of ``features`` (symmetric; the diagonal,
    a painting with itself, is NaN)."""
    n = len(features)
    out = np.full((n, n), np.nan)
    for i, j in combinations(range(n), 2):
        out[i, j] = out[j, i] = resemblance(features[i], features[j])
    return out


def diversity(features: list[ImageFeatures]) -> float | None:
    """Mean ``1 - resemblance`` in [0, 1] over the pairs of ``features``; None for fewer than two."""
    r = resemblances(features)
    pairs = 1.0 - r[np.triu_indices(len(features), 1)]
    return float(pairs.mean()) if len(pairs) else None


def nearest_resemblance(features: list[ImageFeatures]) -> list[float]:
    """Per painting, its largest ``resemblance`` in [0, 1] to any *other* of ``features`` (0 alone)."""
    return [float(np.nanmax(row)) if len(row) > 1 else 0.0 for row in resemblances(features)]


def novelty(features: list[ImageFeatures], distinct: float = 1.0) -> list[float]:
    """Per painting of one group, ``min(1, (1 - r) / distinct)`` in [0, 1], r its
    :func:`nearest_resemblance` (a painting alone in its group: r = 0, so 1). Identical paintings:
    0; ``distinct`` 1: the plain ``1 - r``."""
    return [min(1.0, (1.0 - r) / distinct) for r in nearest_resemblance(features)]


def subject_values(pool: PoolSubjects, features: list[ImageFeatures | None], copies: list[float | None],
                   prompt: str, temperature: float) -> list[ScoreOut]:
    """The ``subject`` reward component (module docstring) of each painting of a group.

    Args:
        features: each painting's features (None: the PNG could not be read).
        copies: each painting's copy-guard correlation (``PoolSimilarityScorer.copy_correlation``;
            None with a None feature).
        prompt: the group's prompt; its subject is :meth:`PoolSubjects.subject_of`.
        temperature: the softmax temperature (``reward.subject.temperature``).

    Returns:
        One ``ScoreOut`` a painting: value = the probability of the prompt's subject, 0 for a copy
        (``c >= copy_min_corr``); raw ``own`` (its resemblance to its own subject) and ``rival`` (the
        largest to another). None with cause ``unknown_subject`` for every painting when the prompt
        names no pool subject (or several): not a fault of the painting, so excluded and counted like
        an infrastructure failure, never 0; ``bad_image`` for an unreadable PNG.
    """
    subject = pool.subject_of(prompt)
    if subject is None:
        return [ScoreOut(None, cause="unknown_subject") for _ in features]
    own = pool.subjects.index(subject)
    out = []
    for f, c in zip(features, copies):
        if f is None:
            out.append(ScoreOut(None, cause="bad_image"))
            continue
        scores = pool.subject_scores(f)
        p = float(pool.subject_probabilities(f, temperature)[own])
        rival = float(np.delete(scores, own).max()) if len(scores) > 1 else 0.0
        out.append(ScoreOut(0.0 if c >= pool.copy_min_corr else p, {"own": float(scores[own]), "rival": rival}))
    return out


def novelty_values(features: list[ImageFeatures | None], distinct: float) -> list[ScoreOut]:
    """The ``novelty`` reward component (:func:`novelty`) of each painting of a group, among the
    group's readable paintings; raw ``nearest`` (its :func:`nearest_resemblance`). None with cause
    ``bad_image`` for an unreadable PNG."""
    ok = [i for i, f in enumerate(features) if f is not None]
    nearest = dict(zip(ok, nearest_resemblance([features[i] for i in ok])))
    return [ScoreOut(min(1.0, (1.0 - nearest[i]) / distinct), {"nearest": nearest[i]}) if i in nearest
            else ScoreOut(None, cause="bad_image") for i in range(len(features))]


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


# ------------------------------------------------------------------ colour accuracy
#: CIE76 distance in CIELAB from the paper above which a pixel holds paint. On corpus renders
#: (docs/reward.md, "Colour accuracy") 3, 4 and 5 measure alike; from 10 up the palest washes (white
#: flowers' grey-lilac, yellow) are lost, from 2.5 down the paper's grain is counted. 4: the middle.
PAINTED_DELTA_E = 4.0
#: How much paint a pixel may hold (p5.brush's ``mixIntensity``, 0 bare paper, 1 the pigment) at
#: which each reference colour's glaze over the paper is sampled.
GLAZE_FACTORS = np.linspace(0.03, 1.0, 33)
#: The corpus's greens (every palette's ``leaf``, ``leaf_dark`` and ``wood``): a painted pixel
#: whose nearest glaze is one of theirs is foliage, not the subject's colour, and is dropped.
FOLIAGE: tuple[str, ...] = tuple(sorted({c for family in PALETTES.values() for p in family
                                          for c in (p.leaf, p.leaf_dark, p.wood)}))


def _rgb(hexes) -> np.ndarray:
    """float64 ``[n, 3]`` in [0, 1] of ``#rrggbb`` strings."""
    return np.array([[int(h[i:i + 2], 16) for i in (1, 3, 5)] for h in hexes], dtype=np.float64) / 255.0


def read_rgb(image: bytes | np.ndarray) -> np.ndarray:
    """uint8 ``[H, W, 3]`` of PNG bytes or of an RGB(A) array (alpha dropped)."""
    if isinstance(image, (bytes, bytearray)):
        return np.asarray(Image.open(io.BytesIO(image)).convert("RGB"))
    arr = np.asarray(image)
    if arr.ndim != 3 or arr.shape[2] not in (3, 4):
        raise ValueError(f"expected an RGB image [H, W, 3], got shape {arr.shape}")
    return arr[..., :3].astype(np.uint8)


class ColourWords:
    """The colour measure (module docstring) for one candidate set of colour words.

    Args:
        words: the candidate words, each a key of ``brushrl.corpus.colours.COLOUR_REFERENCES``
            (for an evaluation: the colour words its split's prompts use).
        painted_delta_e: the paint threshold (``PAINTED_DELTA_E``).

    Raises:
        ValueError: no word, or a word with no reference colours (named, with the known words).
    """

    def __init__(self, words, painted_delta_e: float = PAINTED_DELTA_E):
        self.words: tuple[str, ...] = tuple(sorted(set(words)))
        unknown = [w for w in self.words if w not in COLOUR_REFERENCES]
        if not self.words or unknown:
            raise ValueError(f"colour words {unknown or '(none)'}: expected some of {sorted(COLOUR_REFERENCES)}")
        self.painted_delta_e = painted_delta_e
        self._trees: dict[int, tuple] = {}

    def _tree(self, paper: int):
        """A KD-tree of every candidate word's and the foliage's glazes over ``paper`` (packed
        ``0xRRGGBB``) in CIELAB, and each point's label (a word's index; ``len(words)``: foliage)."""
        if paper not in self._trees:
            from scipy.spatial import cKDTree
            from skimage.color import rgb2lab

            rgb = np.array([paper >> 16, (paper >> 8) & 255, paper & 255], dtype=np.float64) / 255.0
            points, labels = [], []
            for i, hexes in enumerate([COLOUR_REFERENCES[w] for w in self.words] + [FOLIAGE]):
                g = glazes(rgb, _rgb(hexes), GLAZE_FACTORS).reshape(-1, 3)
                points.append(rgb2lab(g[None])[0])
                labels += [i] * len(g)
            if len(self._trees) >= 32:  # a few creams in practice; bound it anyway
                self._trees.clear()
            self._trees[paper] = (cKDTree(np.concatenate(points)), np.array(labels))
        return self._trees[paper]

    def counts(self, image: bytes | np.ndarray) -> dict:
        """Where a painting's pixels go.

        Returns:
            ``{"paper": "#rrggbb" (the most common colour), "pixels": n, "painted": n (farther than
            the threshold from the paper), "foliage": n (painted, nearest a green's glaze),
            "words": {word: n painted pixels nearest its glazes}}``.
        """
        from skimage.color import rgb2lab

        rgb = read_rgb(image).reshape(-1, 3)
        key = (rgb[:, 0].astype(np.int64) << 16) | (rgb[:, 1].astype(np.int64) << 8) | rgb[:, 2]
        keys, n = np.unique(key, return_counts=True)
        vals = np.stack([keys >> 16, (keys >> 8) & 255, keys & 255], axis=1)
        lab = rgb2lab(vals[None].astype(np.float64) / 255.0)[0]
        at = int(n.argmax())
        painted = np.linalg.norm(lab - lab[at], axis=1) > self.painted_delta_e
        tree, labels = self._tree(int(keys[at]))
        per = np.zeros(len(self.words) + 1, dtype=np.int64)
        if painted.any():
            _, j = tree.query(lab[painted])
            per = np.bincount(labels[j], weights=n[painted], minlength=len(self.words) + 1).astype(np.int64)
        return {"paper": f"#{int(keys[at]):06x}", "pixels": int(n.sum()), "painted": int(n[painted].sum()),
                "foliage": int(per[-1]), "words": {w: int(c) for w, c in zip(self.words, per[:-1])}}

    def dominant(self, image: bytes | np.ndarray) -> str | None:
        """The word with the most painted pixels (ties: the first in sorted order); None when no
        painted pixel goes to any word (a blank or all-green painting)."""
        counts = self.counts(image)["words"]
        best = max(counts.values())
        return None if best == 0 else next(w for w, c in counts.items() if c == best)


def colour_results(paintings: list[Painting], words) -> list[dict]:
    """Per painting: ``{"word": the colour word its subject names (None: none), "dominant": its
    dominant word among ``words`` (:class:`ColourWords`; None: nothing painted in any), "correct":
    dominant == word (None when the subject names no colour word or one outside ``words``, so
    there is nothing to match)}``. A painting is measured only when its word is a candidate.

    Raises:
        ValueError: as :class:`ColourWords`. PIL.UnidentifiedImageError: an unreadable PNG.
    """
    measure_ = ColourWords(words)
    out = []
    for p in paintings:
        word = colour_word(p.subject)
        if word is None or word not in measure_.words:
            out.append({"word": word, "dominant": None, "correct": None})
            continue
        dominant = measure_.dominant(p.png)
        out.append({"word": word, "dominant": dominant, "correct": dominant == word})
    return out


def colour_chance(prompt_words: list[str], words) -> dict:
    """What colour accuracy a painter that ignores the prompt scores: ``uniform`` ``1 / K`` (a
    word drawn at random among the K candidates ``words``) and ``prompt_blind`` the largest share
    of one word among ``prompt_words`` (the measured paintings' prompts' words; always painting
    that word, ``prompt_blind_word``, scores it; None for no painting)."""
    k = len(set(words))
    top = Counter(prompt_words).most_common(1)
    return {"uniform": 1.0 / k if k else None,
            "prompt_blind": top[0][1] / len(prompt_words) if top else None,
            "prompt_blind_word": top[0][0] if top else None}


def colour_cases(recoloured: int = 1, kept: int = 1, variants: int = 12) -> list[tuple[str, "object"]]:
    """Corpus sketches to validate the colour measure on: for every base whose canonical subject
    names a colour word, its canonical sketch (``make_variant(base, 0)``), then the first
    ``recoloured`` of its variants 1..``variants - 1`` repainted in another colour word and the
    first ``kept`` keeping the base's colour. Returns ``[(kind, CorpusItem)]``, kind ``canonical``,
    ``recoloured`` or ``kept``."""
    from brushrl.corpus.build import make_variant
    from brushrl.corpus.catalogue import BASES

    out = []
    for base in BASES:
        canonical = make_variant(base, 0)
        own = colour_word(canonical.subject)
        if own is None:
            continue
        out.append(("canonical", canonical))
        left = {"recoloured": recoloured, "kept": kept}
        for i in range(1, variants):
            item = make_variant(base, i)
            word = colour_word(item.subject)
            kind = "kept" if word == own else "recoloured" if word is not None else None
            if kind and left[kind] > 0:
                left[kind] -= 1
                out.append((kind, item))
    return out


def split_words() -> dict[str, list[str]]:
    """The colour words of the default evaluation's splits (``eval.subjects``, ``prompts.subjects``,
    ``eval.unseen_subjects``): the candidate sets :func:`colour_validation` measures with too."""
    from brushrl.config import EvalConfig, PromptsConfig

    splits = {"held_out": EvalConfig().subjects, "training": PromptsConfig().subjects,
              "unseen": EvalConfig().unseen_subjects}
    return {k: sorted({colour_word(s) for s in v} - {None}) for k, v in splits.items()}


def colour_validation(cases: list[tuple[str, "object"]], words=COLOUR_WORDS, word_sets: dict | None = None,
                      renderer=None, size: int = 600, save: str | None = None) -> dict:
    """The colour measure's own accuracy on corpus sketches (:func:`colour_cases`) rendered in
    Chromium (``brushrl.render.browser.Renderer``, ``render`` defaults; seed 0): each one's dominant
    word among ``words`` against the word its subject names; then again among each candidate set
    of ``word_sets`` (default :func:`split_words`: what an evaluation's split measures among), on
    the renders whose word is in the set.

    Args:
        save: a folder to write each render to (``<name>.png``, ``/`` as ``_``), or None.

    Returns:
        ``{"n", "correct", "accuracy", "words", "by_kind": {kind: {"n", "correct", "accuracy"}},
        "confusions": {"said -> measured": n}, "by_word_set": {name: {"words", "n", "correct",
        "accuracy", "confusions"}}, "failed_renders": [name], "items": [{"name", "kind", "subject",
        "word", "dominant"}]}``.
    """
    from pathlib import Path

    from brushrl.config import RenderConfig
    from brushrl.render.browser import Renderer

    measure_ = ColourWords(words)
    word_sets = split_words() if word_sets is None else word_sets
    own = renderer is None
    renderer = renderer or Renderer.from_config(RenderConfig())
    items, pngs, failed = [], [], []
    try:
        for kind, item in cases:
            word = colour_word(item.subject)
            if word not in measure_.words:
                continue
            res = renderer.render(item.code, seed=0, size=size, deadline_s=90, attempts=1)
            if res.status != "ok" or not res.png:
                failed.append(item.name)
                continue
            if save:
                Path(save).mkdir(parents=True, exist_ok=True)
                (Path(save) / f"{item.name.replace('/', '_')}.png").write_bytes(res.png)
            pngs.append(res.png)
            items.append({"name": item.name, "kind": kind, "subject": item.subject, "word": word,
                          "dominant": measure_.dominant(res.png)})
    finally:
        if own:
            renderer.close()

    def tally(xs: list[dict]) -> dict:
        ok = sum(x["dominant"] == x["word"] for x in xs)
        return {"n": len(xs), "correct": ok, "accuracy": ok / len(xs) if xs else None,
                "confusions": dict(Counter(f"{x['word']} -> {x['dominant']}" for x in xs
                                           if x["dominant"] != x["word"]).most_common())}

    by_set = {}
    for name, ws in word_sets.items():
        m = ColourWords(ws)
        xs = [dict(x, dominant=m.dominant(png)) for x, png in zip(items, pngs) if x["word"] in m.words]
        by_set[name] = {"words": list(m.words), **tally(xs)}
    overall = tally(items)
    return {**{k: overall[k] for k in ("n", "correct", "accuracy")}, "words": list(measure_.words),
            "by_kind": {k: {key: v for key, v in tally([x for x in items if x["kind"] == k]).items()
                            if key != "confusions"} for k in ("canonical", "recoloured", "kept")},
            "confusions": overall["confusions"], "by_word_set": by_set, "failed_renders": failed, "items": items}


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


def _cases(pool: PoolSubjects, entries: list[PoolEntry], seed: int) -> dict[str, list[Painting]]:
    """:func:`pool_ranges`'s cases, by name."""
    scored = [e for e in entries if subject_key(e.prompt or "") in pool.refs]
    refs = [Painting(e.prompt, e.path.read_bytes(), e.prompt) for e in scored]
    moved = [Painting(p.subject, _moved(p.png, *m), p.subject) for p in refs for m in MOVES]
    labels = [p.subject for p in moved]
    random.Random(seed).shuffle(labels)
    return {"references": refs, "one_prompt": [Painting(p.subject, p.png, "one") for p in refs],
            "shifted": [Painting(p.subject, _moved(p.png, *SHIFT), p.subject) for p in refs],
            "moved": moved, "shuffled": [Painting(s, p.png, p.prompt) for s, p in zip(labels, moved)],
            "collapsed": [Painting(p.subject, moved[0].png, p.prompt) for p in moved]}


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
    return {name: _summary(pool, measure(pool, paintings)) for name, paintings in _cases(pool, entries, seed).items()}


def _summary(pool: PoolSubjects, m: dict) -> dict:
    known = [c for c in m["correct"] if c is not None]
    div = [d for d in m["diversity"].values() if d is not None]
    return {"fidelity": sum(known) / len(known), "chance": 1 / len(pool.subjects),
            "diversity_mean": sum(div) / len(div) if div else None,
            "copy_distance_min": float(np.min(m["copy_distance"])),
            "copy_distance_median": float(np.median(m["copy_distance"])), "copies": int(sum(m["copy"])),
            "n": len(known)}


#: Temperatures :func:`reward_ranges` sweeps for ``reward.subject.temperature``.
SWEEP = (0.02, 0.05, 0.08, 0.1, 0.12, 0.15, 0.2, 0.3)


def reward_ranges(pool: PoolSubjects, entries: list[PoolEntry], temperature: float, distinct: float,
                  seed: int = 0) -> dict:
    """The ``subject`` and ``novelty`` reward components (:func:`subject_values`,
    :func:`novelty_values`: the actor's own code) on :func:`pool_ranges`'s cases, a painting's group
    being its prompt, plus:

    * ``duplicated_pair``: ``moved`` with each prompt's second painting replaced by its first (one
      duplicated pair in each group of 4);
    * ``hacks``: each reward hack of ``brushrl.reward.ranking.hacks`` (copies, flat colour, a flat
      disc of the subject's main pigment, noise) made from each subject's reference, as a painting
      of that subject: the largest and the median ``subject`` over subjects, and the largest
      ``pool_similarity`` (``moved`` gets its ``pool_similarity`` too, for comparison);
    * ``temperature``: for each of ``SWEEP``, the median over ``moved`` of the own subject's
      probability (before the copy guard) and of its slope ``p (1 - p) / T`` (the gain in value per
      unit of own-subject resemblance): the default temperature is where that slope peaks.

    Returns:
        ``{"cases": {case: {"subject": {"mean", "min", "max"}, "subject_unguarded": {...},
        "novelty": {...}, "n"}}, "hacks": {hack: {"subject_max", "subject_median",
        "pool_similarity_max"}}, "temperature": {T: {"median", "slope"}}, "temperature_used",
        "distinct_used"}``.
    """
    from brushrl.reward.ranking import hacks

    cases = _cases(pool, entries, seed)
    cases["duplicated_pair"] = [Painting(p.subject, cases["moved"][i - 1].png if i % len(MOVES) == 1 else p.png,
                                         p.prompt) for i, p in enumerate(cases["moved"])]
    out: dict = {"cases": {}, "temperature_used": temperature, "distinct_used": distinct}
    for name, paintings in cases.items():
        feats = [image_features(p.png) for p in paintings]
        copies = [pool.copy_correlation(p.png) for p in paintings]
        subject = [subject_values(pool, [f], [c], p.subject, temperature)[0]
                   for p, f, c in zip(paintings, feats, copies)]
        by_prompt: dict[str, list[int]] = {}
        for i, p in enumerate(paintings):
            by_prompt.setdefault(p.prompt, []).append(i)
        nov = [0.0] * len(paintings)
        for idx in by_prompt.values():
            for i, v in zip(idx, novelty_values([feats[i] for i in idx], distinct)):
                nov[i] = v.value
        out["cases"][name] = {"subject": _spread([v.value for v in subject]),
                              "subject_unguarded": _spread([float(pool.subject_probabilities(f, temperature)[
                                  pool.subjects.index(subject_key(p.subject))]) for p, f in zip(paintings, feats)]),
                              "novelty": _spread(nov), "n": len(paintings)}
    guard = pool.scorer
    moved_ps = [guard.score(p.png, guard.subject_references(p.subject)) for p in cases["moved"]]
    out["cases"]["moved"]["pool_similarity"] = _spread(moved_ps)
    per_hack: dict[str, list[tuple[float, float]]] = {}
    for e in entries:
        if subject_key(e.prompt or "") not in pool.refs:
            continue
        for hack, png in hacks(e.path.read_bytes(), {}).items():
            f, c = image_features(png), pool.copy_correlation(png)
            (v,) = subject_values(pool, [f], [c], e.prompt, temperature)
            ps = guard.score_features(f, c, guard.subject_references(e.prompt))[0]
            per_hack.setdefault(hack, []).append((v.value, ps))
    out["hacks"] = {hack: {"subject_max": max(v for v, _ in xs), "subject_median": float(np.median([v for v, _ in xs])),
                           "pool_similarity_max": max(ps for _, ps in xs)} for hack, xs in per_hack.items()}
    moved = [(pool.subjects.index(subject_key(p.subject)), image_features(p.png)) for p in cases["moved"]]
    scores = [(own, pool.subject_scores(f)) for own, f in moved]
    out["temperature"] = {}
    for t in SWEEP:
        p = np.array([np.exp((s - s.max()) / t)[own] / np.exp((s - s.max()) / t).sum() for own, s in scores])
        out["temperature"][str(t)] = {"median": float(np.median(p)), "slope": float(np.median(p * (1 - p) / t))}
    return out


def _spread(xs: list[float]) -> dict:
    return {"mean": float(np.mean(xs)), "min": float(np.min(xs)), "max": float(np.max(xs))}


def main(argv: list[str] | None = None) -> int:
    """Print :func:`pool_ranges` (``measures``) and :func:`reward_ranges` (``reward``) of a pool as
    JSON; with ``--colour``, :func:`colour_validation` of :func:`colour_cases` instead."""
    from brushrl.config import NoveltyConfig, PoolScorerConfig, SubjectConfig

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("pool", nargs="?", default=PoolScorerConfig().path)
    p.add_argument("--temperature", type=float, default=SubjectConfig().temperature,
                   help="reward.subject.temperature (default: the config's)")
    p.add_argument("--distinct", type=float, default=NoveltyConfig().distinct,
                   help="reward.novelty.distinct (default: the config's)")
    p.add_argument("--colour", action="store_true",
                   help="instead: render corpus sketches of colour-named subjects in Chromium and print the colour "
                   "measure's accuracy on them (colour_validation; ~4 s a sketch on one CPU core)")
    p.add_argument("--recoloured", type=int, default=1, help="--colour: recoloured variants per base (default 1)")
    p.add_argument("--kept", type=int, default=1, help="--colour: same-colour variants per base (default 1)")
    p.add_argument("--words", nargs="+", default=list(COLOUR_WORDS),
                   help="--colour: the candidate words (default: every colour word)")
    p.add_argument("--save", metavar="DIR", help="--colour: also write each render to DIR")
    args = p.parse_args(argv)
    if args.colour:
        out = colour_validation(colour_cases(args.recoloured, args.kept), args.words, save=args.save)
        print(json.dumps(out, indent=1))
        return 0
    cfg = PoolScorerConfig(path=args.pool)
    pool, entries = PoolSubjects.from_config(cfg), ReferencePool(cfg.path).entries
    print(json.dumps({"measures": pool_ranges(pool, entries),
                      "reward": reward_ranges(pool, entries, args.temperature, args.distinct)}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
