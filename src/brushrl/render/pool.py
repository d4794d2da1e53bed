"""A pool of Ray actors, each owning ``pages_per_actor`` headless Chromiums (``Renderer``).

``RenderPool.render_many`` hands each free page of an actor one job at a time (so no actor holds
more jobs than pages, and every actor gets a job before any gets a second) and returns results in
job order. A job whose actor died mid-render, whose call raised, or whose actor answered
``status="infra"`` (its browser broke and a relaunch in the actor did not help — also what a dying
actor answers when Ray kills its Playwright driver before the actor process itself) is retried
once, on another actor when the pool has one; Ray restarts the dead actor (``max_restarts``). A job
that fails twice becomes ``RenderResult(status="infra")``, which the reward layer turns into None.
``ray.util.ActorPool`` was not used: it has no notion of retrying a job elsewhere when its actor dies.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import ray

from brushrl.config import RenderConfig
from brushrl.render.browser import Renderer
from brushrl.render.cache import RenderCache, as_hit, render_key
from brushrl.types import RenderResult


class RendererWorker:
    """Body of the renderer actor: ``Renderer``s configured by a ``RenderConfig``.

    With ``cfg.pages_per_actor = k`` the actor runs up to k renders at once (Ray
    ``max_concurrency=k``): Playwright's sync API binds a browser to the thread that launched it,
    so each of the actor's threads lazily gets its own ``Renderer`` (own Playwright driver and
    Chromium). The one for the constructing thread is launched at once, so a Chromium that cannot
    start fails the actor's creation. Use ``RendererActor`` / ``create_renderer_actor``.
    """

    def __init__(self, cfg: RenderConfig):
        self._cfg = cfg
        actor_id = ray.get_runtime_context().get_actor_id() if ray.is_initialized() else None
        self._actor_id = actor_id or f"pid-{os.getpid()}"
        self._local = threading.local()
        self._renderers: list[tuple[int, Renderer]] = []  # (thread id, renderer)
        self._lock = threading.Lock()
        self._renderer()

    def _renderer(self) -> Renderer:
        """The calling thread's renderer (launched on first use)."""
        r = getattr(self._local, "renderer", None)
        if r is None:
            r = self._local.renderer = Renderer.from_config(self._cfg, actor_id=self._actor_id)
            with self._lock:
                self._renderers.append((threading.get_ident(), r))
        return r

    def render(self, code: str, seed: int) -> RenderResult:
        """Render ``code`` with the configured canvas size, deadline and attempts."""
        c = self._cfg
        return self._renderer().render(code, seed, c.canvas_size, c.deadline_s, c.attempts)

    def ping(self) -> dict:
        """Liveness check: ``{"actor_id": str, "pid": int, "env": Renderer.env, "browsers": int}``."""
        r = self._renderer()
        return {"actor_id": r.actor_id, "pid": os.getpid(), "env": r.env, "browsers": len(self._renderers)}

    def close(self) -> None:
        """Shut down the browsers this thread owns (before the actor is killed); browsers of other
        threads cannot be driven from here and end with the actor process (their Playwright driver
        exits when its pipe to the actor closes)."""
        me = threading.get_ident()
        for tid, r in self._renderers:
            if tid == me:
                r.close()


#: The Ray actor class. Resources and restarts come from the config: see ``create_renderer_actor``.
RendererActor = ray.remote(RendererWorker)


def create_renderer_actor(cfg: RenderConfig, placement=None):
    """Start one renderer actor (requires ``ray.init``) with ``num_cpus=cfg.num_cpus``, what
    ``placement`` (a ``config.ActorPlacement``, ``resources.renderer`` of the run config) asks for
    (GPUs, memory, custom resources such as ``{"renderer": 1}``: it then waits for a node that offers
    them), ``max_concurrency=cfg.pages_per_actor`` and ``max_restarts=cfg.max_restarts``.
    Returns its ``ActorHandle``."""
    from brushrl.plan.resources import ray_options

    options = ray_options(placement) if placement is not None else {}
    return RendererActor.options(
        num_cpus=cfg.num_cpus,
        max_concurrency=cfg.pages_per_actor,
        max_restarts=cfg.max_restarts,
        **options,
    ).remote(cfg)


@dataclass
class _Job:
    index: int
    code: str
    seed: int
    tries: int = 0
    avoid: int | None = None  # actor slot that failed this job
    last_error: str = ""


class RenderPool:
    """``cfg.num_actors`` renderer actors on the connected Ray cluster.

    Args:
        cfg: the ``render`` section of the run config.
        placement: ``cfg.resources.renderer`` of the run config (None: CPUs only).

    The actors start (and launch Chromium) in the background; the first ``render_many`` waits for
    them. ``resize(n)`` grows or shrinks the pool between ``render_many`` calls: actors added later
    join when they have started (an actor waiting for a node, e.g. for the autoscaler to add one with
    a free ``renderer`` resource, never holds a job). Call ``shutdown()`` when done.

    Render cache (``brushrl.render.cache``): with ``cfg.cache_entries > 0`` or ``cfg.cache_dir``,
    ``render_many`` answers jobs seen before from ``self.cache`` and renders a job repeated within
    one batch once; ``self.cache.stats()`` has the hit rate, and each result says ``cache_hit``.
    """

    def __init__(self, cfg: RenderConfig, placement=None):
        self.cfg = cfg
        self.placement = placement
        self.actors = [create_renderer_actor(cfg, placement) for _ in range(cfg.num_actors)]
        #: Called as ``on_progress(queued, in_flight)`` whenever jobs are dispatched or finish
        #: (the trainer publishes it as the render queue depth); None: not called.
        self.on_progress = None
        self._starting: dict = {}  # ping ObjectRef -> actor added by resize(), not started yet
        self.cache = RenderCache(cfg.cache_entries, cfg.cache_dir) if cfg.cache_entries or cfg.cache_dir else None
        self._env: str | None = None

    @property
    def size(self) -> int:
        """Renderer actors asked for: started ones plus those still starting."""
        return len(self.actors) + len(self._starting)

    def resize(self, n: int, timeout_s: float = 20.0) -> None:
        """Grow or shrink the pool to ``n`` actors; call between ``render_many`` calls.

        Growing starts ``n - size`` actors that join once started. Shrinking drops actors still
        starting first, then the most recently added ones (their browsers closed within ``timeout_s``,
        then killed).

        Raises:
            ValueError: ``n`` < 1.
        """
        if n < 1:
            raise ValueError(f"a render pool needs at least one actor, got {n}")
        for _ in range(n - self.size):
            actor = create_renderer_actor(self.cfg, self.placement)
            self._starting[actor.ping.remote()] = actor
        drop = self.size - n
        for ref in list(self._starting)[::-1][: max(drop, 0)]:
            ray.kill(self._starting.pop(ref), no_restart=True)
            drop -= 1
        if drop > 0:
            victims, self.actors = self.actors[-drop:], self.actors[:-drop]
            self._stop(victims, timeout_s)

    def _admit(self, ref, idle: deque) -> None:
        """A starting actor answered its ping: it joins the pool (or, if it failed to start, goes)."""
        actor = self._starting.pop(ref)
        try:
            ray.get(ref)
        except Exception:  # noqa: BLE001 - an actor that cannot start is dropped, the pool goes on
            ray.kill(actor, no_restart=True)
            return
        self.actors.append(actor)
        idle.extend([len(self.actors) - 1] * self.cfg.pages_per_actor)

    def ping(self, timeout_s: float = 120.0) -> list[dict]:
        """``RendererWorker.ping`` of every actor (waits for them to start).

        Raises:
            ray.exceptions.GetTimeoutError: an actor did not answer within ``timeout_s``.
        """
        return ray.get([a.ping.remote() for a in self.actors], timeout=timeout_s)

    def render_many(
        self, jobs: list[tuple[str, int]], on_result: Callable[[int, RenderResult], None] | None = None
    ) -> list[RenderResult]:
        """Render ``(code, seed)`` jobs across the actors; results are in job order.

        ``on_result(job_index, result)``, if given, is called as each job finishes (progress).

        Never raises for a failed job: a job whose actor died (``RayActorError``,
        ``ActorDiedError``, ``ActorUnavailableError``), whose call raised, or whose actor answered
        ``status="infra"`` is retried once, on a different actor when there is one, and otherwise
        comes back with ``status="infra"`` and the second failure in ``detail``.
        """
        results: list[RenderResult | None] = [None] * len(jobs)
        keys, first_of = self._lookup(jobs, results, on_result)
        pending = deque(_Job(i, code, seed) for i, (code, seed) in enumerate(jobs) if results[i] is None
                        and first_of.get(keys[i], i) == i)
        # one entry per free page, interleaved so that every actor gets a job before any gets two
        idle = deque(s for _ in range(self.cfg.pages_per_actor) for s in range(len(self.actors)))
        inflight: dict = {}  # ObjectRef -> (job, actor slot)
        while pending or inflight:
            self._dispatch(pending, idle, inflight)
            if self.on_progress is not None:
                self.on_progress(len(pending), len(inflight))
            (ref,), _ = ray.wait(list(inflight) + list(self._starting), num_returns=1)
            if ref in self._starting:
                self._admit(ref, idle)
                continue
            job, slot = inflight.pop(ref)
            idle.append(slot)  # a dead actor is restarted by Ray; calls to it wait for the restart
            try:
                result = ray.get(ref)
                error = f"infra from actor: {result.detail}" if result.status == "infra" else ""
            except Exception as exc:  # noqa: BLE001 - any failure of the call is retried once
                result, error = None, f"{type(exc).__name__}: {exc}"
            if error:
                job.tries += 1
                job.avoid, job.last_error = slot, error[:500]
                if job.tries < 2:
                    pending.appendleft(job)
                    continue
                result = RenderResult("infra", detail=f"render failed on 2 actors; last: {job.last_error}")
            results[job.index] = result
            if on_result is not None:
                on_result(job.index, results[job.index])
        if first_of:
            self._fill_repeats(keys, first_of, results, on_result)
        if self.on_progress is not None:
            self.on_progress(0, 0)
        return results  # type: ignore[return-value]

    def _lookup(self, jobs, results, on_result) -> tuple[list[str | None], dict[str, int]]:
        """Fill ``results`` from the cache; returns each job's key (None without a cache) and, per
        key, the first job index that has to be rendered."""
        if self.cache is None:
            return [None] * len(jobs), {}
        if self._env is None:  # same libraries + browser + backend on every actor (one image)
            try:
                self._env = " | ".join(sorted({p["env"] for p in self.ping()}))
            except Exception:  # noqa: BLE001 - an actor down: render this batch without the cache
                return [None] * len(jobs), {}
        keys = [render_key(code, seed, self.cfg.canvas_size, self._env) for code, seed in jobs]
        first_of: dict[str, int] = {}
        for i, key in enumerate(keys):
            if key in first_of:
                continue  # a repeat within the batch: answered from its first job
            hit = self.cache.get(key)
            if hit is None:
                first_of[key] = i
            else:
                results[i] = hit
                if on_result is not None:
                    on_result(i, hit)
        return keys, first_of

    def _fill_repeats(self, keys, first_of, results, on_result) -> None:
        """Store the rendered results and answer the batch's repeated jobs from their first job
        (as hits, whatever its status: the same sketch was just rendered)."""
        for key, i in first_of.items():
            self.cache.put(key, results[i])
        for i, key in enumerate(keys):
            if results[i] is None:
                results[i] = as_hit(results[first_of[key]])
                self.cache.hits += 1
                if on_result is not None:
                    on_result(i, results[i])

    def _dispatch(self, pending: deque, idle: deque, inflight: dict) -> None:
        """Give idle actors pending jobs, one each; a retried job avoids the actor that failed it
        unless the pool has a single actor."""
        for job in list(pending):
            if not idle:
                return
            slot = next((s for s in idle if s != job.avoid), None)
            if slot is None:
                if len(self.actors) > 1:
                    continue  # wait for another actor to free up
                slot = idle[0]
            idle.remove(slot)
            pending.remove(job)
            inflight[self.actors[slot].render.remote(job.code, job.seed)] = (job, slot)

    def shutdown(self, timeout_s: float = 20.0) -> None:
        """Close every actor's browser (best effort, ``timeout_s``) and kill the actors."""
        for actor in self._starting.values():
            ray.kill(actor, no_restart=True)
        self._starting = {}
        actors, self.actors = self.actors, []
        self._stop(actors, timeout_s)

    @staticmethod
    def _stop(actors: list, timeout_s: float) -> None:
        refs = [a.close.remote() for a in actors]
        try:
            if refs:
                ray.wait(refs, num_returns=len(refs), timeout=timeout_s)
        finally:
            for a in actors:
                ray.kill(a, no_restart=True)
