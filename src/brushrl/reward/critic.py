"""Critics of multi-turn revision: what the policy is told about its painting before it revises it.

A trajectory (``rollout.turns`` = K > 1) goes reply -> gate + render + score -> **critique** ->
revised whole sketch -> ... (RRVF, arXiv 2507.20766: a critique of the render appended as the next
turn; ReLook, arXiv 2510.11498: a critic diagnoses each screenshot). Every critic answers one
question through the :class:`Critic` protocol: given a group's samples of one turn (gate verdict,
render, reward components already filled in), one :class:`~brushrl.types.Critique` per sample.

* :class:`CpuCritic` (``reward.critic.kind: cpu``, the default) writes the critique from what
  brushrl measured on that painting (:func:`measure`): the gate's reason and the JS error when it
  failed; when it passed the paint fraction against the subject's references, where the paint is
  and which regions are empty where the references paint, shapes off the canvas (from the sketch's
  literal coordinates), the palette's distance from the references' colours (CIELAB Delta E, CIE76,
  of each ``brush.fill`` colour to the nearest reference colour), and each reward component in
  words (numbers only with ``show_reward``). It says ``done`` when the gate passed and no check
  found anything to fix. Deterministic: the warm start's revision examples
  (``brushrl.policy.revision``) carry exactly the critique it writes at training time.
* :class:`~brushrl.reward.judge_critic.JudgeCritic` (``judge``): the judge model's short written
  critique of the painting against one reference of the same subject.

A third kind, the painting itself as an image in the next user turn for a vision-language policy,
is not built: the rollout engines take text turns only (issue 17 leaves it open).

"The subject's references" are the reference pool's entries of the scored tiers whose ``prompt`` is
the subject of the group's user prompt (``prompts.subject_of``), or every scored entry when the
subject has none.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from brushrl.config import CriticConfig
from brushrl.gate import reasons as R
from brushrl.pool import PoolEntry
from brushrl.render.paint import paint_mask
from brushrl.types import PASS, Critique, Sample

#: Region names of the 3 x 3 grid, row-major (top row first).
REGIONS = ("top left", "top", "top right", "left", "centre", "right", "bottom left", "bottom", "bottom right")
#: A region is empty when less than this share of it is paint ...
EMPTY_CELL = 0.02
#: ... while the subject's references paint at least this share of it on average.
PAINTED_CELL = 0.15
#: A component value below LOW is "low", below HIGH "medium", else "high" (components lie in [0, 1]).
LOW, HIGH = 0.33, 0.66

_FILL = re.compile(r"""brush\.fill\(\s*["'](#[0-9a-fA-F]{6})["']""")
_NUM = r"(-?\d+(?:\.\d+)?)"
_VERTEX = re.compile(rf"brush\.vertex\(\s*{_NUM}\s*,\s*{_NUM}\s*\)")
_CIRCLE = re.compile(rf"brush\.circle\(\s*{_NUM}\s*,\s*{_NUM}\s*,\s*{_NUM}\s*\)")
_SHAPE = re.compile(r"brush\.beginShape\([^)]*\)(.*?)brush\.endShape\(", re.S)

#: What to do about each gate verdict (reason codes of ``brushrl.gate.reasons``).
GATE_HINTS: dict[str, str] = {
    R.NO_SKETCH: "Reply with one ```js code block that holds the whole sketch.",
    R.TRUNCATED: "The code stops part-way: finish the sketch and close every bracket.",
    R.SYNTAX_ERROR: "Fix the syntax error and keep the painting.",
    R.BARE_PRIMITIVES: "Paint with brush.beginShape, brush.vertex and brush.endShape(true), never p5's own shapes.",
    R.UNKNOWN_BRUSH_METHOD: "Call only the brush methods the system prompt lists.",
    R.NOT_WHITELISTED: "Call only the brush methods the system prompt lists.",
    R.NO_PAINTING_CALLS: "Paint filled shapes: brush.fill, brush.beginShape, brush.vertex, brush.endShape(true).",
    R.RENDER_TIMEOUT: "It took too long to draw: paint fewer shapes.",
    R.BLANK_CANVAS: "Nothing was painted: put filled shapes inside the canvas, x and y from 0 to the canvas size.",
    R.WRONG_CANVAS_SIZE: "Keep the skeleton's createCanvas exactly as given.",
}
#: The hint of every other verdict.
DEFAULT_HINT = "Keep the skeleton as given and use only what the system prompt allows."


class Critic(Protocol):
    """What every critic implements (and the critic actor exposes as ``critique.remote``).

    Invariant: one :class:`~brushrl.types.Critique` per sample, in order. A per-sample failure is a
    ``Critique(cause=...)``, never an exception; an exception or a timeout of the whole call is the
    producer's to handle (every trajectory of the call then gets reward None, cause
    ``critic:<cause>``).
    """

    def critique(self, samples: Sequence[Sample], prompt: str, seed: int) -> list[Critique]:
        """Critique one turn's samples of a group.

        Args:
            samples: the turn's samples, each gated and, when it passed, rendered and scored.
            prompt: the group's user prompt (its subject picks the references).
            seed: the group seed (critics that draw a reference draw it from it).
        """
        ...


# ---------------------------------------------------------------------------------- measurements
@dataclass(frozen=True)
class Look:
    """Where a painting is painted: the paint fraction and its 3 x 3 grid (``REGIONS`` order).

    Attributes:
        fraction: painted share of the canvas, [0, 1] (``brushrl.render.paint``'s definition).
        cells: float ``[9]``, painted share of each region.
        centroid: (x, y) of the paint in [0, 1] canvas units (y down); (0.5, 0.5) when none.
    """

    fraction: float
    cells: np.ndarray
    centroid: tuple[float, float]


def look(png: bytes) -> Look:
    """Measure a PNG (any size; alpha composited on white).

    Raises:
        PIL.UnidentifiedImageError: not an image.
    """
    mask = paint_mask(png)
    h, w = mask.shape
    rows, cols = np.array_split(np.arange(h), 3), np.array_split(np.arange(w), 3)
    cells = np.array([mask[np.ix_(r, c)].mean() for r in rows for c in cols], dtype=np.float64)
    ys, xs = np.nonzero(mask)
    centroid = (float(xs.mean() / w), float(ys.mean() / h)) if len(xs) else (0.5, 0.5)
    return Look(float(mask.mean()), cells, centroid)


def fill_colours(code: str) -> list[str]:
    """The hex colours of the sketch's ``brush.fill("#rrggbb", ...)`` calls, lower case, in order."""
    return [c.lower() for c in _FILL.findall(code or "")]


def _lab(colours: Sequence[str]) -> np.ndarray:
    """CIELAB (D65) of hex colours: float ``[n, 3]``."""
    from skimage.color import rgb2lab

    rgb = np.array([[int(c[i : i + 2], 16) / 255.0 for i in (1, 3, 5)] for c in colours], dtype=np.float64)
    return rgb2lab(rgb.reshape(-1, 1, 3)).reshape(-1, 3)


def palette_distance(colours: Sequence[str], reference: Sequence[str]) -> tuple[float, list[str]]:
    """How far a sketch's fill colours are from a reference palette (CIELAB, CIE76 Delta E).

    Args:
        colours: the sketch's fill colours, one per ``brush.fill`` call (repeats weigh more).
        reference: the references' colours.

    Returns:
        ``(mean over the fills of the Delta E to the nearest reference colour, the distinct fill
        colours farthest first)``; ``(0.0, [])`` when either list is empty.
    """
    distinct, refs = list(dict.fromkeys(colours)), list(dict.fromkeys(reference))
    if not distinct or not refs:
        return 0.0, []
    d = np.linalg.norm(_lab(distinct)[:, None, :] - _lab(refs)[None, :, :], axis=-1).min(axis=1)
    per_fill = dict(zip(distinct, d))
    mean = float(np.mean([per_fill[c] for c in colours]))
    return mean, [c for c, _ in sorted(per_fill.items(), key=lambda kv: -kv[1])]


#: Share of the canvas side a shape may reach past an edge without counting as off the canvas
#: (the corpus lets stems and leaves bleed a few pixels over the bottom edge).
OFF_MARGIN = 0.05


def off_canvas(code: str, size: int) -> tuple[int, int]:
    """Shapes with literal coordinates partly outside the canvas: ``(off, shapes)``, where a shape is
    a ``brush.beginShape ... brush.endShape`` run of literal ``brush.vertex(x, y)`` calls or a
    literal ``brush.circle(x, y, r)``, and it is off when a vertex (or the disc) reaches more than
    ``OFF_MARGIN * size`` pixels past an edge of ``0..size``."""
    lo, hi = -OFF_MARGIN * size, (1 + OFF_MARGIN) * size
    off = shapes = 0
    for body in _SHAPE.findall(code or ""):
        pts = [(float(x), float(y)) for x, y in _VERTEX.findall(body)]
        if pts:
            shapes += 1
            off += any(not (lo <= x <= hi and lo <= y <= hi) for x, y in pts)
    for x, y, r in _CIRCLE.findall(code or ""):
        x, y, r = float(x), float(y), abs(float(r))
        shapes += 1
        off += x - r < lo or y - r < lo or x + r > hi or y + r > hi
    return off, shapes


@dataclass(frozen=True)
class SubjectRefs:
    """What the critic knows about a subject's references: their mean :class:`Look` and colours.

    Attributes:
        fraction: mean paint fraction. cells: mean painted share per region, float ``[9]``.
        colours: their ``brush.fill`` colours, commonest first (from the pool rows' code).
        ids: the reference ids.
    """

    fraction: float
    cells: np.ndarray
    colours: list[str]
    ids: list[str]


def subject_refs(entries: Sequence[PoolEntry]) -> SubjectRefs:
    """Summarise reference entries (their PNGs and code).

    Raises:
        ValueError: ``entries`` is empty.
    """
    if not entries:
        raise ValueError("no reference entries")
    looks = [look(e.path.read_bytes()) for e in entries]
    counts: dict[str, int] = {}
    for e in entries:
        for c in fill_colours(e.code):
            counts[c] = counts.get(c, 0) + 1
    colours = sorted(counts, key=lambda c: -counts[c])
    return SubjectRefs(float(np.mean([lk.fraction for lk in looks])), np.mean([lk.cells for lk in looks], axis=0),
                       colours, [e.id for e in entries])


@dataclass
class Measures:
    """Everything the CPU critic writes from, for one sample.

    Attributes:
        verdict, detail, stage: the gate's (``GateVerdict``).
        js_error: the first uncaught JS error of the render, or "".
        look: the painting's :class:`Look` (None without a PNG).
        refs: the subject's :class:`SubjectRefs`.
        off: shapes partly off the canvas, out of ``shapes``.
        palette_de: mean Delta E of the fills to the references' colours; far: the fill colours
            farther than ``palette_max_delta_e``, farthest first.
        components: reward components (``Sample.components``). reward: the sample's reward.
    """

    verdict: str
    detail: str
    stage: str
    js_error: str = ""
    look: Look | None = None
    refs: SubjectRefs | None = None
    off: int = 0
    shapes: int = 0
    palette_de: float = 0.0
    far: list[str] = field(default_factory=list)
    components: dict[str, float | None] = field(default_factory=dict)
    reward: float | None = None


def measure(sample: Sample, refs: SubjectRefs, cfg: CriticConfig, canvas_size: int) -> Measures:
    """What brushrl measured on ``sample`` (the module docstring lists it).

    Raises:
        PIL.UnidentifiedImageError: the sample's PNG is not an image.
    """
    render = sample.render
    m = Measures(sample.gate.verdict, sample.gate.detail, sample.gate.stage, refs=refs,
                 components=dict(sample.components), reward=sample.reward)
    if render is not None and render.js_errors:
        m.js_error = render.js_errors[0][:200]
    if not sample.gate.passed:
        return m
    if render is not None and render.png:
        m.look = look(render.png)
    m.off, m.shapes = off_canvas(sample.code, canvas_size)
    colours = fill_colours(sample.code)
    m.palette_de, ordered = palette_distance(colours, refs.colours)
    if m.palette_de > cfg.palette_max_delta_e:
        far = set(ordered[: max(1, len(ordered) // 2)])
        m.far = [c for c in ordered if c in far]
    return m


def _words(value: float) -> str:
    return "low" if value < LOW else "medium" if value < HIGH else "high"


def _join(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def write_critique(m: Measures, cfg: CriticConfig, subject: str) -> Critique:
    """The CPU critic's text for ``m`` (short, specific; numbers of the reward only with
    ``cfg.show_reward``). ``done`` when the gate passed and nothing is flagged."""
    if m.verdict != PASS:
        what = "was not painted" if m.stage == "static" else "did not paint"
        lines = [f"The sketch {what}: the gate said {m.verdict}" + (f" ({m.detail})." if m.detail else ".")]
        if m.js_error and m.verdict == R.RENDER_ERROR:
            lines[0] = f"The sketch threw an error while drawing: {m.js_error}."
        lines.append(GATE_HINTS.get(m.verdict, DEFAULT_HINT))
        return Critique(" ".join(lines))
    lines, issues = [], 0
    refs = m.refs
    if m.look is not None and refs is not None:
        lines.append(f"It painted {m.look.fraction:.0%} of the canvas; the references of {subject} paint about "
                     f"{refs.fraction:.0%}.")
        ratio = m.look.fraction / max(refs.fraction, 1e-6)
        if ratio < 1 - cfg.coverage_tolerance:
            lines.append("Paint more: larger shapes, more petals and washes.")
            issues += 1
        elif ratio > 1 + cfg.coverage_tolerance:
            lines.append("Paint less: leave more of the paper showing.")
            issues += 1
        empty = [REGIONS[i] for i in range(9) if m.look.cells[i] < EMPTY_CELL and refs.cells[i] >= PAINTED_CELL]
        if empty:
            verb = "is" if len(empty) == 1 else "are"
            lines.append(f"The {_join(empty)} of the canvas {verb} empty where the references paint.")
            issues += 1
        cx, cy = m.look.centroid
        if abs(cx - 0.5) > 0.17 or abs(cy - 0.5) > 0.17:
            lines.append(f"Most of the paint is in the {REGIONS[min(2, int(cy * 3)) * 3 + min(2, int(cx * 3))]}.")
    if m.off:
        lines.append(f"{m.off} of {m.shapes} shapes lie partly off the canvas: keep x and y inside the canvas.")
        issues += 1
    if m.far and refs is not None:
        lines.append(f"The colours {_join(m.far[:3])} are far from the palette of {subject}; its references use "
                     f"{_join(refs.colours[:4])}.")
        issues += 1
    scored = {k: v for k, v in m.components.items() if k != "gate" and v is not None}
    if cfg.show_reward and m.reward is not None:
        parts = ", ".join(f"{k} {v:.2f}" for k, v in sorted(scored.items()))
        lines.append(f"Reward {m.reward:.2f} ({parts}).")
    elif scored:
        lines.append("Reward components: " + ", ".join(f"{k.replace('_', ' ')} {_words(v)}"
                                                       for k, v in sorted(scored.items())) + ".")
    if not issues:
        lines.append("Nothing to fix.")
    return Critique(" ".join(lines), done=issues == 0)


# ---------------------------------------------------------------------------------- critics
class CpuCritic:
    """The CPU default :class:`Critic` (module docstring).

    Args:
        entries: the reference pool's entries of the scored tiers (``reward.pool.tiers``).
        cfg: ``reward.critic``. template: ``prompts.template`` (to find the subject of a prompt).
        canvas_size: ``render.canvas_size``.
    """

    def __init__(self, entries: Sequence[PoolEntry], cfg: CriticConfig, template: str, canvas_size: int):
        if not entries:
            raise ValueError("the CPU critic needs reference entries (reward.pool.path, reward.pool.tiers)")
        self.cfg, self.template, self.canvas_size = cfg, template, canvas_size
        self._entries = list(entries)
        self._all = subject_refs(self._entries)
        self._by_subject: dict[str, SubjectRefs] = {}

    def subject(self, prompt: str) -> str:
        """The subject of ``prompt`` (the prompt itself when it does not match the template)."""
        from brushrl.prompts import subject_of

        return subject_of(prompt, self.template) or prompt

    def refs(self, subject: str) -> SubjectRefs:
        """The subject's references (every scored entry when none has this subject); cached."""
        if subject not in self._by_subject:
            own = [e for e in self._entries if e.prompt == subject]
            self._by_subject[subject] = subject_refs(own) if own else self._all
        return self._by_subject[subject]

    def critique_one(self, sample: Sample, prompt: str) -> Critique:
        subject = self.subject(prompt)
        return write_critique(measure(sample, self.refs(subject), self.cfg, self.canvas_size), self.cfg, subject)

    def critique(self, samples: Sequence[Sample], prompt: str, seed: int) -> list[Critique]:
        """:class:`Critic`; a sample that cannot be measured gets ``cause`` ``error:<Type>``."""
        t0 = time.perf_counter()
        out = []
        for s in samples:
            try:
                out.append(self.critique_one(s, prompt))
            except Exception as exc:  # noqa: BLE001 - one bad sample must not fail its group
                out.append(Critique(cause=f"error:{type(exc).__name__}"))
        return stamp_seconds(out, t0)


def stamp_seconds(critiques: list[Critique], t0: float) -> list[Critique]:
    seconds = time.perf_counter() - t0
    for c in critiques:
        c.seconds = seconds
    return critiques
