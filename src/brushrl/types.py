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
        policy_version: learner step whose weights produced it (0 = the warm-started policy); with
            ``rollout.partial_rollouts`` the version that sampled its first token, the oldest of
            ``version_spans`` (what the staleness bound counts).
        truncated: True when generation stopped at ``max_new_tokens`` without EOS.
        gen_s: wall seconds of the generate call that produced it (shared by its group).
        vision: None (a text-only context: every completion unless ``rollout.revision.show_image``),
            or the processed pixel inputs of every image in ``prompt_ids``, in the order of their
            placeholders (``brushrl.vision``): the vision-language processor's image-indexed
            tensors without their batch axis, e.g. Idefics3's ``pixel_values`` (N, C, H, W)
            float32 and ``pixel_attention_mask`` (N, H, W) long, N images. What the learner passes
            to the forward pass to recompute the log-probs of this context.
        version_spans: None when ``policy_version`` sampled every token; else the policy versions
            that sampled ``completion_ids`` in order, as ``[(version, tokens), ...]`` (versions
            increasing, token counts summing to T): a completion whose generation went on across a
            weight sync (``rollout.partial_rollouts``). ``logprobs[t]`` is under token t's version.
    """

    prompt: str
    text: str
    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    policy_version: int
    truncated: bool = False
    gen_s: float = 0.0
    vision: dict | None = None
    version_spans: list[tuple[int, int]] | None = None


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
        phases: wall seconds of the last attempt's stages (record and replay: the record page's,
            then ``validate`` and the replay page's as ``replay_page``, ``replay_load``,
            ``replay_sketch``, ``replay_close``, ``decode``): ``page`` (new context + page, until
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
    rejected: str = ""
    """The reason code when the sketch's call log could not be replayed (``invalid_call``,
    ``work_budget``: ``brushrl.render.calllog``; status ``error``, why in ``detail``), else ``""``."""
    text: list[tuple[str, float]] | None = None
    """Text lines read from the PNG, ``[(text, confidence in [0, 1])]`` (``brushrl.render.text``,
    ``render.text_scan``); ``[]`` when none were found, None when the PNG was not read."""


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
    turn: int | None = None
    """1..K: which reply of its multi-turn trajectory this is (``rollout.turns`` > 1); None for a
    single-turn sample (``rollout.turns: 1``), whose record is exactly the single-turn one."""
    member: int | None = None
    """Index of its trajectory in the group (0..G-1) when ``turn`` is set."""
    critique: Critique | None = None
    """The critique of this turn's painting that the next turn was shown (None: no next turn)."""


@dataclass
class Critique:
    """What a critic (``brushrl.reward.critic``) says about one painting, for the policy's next turn.

    Attributes:
        text: the critique shown to the policy in the next user turn (plain text).
        done: the critic judges the painting finished; with ``rollout.revision.stop_on_done`` the
            trajectory ends here.
        cause: why no critique could be written (infrastructure: ``timeout``, ``error:<Type>``,
            ``http_503``...); the trajectory's reward is then None, never 0. None when written.
        seconds: wall seconds the critic spent on this painting's group (shared by the group).
        image: PNG bytes of the painting, shown as an image in the next user turn beside ``text``
            (``rollout.revision.show_image``: the producer sets it on the copy it sends to the
            rollout engine, never on the critique a sample keeps); None: a text-only turn.
    """

    text: str = ""
    done: bool = False
    cause: str | None = None
    seconds: float = 0.0
    image: bytes | None = None

    @property
    def ok(self) -> bool:
        return self.cause is None


@dataclass
class Trajectory:
    """One group member of a multi-turn revision (``rollout.turns`` = K): reply -> gate, render,
    score -> critique -> revised reply ... (RRVF, arXiv 2507.20766; ReLook, arXiv 2510.11498).

    Invariants: ``turns[k].turn == k + 1``; every turn's context extends the previous one token for
    token (``turns[k].completion.prompt_ids == turns[k-1].completion.prompt_ids +
    turns[k-1].completion.completion_ids + <critique turn tokens>``); every turn but the last
    carries the ``critique`` the next one was shown. ``reward`` is None exactly when
    ``none_cause`` is set (a turn's infrastructure failure or the critic's), never 0 for that.

    Attributes:
        member: index in the group (0..G-1).
        turns: the turns' samples, in order (1..K of them: a trajectory may stop early).
        reward: the trajectory's reward (``brushrl.reward.trajectory.trajectory_reward``).
        none_cause: why ``reward`` is None (``turn2:render_infra``, ``critic:timeout``, ...).
        stop: why it ended: ``turns`` (K replies), ``done`` (the critic said done),
            ``gate_pass`` (its painting passed the gate, ``rollout.revision.stop_on_gate_pass``),
            ``none`` (a turn or the critic failed).
    """

    member: int
    turns: list[Sample]
    reward: float | None = None
    none_cause: str | None = None
    stop: str = "turns"

    @property
    def policy_version(self) -> int:
        """The oldest turn's policy version: a trajectory is as stale as its oldest turn."""
        return min(s.completion.policy_version for s in self.turns)


@dataclass
class Group:
    """G samples of one prompt, all sharing a group id, a render seed and the same references.

    With ``rollout.turns`` > 1 the G members are :class:`Trajectory` objects (``trajectories``) and
    ``samples`` holds every turn of every trajectory, trajectory by trajectory in turn order (so
    ``min`` of their policy versions is the group's oldest turn). Single-turn groups leave
    ``trajectories`` empty; :attr:`members` then wraps each sample as a one-turn trajectory.
    """

    group_id: int
    prompt: str
    seed: int
    samples: list[Sample]
    trajectories: list[Trajectory] = field(default_factory=list)

    @property
    def valid(self) -> list[Sample]:
        """Samples with a reward (None excluded)."""
        return [s for s in self.samples if s.reward is not None]

    @property
    def members(self) -> list[Trajectory]:
        """The G trajectories GRPO compares (one-turn ones for a single-turn group)."""
        if self.trajectories:
            return self.trajectories
        return [Trajectory(i, [s], s.reward, s.none_cause) for i, s in enumerate(self.samples)]

    @property
    def rewards(self) -> list[float | None]:
        """The members' rewards, in member order (what the group filter and advantages read)."""
        return [t.reward for t in self.members]
