"""Records that cross stage boundaries (rollout -> gate -> render -> reward -> learner).

They are plain dataclasses so that they pickle cheaply through Ray's object store. PNG bytes travel
inside ``RenderResult``; everything else is small.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

#: Gate verdicts. ``pass`` or a reason code; the reward issue extends the list.
PASS = "pass"


@dataclass
class Completion:
    """One sampled completion of the policy for one prompt.

    Attributes:
        prompt: the user prompt text (the subject sentence, without the system prompt).
        text: the decoded completion (the policy's whole reply).
        prompt_ids: token ids of the full chat-formatted prompt, ``list[int]`` of length P.
        completion_ids: sampled token ids, ``list[int]`` of length T (EOS included when emitted).
        logprobs: behaviour-policy log-probabilities of ``completion_ids`` under the raw logits
            (temperature 1, before top-k/top-p processing), ``list[float]`` of length T, natural log.
        policy_version: learner step whose weights produced it (0 = the warm-started policy).
        truncated: True when generation stopped at ``max_new_tokens`` without EOS.
        gen_s: wall seconds of the generate call that produced it (shared by its group).
    """

    prompt: str
    text: str
    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    policy_version: int
    truncated: bool = False
    gen_s: float = 0.0


@dataclass
class GateVerdict:
    """The gate's judgement of one sketch.

    Attributes:
        verdict: ``"pass"`` or a reason code (e.g. ``syntax_error``, ``text_label``, ``blank_canvas``).
        detail: human-readable explanation (line/column, offending call), may be empty.
        stage: ``"static"`` (before render) or ``"runtime"`` (after render).
    """

    verdict: str
    detail: str = ""
    stage: Literal["static", "runtime"] = "static"

    @property
    def passed(self) -> bool:
        return self.verdict == PASS


@dataclass
class RenderResult:
    """What one render of a sketch produced.

    Attributes:
        status: ``ok`` (a canvas was captured), ``error`` (the sketch threw: a sketch fault),
            ``timeout`` (deadline hit on every attempt: a sketch fault), or ``infra`` (the browser or
            actor failed for reasons not caused by the sketch: the reward layer turns this into None).
        png: PNG bytes of the canvas (``size`` x ``size`` RGBA) when status is ``ok``, else None.
        paint_fraction: share of canvas pixels that differ from the modal background colour, [0, 1].
        wall_s: wall seconds of the render call including retries.
        draw_s: seconds spent inside the page running the sketch (setup + draw).
        js_errors: uncaught errors and unhandled rejections, truncated messages.
        console: console messages (truncated).
        refused: actions the sandbox refused (e.g. blocked network requests).
        attempts: render attempts used.
        actor_id: which renderer actor served it.
        detail: free text about an ``infra`` or ``timeout`` outcome.
        cpu_s: CPU core-seconds (user + system) of all the browser's processes during the render
            (``brushrl.render.procs``); 0.0 when served from the cache.
        peak_rss_mb: largest summed RSS of the browser's processes seen during the render, MiB.
        brush_calls: sketch calls of each ``brush.*`` function, counted in the page by wrapping
            them (calls p5.brush makes internally are not counted).
        cache_hit: served from the render cache (``brushrl.render.cache``) without rendering.
        forbidden: calls the page's harness refused because the sketch made them, name -> calls
            (``brushrl.render.harness``): p5 functions off the gate's allowlist (``p5.text``),
            drawing and read-back surfaces (``webgl2.drawArrays``, ``canvas2d.fillText``), the
            DOM (``Document.createElement``), window's functions (``window.open``), navigations
            (``navigation:<url>``), arguments smuggling native functions (``argument:brush.fill``).
            The runtime gate fails a render with any entry here or in ``refused``.
        phases: wall seconds of the last attempt's stages: ``page`` (new context + page, until
            the navigation committed; driver clock), ``sketch`` (sketch start until its ``done``
            report was sent: setup, draw, ``toDataURL``; page clock, so ``sketch >= draw_s``),
            ``load`` (the rest of commit-to-report-arrival: p5 and p5.brush parsed and run, and
            the reports' transfer), ``close`` (context disposed) and ``decode`` (data URL to PNG
            bytes, paint fraction); ``{}`` from the cache.
    """

    status: Literal["ok", "error", "timeout", "infra"]
    png: bytes | None = None
    paint_fraction: float = 0.0
    wall_s: float = 0.0
    draw_s: float = 0.0
    js_errors: list[str] = field(default_factory=list)
    console: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    attempts: int = 1
    actor_id: str = ""
    detail: str = ""
    cpu_s: float = 0.0
    peak_rss_mb: float = 0.0
    brush_calls: dict[str, int] = field(default_factory=dict)
    cache_hit: bool = False
    phases: dict[str, float] = field(default_factory=dict)
    forbidden: dict[str, int] = field(default_factory=dict)


@dataclass
class Sample:
    """A completion carried through gate, render and reward.

    ``reward`` is None when the sample could not be scored for infrastructure reasons (render
    infra failure, scorer error or timeout); ``none_cause`` then says why. A None sample is
    excluded from its group's statistics and never trained on as 0.
    """

    completion: Completion
    code: str
    seed: int
    group_id: int
    step: int
    gate: GateVerdict
    render: RenderResult | None = None
    components: dict[str, float | None] = field(default_factory=dict)
    reward: float | None = None
    none_cause: str | None = None
    score_s: float = 0.0
    png_path: str | None = None
    raw: dict[str, float] = field(default_factory=dict)
    """Scorers' raw numbers, ``<scorer>_<key>`` (e.g. ``hpsv3_mu``, ``judge_resolved``)."""
    component_causes: dict[str, str] = field(default_factory=dict)
    """Scorer name -> why its component is None for this sample (e.g. ``scorer_timeout``)."""


@dataclass
class Group:
    """G samples of one prompt, all sharing a group id, a render seed and the same references."""

    group_id: int
    prompt: str
    seed: int
    samples: list[Sample]

    @property
    def valid(self) -> list[Sample]:
        """Samples with a reward (None excluded)."""
        return [s for s in self.samples if s.reward is not None]
