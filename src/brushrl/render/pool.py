"""The render path: renderer actors on Ray and :class:`RenderPool`, the one dispatcher every caller
renders through (training's producers, ``brushrl pool build``, ``brushrl bench render``, tools).

``RenderPool.render(code, seed)`` is a coroutine: many groups render at once from one event loop,
each awaiting only its own sketches. ``RenderPool.render_many(jobs)`` is the same path for a batch
from blocking code (it runs the coroutines in an event loop of its own and returns when all are
done, results in job order). The rules, kept here and nowhere else:

* **pages**: an actor runs at most ``pages_per_actor`` jobs at once; a free page goes to the waiting
  jobs first come, first served (a retry first), on the least busy actor (every actor gets a job
  before any gets a second);
* **retry elsewhere**: a job whose actor died mid-render, whose call raised, or whose actor answered
  ``status="infra"`` (its browser broke and a relaunch in the actor did not help; also what a dying
  actor answers when Ray kills its Playwright driver before the actor process itself) is retried
  once, on another actor when the pool has one; Ray restarts a dead actor (``max_restarts``). A job
  that fails twice is ``RenderResult(status="infra")`` with the second failure in ``detail``, which
  the reward layer turns into None (never 0);
* **cache** (``brushrl.render.cache``, with ``cache_entries > 0`` or ``cache_dir``): a job seen
  before is answered from the cache, and a job identical to one rendering now waits for that render
  instead of rendering again (GRPO groups repeat completions); both come back with
  ``cache_hit=True`` and count as hits in ``cache.stats()``;
* **telemetry**: ``waiting`` (jobs waiting for a page) and ``rendering`` (jobs on an actor), passed to
  ``on_progress(waiting, rendering)`` on every change, and ``cache.stats()``.

``ray.util.ActorPool`` was not used: it has no notion of retrying a job elsewhere when its actor dies.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
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
    from brushrl.ray_setup import ray_options

    options = ray_options(placement) if placement is not None else {}
    return RendererActor.options(
        num_cpus=cfg.num_cpus,
        max_concurrency=cfg.pages_per_actor,
        max_restarts=cfg.max_restarts,
        **options,
    ).remote(cfg)


@dataclass(eq=False)
class _Member:
    """A started actor of the pool and its pages in use."""

    handle: object
    busy: int = 0


class RenderPool:
    """``cfg.num_actors`` renderer actors on the connected Ray cluster and the rules of the module
    docstring.

    Args:
        cfg: the ``render`` section of the run config.
        placement: ``cfg.resources.renderer`` of the run config (None: CPUs only).
        actors: started ``RendererActor`` handles to use instead of starting ``cfg.num_actors``
            (tests inject actors that fail on purpose).

    The actors start (and launch Chromium) in the background; the first renders wait for them.
    ``resize(n)`` grows or shrinks the pool: actors added later join once started (an actor waiting
    for a node, e.g. for the autoscaler to add one with a free ``renderer`` resource, never holds a
    job). Call ``shutdown()`` when done.

    Threads: call ``render``, ``render_many`` and ``resize`` from one thread at a time (the event
    loop's, in training); ``render`` from a coroutine, ``render_many`` from blocking code.
    """

    def __init__(self, cfg: RenderConfig, placement=None, actors: list | None = None):
        self.cfg = cfg
        self.placement = placement
        started = list(actors) if actors is not None else [create_renderer_actor(cfg, placement)
                                                          for _ in range(cfg.num_actors)]
        self._members = [_Member(a) for a in started]
        self._starting: dict = {}  # ping ObjectRef -> actor added by resize(), not started yet
        self._joiners: dict = {}  # ping ObjectRef -> task of the running loop that admits it
        self._waiters: deque = deque()  # [future, actor to avoid] of jobs waiting for a page
        self._rendering: dict = {}  # cache key -> future of the render in progress
        self._stoppers: list[threading.Thread] = []
        self.cache = RenderCache(cfg.cache_entries, cfg.cache_dir) if cfg.cache_entries or cfg.cache_dir else None
        self._env: str | None = None
        self._env_task: asyncio.Future | None = None
        #: Called as ``on_progress(waiting, rendering)`` whenever a job starts waiting, gets a page or
        #: ends (the trainer publishes it as the render queue depth); None: not called.
        self.on_progress: Callable[[int, int], None] | None = None
        self.waiting = 0
        self.rendering = 0

    @property
    def actors(self) -> list:
        """Handles of the started actors that take jobs (``resize`` changes this list)."""
        return [m.handle for m in self._members]

    @property
    def size(self) -> int:
        """Renderer actors asked for: started ones plus those still starting."""
        return len(self._members) + len(self._starting)

    def ping(self, timeout_s: float = 120.0) -> list[dict]:
        """``RendererWorker.ping`` of every actor (waits for them to start, and for one Ray is
        restarting: Ray answers ``ActorUnavailableError`` while it does, so that actor is asked again).

        Raises:
            ray.exceptions.GetTimeoutError: an actor did not answer within ``timeout_s``.
        """
        deadline = time.monotonic() + timeout_s
        answers: list = [None] * len(self.actors)
        todo = list(range(len(self.actors)))
        while todo:
            refs = [self.actors[i].ping.remote() for i in todo]
            left = []
            for i, ref in zip(todo, refs):
                try:
                    answers[i] = ray.get(ref, timeout=max(0.0, deadline - time.monotonic()))
                except ray.exceptions.ActorUnavailableError:
                    left.append(i)
            if left and time.monotonic() >= deadline:
                raise ray.exceptions.GetTimeoutError(f"renderer actors {left} still restarting after {timeout_s:g} s")
            if left:
                time.sleep(0.2)  # the restart takes seconds; no event to wait on from here
            todo = left
        return answers

    # ------------------------------------------------------------------ rendering
    async def render(self, code: str, seed: int) -> RenderResult:
        """Render one sketch with the pool's rules (module docstring). Never raises for a failed
        render: an infrastructure failure is ``status="infra"``. Cancelling it frees its page."""
        key = await self._key(code, seed)
        if key is None:
            return await self._render_with_retry(code, seed)
        while key in self._rendering:  # the same job is rendering now: its result is this one's
            first = self._rendering[key]
            await asyncio.wait([first])  # raises only when this job itself is cancelled
            if not first.cancelled():
                self.cache.hits += 1
                return as_hit(first.result())
        hit = self.cache.get(key)
        if hit is not None:
            return hit
        future = self._rendering[key] = asyncio.get_running_loop().create_future()
        try:
            result = await self._render_with_retry(code, seed)
        except BaseException:
            future.cancel()  # jobs waiting on it render for themselves
            raise
        finally:
            del self._rendering[key]
        future.set_result(result)
        self.cache.put(key, result)
        return result

    def render_many(self, jobs: list[tuple[str, int]],
                    on_result: Callable[[int, RenderResult], None] | None = None) -> list[RenderResult]:
        """Render ``(code, seed)`` jobs (all at once, the pool's rules deciding the order on the
        actors); results in job order. ``on_result(job_index, result)``, if given, is called as each
        job finishes (once, with its final result). Blocks; never raises for a failed job."""

        async def one(i: int, code: str, seed: int) -> RenderResult:
            result = await self.render(code, seed)
            if on_result is not None:
                on_result(i, result)
            return result

        async def batch() -> list[RenderResult]:
            return list(await asyncio.gather(*(one(i, c, s) for i, (c, s) in enumerate(jobs))))

        if not jobs:
            return []
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(batch())
        # This thread runs an event loop already (Playwright's sync API keeps one in the thread of a
        # local Renderer): ours gets a thread of its own; this one waits for it.
        with ThreadPoolExecutor(1, thread_name_prefix="render-many") as helper:
            return helper.submit(asyncio.run, batch()).result()

    async def _render_with_retry(self, code: str, seed: int) -> RenderResult:
        member, last_error = await self._take(), ""
        try:
            for attempt in (1, 2):
                try:
                    result = await member.handle.render.remote(code, seed)
                    if result.status != "infra":
                        return result
                    error = f"infra from actor: {result.detail}"
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # noqa: BLE001 - any failure of the call is retried once
                    error = f"{type(exc).__name__}: {exc}"
                last_error = error[:500]
                if attempt == 1:
                    failed, member = member, None
                    member = await self._take(avoid=failed, retry_of=failed)
            return RenderResult("infra", detail=f"render failed on 2 actors; last: {last_error}")
        finally:
            if member is not None:
                self._give_back(member)

    async def _key(self, code: str, seed: int) -> str | None:
        """The job's cache key, or None without a cache (or while no actor says its environment:
        the job is then rendered without the cache)."""
        if self.cache is None:
            return None
        if self._env is None:
            if self._env_task is None or self._env_task.done():
                self._env_task = asyncio.ensure_future(self._learn_env())
            await asyncio.wait([self._env_task])
            if self._env is None:
                return None
        return render_key(code, seed, self.cfg.canvas_size, self._env)

    async def _learn_env(self) -> None:
        """``self._env`` from the actors' pings (the same libraries, browser and GL backend on every
        actor: one image); left None when an actor does not answer."""
        try:
            pings = await asyncio.wait_for(asyncio.gather(*(a.ping.remote() for a in self.actors)), 120.0)
        except Exception:  # noqa: BLE001 - an actor down: render without the cache for now
            return
        self._env = " | ".join(sorted({p["env"] for p in pings}))

    # ------------------------------------------------------------------ pages
    async def _take(self, avoid: _Member | None = None, retry_of: _Member | None = None) -> _Member:
        """A page on the least busy actor that has one free, not ``avoid`` unless the pool has only
        one actor; waits its turn. ``retry_of``: the page of a failed attempt, given back once this
        request is queued ahead of the waiting jobs (a retry goes first)."""
        self._watch_starting()
        future = asyncio.get_running_loop().create_future()
        member = self._free(avoid)
        waiter = None
        if member is not None and (retry_of is not None or not self._waiters):
            member.busy += 1
            future.set_result(member)
        else:
            waiter = [future, avoid]
            if retry_of is not None:
                self._waiters.appendleft(waiter)
            else:
                self._waiters.append(waiter)
        if retry_of is not None:
            self._give_back(retry_of)  # with one actor, this serves the retry itself
        self._progress()
        try:
            member = await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self._give_back(future.result(), started=False)
            raise
        finally:
            if waiter is not None and waiter in self._waiters:
                self._waiters.remove(waiter)
                self._progress()
        self.rendering += 1
        self._progress()
        return member

    def _free(self, avoid: _Member | None) -> _Member | None:
        members = self._members
        free = [m for m in members if m.busy < self.cfg.pages_per_actor and (m is not avoid or len(members) == 1)]
        return min(free, key=lambda m: m.busy, default=None)  # the first of the least busy

    def _serve(self) -> None:
        """Hand free pages to the waiting jobs in order (a job may skip an actor it avoids)."""
        served = False
        for waiter in list(self._waiters):
            member = self._free(waiter[1])
            if member is not None and not waiter[0].done():
                member.busy += 1
                waiter[0].set_result(member)
                self._waiters.remove(waiter)
                served = True
        if served:
            self._progress()

    def _give_back(self, member: _Member, started: bool = True) -> None:
        member.busy -= 1
        if started:
            self.rendering -= 1
            self._progress()
        if member in self._members:  # a dead actor is restarted by Ray; calls to it wait for it
            self._serve()

    def _progress(self) -> None:
        self.waiting = len(self._waiters)
        if self.on_progress is not None:
            self.on_progress(self.waiting, self.rendering)

    # ------------------------------------------------------------------ size
    def resize(self, n: int, timeout_s: float = 20.0) -> None:
        """Grow or shrink the pool to ``n`` actors.

        Growing starts ``n - size`` actors that join once started. Shrinking drops actors still
        starting first, then the most recently added ones: they take no new job at once, and are
        closed (browsers, within ``timeout_s``) and killed in a background thread; a job they were
        rendering is retried on another actor.

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
            victims, self._members = self._members[-drop:], self._members[:-drop]
            stopper = threading.Thread(target=self._stop, args=([m.handle for m in victims], timeout_s),
                                       name="render-pool-stop", daemon=True)
            stopper.start()
            self._stoppers.append(stopper)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop here: the next render admits started actors
        self._watch_starting()

    def _watch_starting(self) -> None:
        """Admit each starting actor as soon as its ping answers (a task of the running loop each;
        an earlier loop's tasks ended with that loop)."""
        loop = asyncio.get_running_loop()
        for ref in self._starting:
            task = self._joiners.get(ref)
            if task is None or task.done() or task.get_loop() is not loop:
                self._joiners[ref] = loop.create_task(self._join(ref))

    async def _join(self, ref) -> None:
        try:
            await ref
        except Exception:  # noqa: BLE001 - judged in _admit
            pass
        self._admit(ref)

    def _admit(self, ref) -> None:
        """A starting actor answered its ping: it joins the pool (or, if it failed to start, goes)."""
        self._joiners.pop(ref, None)
        actor = self._starting.pop(ref, None)
        if actor is None:
            return  # dropped by resize() meanwhile
        try:
            ray.get(ref, timeout=0)
        except Exception:  # noqa: BLE001 - an actor that cannot start is dropped, the pool goes on
            ray.kill(actor, no_restart=True)
            return
        self._members.append(_Member(actor))
        self._serve()

    def shutdown(self, timeout_s: float = 20.0) -> None:
        """Close every actor's browser (best effort, ``timeout_s``) and kill the actors."""
        for actor in self._starting.values():
            ray.kill(actor, no_restart=True)
        self._starting = {}
        members, self._members = self._members, []
        self._stop([m.handle for m in members], timeout_s)
        for stopper in self._stoppers:
            stopper.join()

    @staticmethod
    def _stop(actors: list, timeout_s: float) -> None:
        refs = [a.close.remote() for a in actors]
        try:
            if refs:
                ray.wait(refs, num_returns=len(refs), timeout=timeout_s)
        finally:
            for a in actors:
                ray.kill(a, no_restart=True)
