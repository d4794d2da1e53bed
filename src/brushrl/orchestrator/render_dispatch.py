"""Asynchronous dispatch of render jobs to a ``RenderPool``'s actors, shared by concurrent groups.

``RenderPool.render_many`` blocks until a whole batch is done; the asynchronous orchestrator has
several groups rendering at once, each awaiting only its own sketches. :class:`AsyncRenderer` keeps
the pool's two rules: an actor holds at most ``jobs_per_actor`` jobs (free slots are handed out from an
``asyncio.Queue``, first come first served across groups), and a job whose call failed (actor died,
call raised) is retried once on a different actor when the pool has more than one; a job that fails
twice is ``RenderResult(status="infra")`` (reward None, never 0).
"""

from __future__ import annotations

import asyncio

from brushrl.types import RenderResult


class AsyncRenderer:
    """Renders ``(code, seed)`` jobs on a list of renderer actor handles from coroutines.

    Create it inside the running event loop (the queue belongs to that loop).

    Args:
        actors: ``RendererActor`` handles (``RenderPool.actors``); ``render.remote(code, seed)``.
        jobs_per_actor: concurrent jobs per actor (``render.pages_per_actor``).
    """

    def __init__(self, actors: list, jobs_per_actor: int = 1) -> None:
        if not actors:
            raise ValueError("AsyncRenderer needs at least one renderer actor")
        self.actors = list(actors)
        self.jobs_per_actor = max(1, jobs_per_actor)
        self._retired: set[int] = set()
        #: Jobs waiting for a free actor slot now (``ray_brushrl_queue_depth{queue="render"}``).
        self.waiting = 0
        self._idle: asyncio.Queue[int] = asyncio.Queue()
        for _ in range(self.jobs_per_actor):
            for slot in range(len(self.actors)):
                self._idle.put_nowait(slot)

    def sync_actors(self, actors: list) -> None:
        """Follow a resized ``RenderPool`` (``brushrl scale``): new actors get slots, removed ones
        take no new jobs (their running jobs end or fail over to another actor). Call it from the
        event loop that owns this dispatcher."""
        current = set(map(id, actors))
        for slot, actor in enumerate(self.actors):
            if id(actor) not in current:
                self._retired.add(slot)
        known = set(map(id, self.actors))
        for actor in actors:
            if id(actor) not in known:
                self.actors.append(actor)
                for _ in range(self.jobs_per_actor):
                    self._idle.put_nowait(len(self.actors) - 1)

    async def render(self, code: str, seed: int) -> RenderResult:
        """Render one sketch; never raises for an infrastructure failure (see the module docstring)."""
        avoid, last_error = None, ""
        for _ in range(2):
            self.waiting += 1
            try:
                slot = await self._take(avoid)
            finally:
                self.waiting -= 1
            try:
                return await self.actors[slot].render.remote(code, seed)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - any failure of the call is retried once
                avoid, last_error = slot, f"{type(exc).__name__}: {exc}"[:500]
            finally:
                if slot not in self._retired:
                    self._idle.put_nowait(slot)  # a dead actor is restarted by Ray; calls wait for it
        return RenderResult("infra", detail=f"render failed on 2 actors; last: {last_error}")

    async def _take(self, avoid: int | None) -> int:
        """An idle actor slot, not ``avoid`` unless it is the only actor."""
        while True:
            slot = await self._idle.get()
            if slot in self._retired:
                continue
            if slot != avoid or len(self.actors) - len(self._retired) == 1:
                return slot
            self._idle.put_nowait(slot)
            await asyncio.sleep(0.05)  # let another job (or a freed actor) go first
