"""Build the supervised warm-start corpus: every base sketch times N programmatic variations."""

from __future__ import annotations

import functools
import random
import re
from dataclasses import dataclass

from brushrl.config import UNSEEN_SUBJECTS
from brushrl.corpus.catalogue import BASES
from brushrl.corpus.colours import COLOUR_WORDS, PETAL_ROLES, recoloured_subject, with_article
from brushrl.corpus.palettes import Palette
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
    A variant of a base whose subject names its colour ("a coral poppy") is repainted in another
    colour word with probability ``RECOLOUR_SHARE`` (``_recolour_word``), its subject renamed.
    Every sketch opens its painting with its subject as a comment and its petal colours as
    constants (``with_header``).

    Raises:
        KeyError: unknown ``base`` (see ``brushrl.corpus.catalogue.BASES``).
    """
    fn = BASES[base]
    rng = None if variant == 0 else random.Random(f"{seed}:{base}:{variant}:{redraw}")
    word = None if variant == 0 else _recolour_word(base, random.Random(f"{seed}:{base}:{variant}:{redraw}:colour"))
    knobs = Knobs(rng, recolour=word)
    subject, code = fn(knobs)
    if word is not None:
        subject = recoloured_subject(subject, knobs.original_names[0], word) or subject
    subject = with_article(subject)
    return CorpusItem(name=f"{base}/{variant}", subject=subject, code=with_header(code, subject, knobs.palettes[:1]))


#: Share of a colour-named base's variants (i > 0) repainted in another colour word. A third keeps
#: two thirds of the corpus as the species' own colours (the pool's references are those) while
#: every colour word meets most species (measured in ``tests/test_corpus.py``).
RECOLOUR_SHARE = 1 / 3


@functools.cache
def _canonical_colour(base: str) -> tuple[str, str | None]:
    """The canonical sketch's subject and its palette's colour word (None: it draws no palette);
    built once per base rather than once per variant."""
    knobs = Knobs(None)
    subject, _ = BASES[base](knobs)
    return subject, knobs.original_names[0] if knobs.original_names else None


def _recolour_word(base: str, rng: random.Random) -> str | None:
    """The colour word a variant of ``base`` is repainted in, or None (kept in its own colours).

    None for a base whose subject names no colour ("a daisy", "a sprig of lilac"), else with
    probability ``RECOLOUR_SHARE`` a colour word other than its own whose subject is not one of
    ``UNSEEN_SUBJECTS`` (the eval's third split: pairs the corpus must never paint)."""
    subject, own = _canonical_colour(base)
    if own is None or recoloured_subject(subject, own, own) is None or rng.random() >= RECOLOUR_SHARE:
        return None
    words = [w for w in COLOUR_WORDS if w != own and recoloured_subject(subject, own, w) not in UNSEEN_SUBJECTS]
    return rng.choice(words)


def with_header(code: str, subject: str, palettes: list[Palette]) -> str:
    """``code`` with its painting opened by ``// <subject>`` and the sketch's own palette's petal
    colours declared as constants (``const wash = "#..", body = "#..", deep = "#..";``, the roles of
    ``corpus.colours.PETAL_ROLES``), every ``brush.fill`` of those colours then naming them.

    Why: the prompt's subject steers the painting through a few tokens far before the first petal;
    repeating it where the painting starts and deciding the petal colours right after it puts the
    decision next to the words that make it (measured in docs/reward.md, "A warm start that follows
    its prompt"). The rendered pixels are the same as without the header.

    Raises:
        ValueError: ``code`` has no ``background(...)`` line (not a corpus sketch).
    """
    lines = code.split("\n")
    at = next((i for i, line in enumerate(lines) if line.startswith("  background(")), None)
    if at is None:
        raise ValueError("not a corpus sketch: no background(...) line")
    header = [f"  // {subject}"]
    body = "\n".join(lines[at + 1 :])
    if palettes:
        roles = {getattr(palettes[0], role): role for role in reversed(PETAL_ROLES)}  # a shared hex: the lightest role
        header.append("  const " + ", ".join(f'{role} = "{getattr(palettes[0], role)}"' for role in PETAL_ROLES) + ";")
        body = re.sub(r'brush\.fill\("(#[0-9a-f]{6})", ', lambda m: f"brush.fill({roles[m[1]]}, " if m[1] in roles else m[0], body)
    return "\n".join(lines[: at + 1] + header + [body])


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
