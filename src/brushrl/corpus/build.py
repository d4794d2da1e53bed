"""Build the supervised warm-start corpus: every base sketch times N programmatic variations."""

from __future__ import annotations

import random
from dataclasses import dataclass

from brushrl.corpus.catalogue import BASES
from brushrl.corpus.templates import Knobs

#: Redraws allowed when a variation happens to repeat an earlier sketch's code.
_MAX_REDRAWS = 20


@dataclass(frozen=True)
class CorpusItem:
    """One corpus sketch.

    Attributes:
        name: ``<base name>/<variant index>``, e.g. ``peach_hibiscus/0`` (variant 0 is canonical).
        subject: what it depicts, phrased like a prompt subject (``"a peach hibiscus"``).
        code: the whole p5.js sketch source (no markdown fence).
    """

    name: str
    subject: str
    code: str


def make_variant(base: str, variant: int, seed: int = 0, redraw: int = 0) -> CorpusItem:
    """One variant of one base sketch.

    Variant 0 is the canonical sketch (every knob at its default, independent of ``seed``); variant
    i > 0 draws its knobs from ``random.Random(f"{seed}:{base}:{i}:{redraw}")``, so it is
    deterministic across processes and Python versions (string seeds are hashed with SHA-512).

    Raises:
        KeyError: unknown ``base`` (see ``brushrl.corpus.catalogue.BASES``).
    """
    fn = BASES[base]
    rng = None if variant == 0 else random.Random(f"{seed}:{base}:{variant}:{redraw}")
    subject, code = fn(Knobs(rng))
    return CorpusItem(name=f"{base}/{variant}", subject=subject, code=code)


def build_corpus(variations: int, seed: int = 0) -> list[CorpusItem]:
    """Every base sketch times ``variations`` variants, in a fixed order, without duplicate code.

    Args:
        variations: variants per base sketch (>= 1); variant 0 is the canonical base.
        seed: seed of the variations (the canonical sketches do not depend on it).

    Returns:
        ``len(BASES) * variations`` items, base-major (all variants of the first base first).

    Raises:
        ValueError: ``variations < 1``, or a variant kept repeating earlier code after
            ``_MAX_REDRAWS`` redraws (a base with too few free knobs).
    """
    if variations < 1:
        raise ValueError(f"variations must be >= 1, got {variations}")
    items: list[CorpusItem] = []
    seen: set[str] = set()
    for base in BASES:
        for variant in range(variations):
            for redraw in range(_MAX_REDRAWS):
                item = make_variant(base, variant, seed, redraw)
                if item.code not in seen:
                    break
            else:
                raise ValueError(f"{base}/{variant}: no new code after {_MAX_REDRAWS} redraws")
            seen.add(item.code)
            items.append(item)
    return items


def as_reply(code: str) -> str:
    """The completion the policy should produce for a sketch: exactly one ```js fenced block, no prose."""
    return f"```js\n{code.strip()}\n```"
