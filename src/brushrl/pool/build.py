"""``brushrl pool build OUT``: candidate paintings from model endpoints or the local policy, added
unrated to a draft pool.

For every source (each ``pool_build.endpoints`` entry, and the local policy with ``--policy``) and
every subject, ``samples_per_prompt`` replies are asked for, the sketch is extracted
(``brushrl.gate.extract_code``), rendered in the render farm (a Ray ``RenderPool``, or one local
Chromium with ``--no-ray``) and, when the render is ``ok`` with paint, added to the draft as
``unrated`` (PNG downscaled to ``--thumb`` pixels, like the starter pool). With
``pool_build.refine_rounds`` > 0 and a ``critic`` endpoint, each painting of round r-1 is shown to
the critic (the PNG as a data URL), the critique goes back to the generating source with its
previous sketch (an endpoint: the same conversation; the local policy: one prompt holding the
request, the previous sketch and the critique), and the revision is rendered and added as round r (``parent_id`` = the painting
it revises). Every round's sketch and painting is kept.

Resumable: candidate ids are deterministic (``<source>-<subject>-<sample>`` plus ``-r<round>``);
each candidate is written (manifest row, or a line in ``build_log.jsonl`` when it produced no
painting) as soon as it is done, and a rerun skips every id already written. A failed request
(endpoint down, timeout) is counted and left for the next run, never recorded as done.
"""

from __future__ import annotations

import argparse
import base64
import functools
import io
import json
import os
import re
import sys
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from PIL import Image

from brushrl.config import BrushRLConfig, EndpointConfig
from brushrl.pool.store import PoolError, PoolRow, PoolWriter, init_pool, sha256_hex
from brushrl.prompts import REVISION_TEMPLATE
from brushrl.types import RenderResult

BUILD_LOG = "build_log.jsonl"
REVISE_TEMPLATE = REVISION_TEMPLATE  # the one revision request (brushrl.prompts)
#: The revision request of a single-turn source (the local policy): the original request, the
#: previous sketch and the critique in one user message.
REVISE_SINGLE_TURN_TEMPLATE = "{user_prompt}\n\nYour previous sketch:\n\n{previous_reply}\n\n" + REVISE_TEMPLATE
CRITIQUE_TEMPLATE = (
    "This watercolour was painted by a p5.brush sketch for the prompt: {prompt}\n"
    "Critique it in at most five short points: composition, colour, watercolour feel, and what "
    "to change in the sketch."
)


class CandidateSource(Protocol):
    """Where candidate sketches come from. ``name`` is recorded as each painting's ``source``."""

    name: str

    def generate(self, user_prompt: str, n: int, seed: int) -> list[str]:
        """``n`` replies (whole model replies, sketch inside) to ``user_prompt``.

        Raises:
            Exception: a request failed (the candidates are retried on the next build).
        """
        ...


class RevisingSource(CandidateSource, Protocol):
    """A source that can revise its own sketch given a critique (refinement rounds)."""

    def revise(self, user_prompt: str, previous_reply: str, critique: str, seed: int) -> str:
        """One revised reply to ``user_prompt`` after ``previous_reply`` got ``critique``.

        Raises:
            Exception: a request failed (the revision is retried on the next build).
        """
        ...


class RenderFarm(Protocol):
    """``brushrl.render.pool.RenderPool`` or ``LocalRenderFarm``: renders in job order."""

    def render_many(self, jobs: list[tuple[str, int]]) -> list[RenderResult]: ...


class OpenAISource:
    """Chat completions from an OpenAI-compatible endpoint (``openai`` client, ``base_url``).

    One request per reply (``n`` > 1 is not supported by every server); request ``i`` carries
    ``seed + i`` for servers that honour seeds.
    """

    def __init__(self, cfg: EndpointConfig, system_prompt: str):
        from openai import OpenAI

        self.cfg = cfg
        self.name = cfg.name
        self.system_prompt = system_prompt
        key = os.environ.get(cfg.api_key_env, "") if cfg.api_key_env else "not-needed"
        if cfg.api_key_env and not key:
            raise ValueError(f"pool_build endpoint {cfg.name}: environment variable {cfg.api_key_env} is not set")
        self.client = OpenAI(base_url=cfg.base_url, api_key=key, timeout=cfg.timeout_s, max_retries=cfg.max_retries)

    def chat(self, messages: list[dict], seed: int) -> str:
        """The first choice's text for ``messages`` (system prompt prepended)."""
        r = self.client.chat.completions.create(
            model=self.cfg.model, messages=[{"role": "system", "content": self.system_prompt}, *messages],
            temperature=self.cfg.temperature, max_tokens=self.cfg.max_tokens, seed=seed,
        )
        return r.choices[0].message.content or ""

    def generate(self, user_prompt: str, n: int, seed: int) -> list[str]:
        return [self.chat([{"role": "user", "content": user_prompt}], seed + i) for i in range(n)]

    def revise(self, user_prompt: str, previous_reply: str, critique: str, seed: int) -> str:
        """A revision of ``previous_reply`` given ``critique`` (same conversation)."""
        return self.chat([
            {"role": "user", "content": user_prompt},
            {"role": "assistant", "content": previous_reply},
            {"role": "user", "content": REVISE_TEMPLATE.format(critique=critique)},
        ], seed)


class OpenAICritic:
    """A vision-language endpoint that critiques a rendered painting (PNG sent as a data URL)."""

    def __init__(self, cfg: EndpointConfig):
        self.source = OpenAISource(cfg, "You are a watercolour teacher giving short, concrete critiques.")

    def critique(self, png: bytes, prompt: str, seed: int) -> str:
        url = "data:image/png;base64," + base64.b64encode(png).decode()
        return self.source.chat([{"role": "user", "content": [
            {"type": "text", "text": CRITIQUE_TEMPLATE.format(prompt=prompt)},
            {"type": "image_url", "image_url": {"url": url}},
        ]}], seed)


class PolicySource:
    """The local policy (any ``brushrl.rollout.base.RolloutEngine``, e.g. ``TransformersEngine``
    with a run's LoRA adapter loaded)."""

    def __init__(self, engine, name: str = "policy"):
        self.engine = engine
        self.name = name

    def generate(self, user_prompt: str, n: int, seed: int) -> list[str]:
        return [c.text for c in self.engine.generate([user_prompt], n, seed=seed)[0]]

    def revise(self, user_prompt: str, previous_reply: str, critique: str, seed: int) -> str:
        """A revision as one single-turn request (``REVISE_SINGLE_TURN_TEMPLATE``): rollout engines
        take one user prompt per sample, not a conversation."""
        prompt = REVISE_SINGLE_TURN_TEMPLATE.format(user_prompt=user_prompt, previous_reply=previous_reply,
                                                    critique=critique)
        return self.engine.generate([prompt], 1, seed=seed)[0][0].text


class LocalRenderFarm:
    """One local headless Chromium (``brushrl.render.browser.Renderer``) with the render config's
    canvas size, deadline and attempts; for machines without Ray (``--no-ray``) and tests."""

    def __init__(self, cfg):
        from brushrl.render.browser import Renderer

        self.cfg = cfg
        self.renderer = Renderer.from_config(cfg)

    def render_many(self, jobs: list[tuple[str, int]]) -> list[RenderResult]:
        c = self.cfg
        return [self.renderer.render(code, seed, c.canvas_size, c.deadline_s, c.attempts) for code, seed in jobs]

    def shutdown(self) -> None:
        self.renderer.close()


def slug(text: str, limit: int = 40) -> str:
    """``text`` as an id part: lower case, runs of other characters -> ``_``."""
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")[:limit] or "x"


def base_id(candidate_id: str) -> str:
    """The round-0 id of a candidate (``-r<round>`` suffix removed)."""
    return re.sub(r"-r\d+$", "", candidate_id)


def render_seed(candidate_id: str) -> int:
    """A stable render seed per candidate (CRC-32 of its id)."""
    return zlib.crc32(candidate_id.encode())


def thumbnail_png(png: bytes, side: int) -> bytes:
    """``png`` as RGB, downscaled to ``side`` x ``side`` when larger (Lanczos), re-encoded (optimised PNG)."""
    img = Image.open(io.BytesIO(png)).convert("RGB")
    if img.width > side or img.height > side:  # downscale only
        img = img.resize((side, side), Image.LANCZOS)
    buf = io.BytesIO()
    img.save(buf, "PNG", optimize=True)
    return buf.getvalue()


@dataclass
class BuildCounts:
    """What one ``PoolBuilder.run`` did. ``failed`` requests are retried by the next run."""

    added: int = 0
    no_code: int = 0
    render_failed: int = 0
    blank: int = 0
    skipped_done: int = 0
    failed: int = 0


class PoolBuilder:
    """Adds candidates to the draft at ``root`` (created as version 1 when missing).

    Args:
        root: the draft pool folder.
        sources: candidate sources; their ``name`` must be unique.
        farm: the renderer.
        subjects: what to paint; ``template`` turns a subject into the user prompt.
        samples: candidates per (source, subject) in round 0.
        min_paint_fraction: renders with less paint are not added (``blank``; the gate's threshold).
        thumb: stored PNG side in pixels.
        critic, rounds: refinement of every source with a ``revise`` method (endpoints, the local
            policy; see the module docstring).
        progress: ``progress(line, n=1)`` after each finished candidate (``n`` > 1 for ones done before).
    """

    def __init__(self, root: Path, sources: list[CandidateSource], farm: RenderFarm, subjects: list[str],
                 template: str, samples: int, min_paint_fraction: float = 0.005, thumb: int = 256,
                 critic: OpenAICritic | None = None, rounds: int = 0, progress=None):
        self.root = Path(root)
        self.writer = PoolWriter(self.root) if (self.root / "manifest.jsonl").exists() else init_pool(self.root, slug(self.root.name))
        self.sources, self.farm, self.subjects, self.template = sources, farm, subjects, template
        self.samples, self.min_paint, self.thumb = samples, min_paint_fraction, thumb
        self.critic, self.rounds = critic, rounds
        self.progress = progress or (lambda line, n=1: None)
        self.counts = BuildCounts()
        self.log_path = self.root / BUILD_LOG
        self.replies: dict[str, str] = {}  # candidate id -> the reply it came from (this run)

    # ------------------------------------------------------------------ bookkeeping
    def done_ids(self) -> set[str]:
        """Ids already in the manifest or the build log (with no painting)."""
        done = {r.id for r in self.writer.rows()}
        if self.log_path.exists():
            for line in self.log_path.read_text().splitlines():
                try:
                    done.add(json.loads(line)["id"])
                except (ValueError, KeyError):
                    continue  # a torn last line of a killed run: that candidate is simply redone
        return done

    def _log(self, record: dict) -> None:
        with open(self.log_path, "a") as f:
            f.write(json.dumps(record) + "\n")
            f.flush()
            os.fsync(f.fileno())

    # ------------------------------------------------------------------ the work
    def run(self) -> BuildCounts:
        """Do every candidate not done yet; returns the counts of this run."""
        from brushrl.prompts import user_prompt

        done = self.done_ids()
        for source in self.sources:
            for subject in self.subjects:
                prompt = user_prompt(subject, self.template)
                ids = [f"{slug(source.name)}-{slug(subject)}-{k:03d}" for k in range(self.samples)]
                todo = [i for i in ids if i not in done]
                self.counts.skipped_done += len(ids) - len(todo)
                if len(ids) > len(todo):
                    self.progress(f"[done before] {source.name} / {subject}: {len(ids) - len(todo)}", len(ids) - len(todo))
                if todo:
                    try:
                        replies = source.generate(prompt, len(todo), seed=render_seed(todo[0]))
                    except Exception as exc:  # noqa: BLE001 - any request failure is retried next run
                        self.counts.failed += len(todo)
                        self.progress(f"[failed] {source.name} / {subject}: {type(exc).__name__}: {exc}", len(todo))
                        continue
                    self._finish(list(zip(todo, replies)), source, subject, round_=0, parents={})
                if self.rounds and self.critic and hasattr(source, "revise"):
                    self._refine(source, subject, prompt, ids, done)
        return self.counts

    def _refine(self, source: RevisingSource, subject: str, prompt: str, ids: list[str], done: set[str]) -> None:
        rows = {r.id: r for r in self.writer.rows()}
        current = [i for i in ids if i in rows]  # round-0 paintings of this (source, subject)
        for r in range(1, self.rounds + 1):
            jobs, parents = [], {}
            for pid in current:
                cid = f"{base_id(pid)}-r{r}"
                if cid in done or cid in rows:
                    continue
                parent = rows[pid]
                try:
                    critique = self.critic.critique((self.root / parent.png).read_bytes(), prompt, render_seed(cid))
                    previous = self.replies.get(pid) or f"```js\n{parent.code}\n```"
                    reply = source.revise(prompt, previous, critique, render_seed(cid))
                except Exception as exc:  # noqa: BLE001 - retried next run
                    self.counts.failed += 1
                    self.progress(f"[failed] refine {cid}: {type(exc).__name__}: {exc}")
                    continue
                jobs.append((cid, reply))
                parents[cid] = pid
            self._finish(jobs, source, subject, round_=r, parents=parents)
            rows = {row.id: row for row in self.writer.rows()}
            current = [f"{base_id(pid)}-r{r}" for pid in current if f"{base_id(pid)}-r{r}" in rows]

    def _finish(self, jobs: list[tuple[str, str]], source: CandidateSource, subject: str, round_: int,
                parents: dict[str, str]) -> None:
        from brushrl.gate import extract_code

        coded = []
        for cid, reply in jobs:
            code = extract_code(reply)
            if code is None:
                self.counts.no_code += 1
                self._log({"id": cid, "outcome": "no_code", "source": source.name, "subject": subject, "round": round_})
                self.progress(f"[no code] {cid}")
            else:
                coded.append((cid, reply, code))
        if not coded:
            return
        results = self.farm.render_many([(code, render_seed(cid)) for cid, _, code in coded])
        for (cid, reply, code), res in zip(coded, results):
            if res.status == "infra":
                self.counts.failed += 1  # the farm failed, not the sketch: retried next run
                self.progress(f"[failed] render infra {cid}")
                continue
            if res.status != "ok" or res.paint_fraction < self.min_paint:
                outcome = "blank" if res.status == "ok" else f"render_{res.status}"
                if res.status == "ok":
                    self.counts.blank += 1
                else:
                    self.counts.render_failed += 1
                self._log({"id": cid, "outcome": outcome, "source": source.name, "subject": subject,
                           "round": round_, "detail": (res.js_errors or [res.detail or ""])[0][:300]})
                self.progress(f"[{outcome}] {cid}")
                continue
            png = thumbnail_png(res.png, self.thumb)
            self.writer.add(PoolRow(
                id=cid, tier="unrated", png=f"{cid}.png", sha256=sha256_hex(png), prompt=subject,
                source=source.name, code=code, round=round_, parent_id=parents.get(cid),
            ), png)
            self.replies[cid] = reply
            self.counts.added += 1
            self.progress(f"[added] {cid} (paint {res.paint_fraction:.0%})")


# ---------------------------------------------------------------------- CLI
class PolicySourceFactory(Protocol):
    """Builds ``--policy``'s candidate source from the config, the system prompt and an optional
    LoRA adapter folder. Passed in by ``brushrl.pool_cli``: the policy and rollout stages sit above
    the pool (docs/architecture.md), so this module never imports them."""

    def __call__(self, cfg: BrushRLConfig, system: str, adapter: str | None) -> CandidateSource: ...


def register(sub: argparse._SubParsersAction, policy_source: PolicySourceFactory) -> None:
    """Add ``pool build``; ``policy_source`` makes the source of ``--policy``."""
    a = sub.add_parser("build", help="add unrated candidates from model endpoints or the local policy",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    a.add_argument("out", metavar="OUT", help="draft pool folder (created when missing)")
    a.add_argument("--config", metavar="FILE", help="run config YAML (pool_build, prompts, render, policy sections)")
    a.add_argument("--policy", action="store_true", help="also sample the local policy (policy.model)")
    a.add_argument("--adapter", metavar="DIR", help="LoRA adapter of a run checkpoint to load into the policy")
    a.add_argument("--samples", type=int, help="candidates per source and subject (default: pool_build.samples_per_prompt)")
    a.add_argument("--no-ray", action="store_true", help="render in one local Chromium instead of the Ray render farm")
    a.add_argument("--thumb", type=int, default=256, help="stored PNG side in pixels (default 256)")
    a.set_defaults(func=functools.partial(_run, policy_source=policy_source))


def _run(args, policy_source: PolicySourceFactory) -> int:
    from rich.console import Console

    from brushrl.config import ConfigError, load_config
    from brushrl.prompts import resolve_system_prompt

    console = Console()
    out = Path(args.out)
    if (out / "manifest.jsonl").exists():
        try:
            PoolWriter(out)  # a published version is immutable: refuse before any work
        except PoolError as exc:
            print(exc, file=sys.stderr)
            return 1
    try:
        cfg = load_config(args.config) if args.config else BrushRLConfig()
        system = resolve_system_prompt(cfg.prompts, cfg.gate.whitelist, cfg.render.canvas_size)
        sources: list = [OpenAISource(e, system) for e in cfg.pool_build.endpoints]
        if args.policy:
            sources.append(policy_source(cfg, system, args.adapter))
    except (ConfigError, ValueError, OSError) as exc:
        print(exc, file=sys.stderr)
        return 2
    if not sources:
        print("nothing to build from: add pool_build.endpoints to the config or pass --policy", file=sys.stderr)
        return 2
    if args.no_ray:
        farm = LocalRenderFarm(cfg.render)
    else:
        from brushrl.ray_setup import init_ray
        from brushrl.render.pool import RenderPool

        init_ray(cfg.ray)
        farm = RenderPool(cfg.render, cfg.resources.renderer)
    b = cfg.pool_build
    subjects = b.subjects or cfg.prompts.subjects
    samples = args.samples or b.samples_per_prompt
    total = len(sources) * len(subjects) * samples * (1 + b.refine_rounds)
    critic = OpenAICritic(b.critic) if b.critic and b.refine_rounds else None
    try:
        from rich.progress import Progress

        with Progress(console=console) as bar:
            task = bar.add_task(f"building {args.out}", total=total)

            def progress(line: str, n: int = 1) -> None:
                bar.console.print(line, markup=False, highlight=False)
                bar.advance(task, n)

            builder = PoolBuilder(Path(args.out), sources, farm, subjects, cfg.prompts.template, samples,
                                  cfg.gate.min_paint_fraction, args.thumb, critic, b.refine_rounds, progress)
            counts = builder.run()
    finally:
        farm.shutdown()
    console.print(f"{counts}")
    if counts.failed:
        console.print(f"{counts.failed} candidate(s) failed (endpoint or render farm): rerun the same command to resume")
        return 1
    return 0
