"""Colour words: what a prompt's colour word means in paint, and how a corpus sketch is recoloured.

A prompt such as "a yellow hibiscus" steers a painting by two words, its colour and its species.
The corpus pairs most species with only a few colours (poppies are coral, red or orange), so a
policy can learn each (colour, species) pair by heart without learning what "yellow" means. Two
things here teach and measure the colour word on its own:

* :func:`recolour`: a corpus variant may repaint its petals with another colour word's washes
  (``wash``, ``body``, ``deep``, taken from a palette of that word elsewhere in the corpus), the
  subject renamed to match ("a yellow poppy"), so every colour word meets many species;
* :data:`COLOUR_REFERENCES` and :func:`colour_word`: the reference colours of each word (every
  petal colour the corpus paints under that word) and the word a subject names, which
  ``brushrl.reward.painting_metrics.colour_accuracy`` uses to ask whether a painting's dominant
  colour matches its prompt.

The words are the corpus palettes' own names (``brushrl.corpus.palettes.PALETTES``), without the
ones that are also species (lilac, lavender) or that one palette alone uses (apricot, plum).
"""

from __future__ import annotations

import random
import re
from dataclasses import replace

from brushrl.corpus.palettes import PALETTES, Palette

#: Palette names that are not colour words a prompt uses: species names, or a single palette's.
_NOT_COLOUR_WORDS = frozenset({"lilac", "lavender", "apricot", "plum"})

#: The petal roles a colour word sets (light to dark); greens and centres stay the species' own.
PETAL_ROLES: tuple[str, ...] = ("wash", "body", "deep")

#: Colour word -> every palette of the corpus with that name (the word's meaning in paint).
WORD_PALETTES: dict[str, tuple[Palette, ...]] = {}
for _family in PALETTES.values():
    for _p in _family:
        if _p.name not in _NOT_COLOUR_WORDS:
            WORD_PALETTES.setdefault(_p.name, ())
            WORD_PALETTES[_p.name] += (_p,)

#: The colour words, sorted.
COLOUR_WORDS: tuple[str, ...] = tuple(sorted(WORD_PALETTES))

#: Colour word -> its reference colours (``#rrggbb``): the ``wash`` and ``body`` of each of its
#: palettes, the colours that cover most of a painting's petals (``deep`` marks eyes and blotches,
#: often dark red or black whatever the petals).
COLOUR_REFERENCES: dict[str, tuple[str, ...]] = {
    word: tuple(sorted({c for p in pals for c in (p.wash, p.body)})) for word, pals in WORD_PALETTES.items()
}

_WORD_RE = re.compile(r"[a-z]+")


def colour_word(subject: str) -> str | None:
    """The colour word a subject names (its first word that is one), or None.

    >>> colour_word("a yellow hibiscus"), colour_word("a daisy")
    ('yellow', None)
    """
    for word in _WORD_RE.findall(subject.lower()):
        if word in WORD_PALETTES:
            return word
    return None


def with_article(subject: str) -> str:
    """``subject`` with a leading "a"/"an" that agrees with the next word ("a orange" -> "an orange")."""
    return re.sub(r"^an? (?=\w)", lambda m: "an " if subject[m.end()] in "aeiou" else "a ", subject)


def recoloured_subject(subject: str, old: str, new: str) -> str | None:
    """``subject`` with its colour word ``old`` replaced by ``new``; None when ``old`` is not used as
    a colour word in it (absent, or the subject's last word: "a sprig of lilac" names a species)."""
    words = subject.split(" ")
    if old not in words[:-1]:
        return None
    i = words.index(old)
    return with_article(" ".join(words[:i] + [new] + words[i + 1 :]))


def recolour(palette: Palette, word: str, rng: random.Random) -> Palette:
    """``palette`` with its petal roles (``PETAL_ROLES``) taken from a palette of ``word`` drawn with
    ``rng``, renamed ``word``; greens, centre and pollen stay ``palette``'s.

    Raises:
        KeyError: ``word`` is not in ``COLOUR_WORDS``.
    """
    source = rng.choice(WORD_PALETTES[word])
    return replace(palette, name=word, **{role: getattr(source, role) for role in PETAL_ROLES})
