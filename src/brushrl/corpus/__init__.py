"""The sketch corpus that warm-starts the tiny policy by supervised fine-tuning.

About fifty base compositions of loose watercolour flowers (``catalogue``), each varied
programmatically in palette, petal count, placement, size, rotation and washes (``templates``),
written in one plain style: the mandatory skeleton, then ``brush.fill`` -> ``brush.beginShape`` ->
integer ``brush.vertex`` calls -> ``brush.endShape(true)`` (``sketch``), using only the default
brush whitelist.
"""

from brushrl.corpus.build import CorpusItem, as_reply, build_corpus, make_variant
from brushrl.corpus.catalogue import BASES

__all__ = ["BASES", "CorpusItem", "as_reply", "build_corpus", "make_variant"]
