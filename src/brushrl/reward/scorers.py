"""Calling several scorer actors concurrently, with timeouts, failure counts and restarts."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from typing import Sequence

import ray

from brushrl.reward.base import ScoreOut

log = logging.getLogger(__name__)


class ScorerSet:
    """Named scorer actors (``GroupScorer``) called concurrently for a batch of groups.

    Invariants: ``score`` returns, for every group and every scorer, one ``ScoreOut`` per PNG. A
    call that raises, returns the wrong length, or is not done ``timeout_s`` after launch (or by
    ``deadline``) gives ``ScoreOut(None, cause=...)`` for all of that group's PNGs
    (``scorer_error:<Type>`` / ``scorer_timeout``), never 0. After ``max_failures`` failed calls
    in a row an actor is killed with ``ray.kill(no_restart=False)`` so that Ray restarts it
    (the actors are created with ``max_restarts=-1``); ``restarts`` counts that.

    Args:
        actors: scorer name -> actor handle.
        timeout_s: per-call limit, seconds (``reward.scorer_timeout_s``).
        max_failures: consecutive failures before a restart (``reward.max_scorer_failures``).
    """

    def __init__(self, actors: dict, timeout_s: float, max_failures: int = 3):
        self.actors, self.timeout_s, self.max_failures = dict(actors), timeout_s, max_failures
        self.failures: Counter = Counter()
        self.restarts: Counter = Counter()
        self.wall_s: dict[str, float] = {}
        self._lock = threading.Lock()  # failures / restarts: score_timed runs in several threads

    def score(self, jobs: Sequence[tuple[list[bytes], str, int]], deadline: float | None = None
              ) -> list[dict[str, list[ScoreOut]]]:
        """Score ``jobs`` (one ``(pngs, prompt, group_seed)`` per group) with every scorer at once.

        Args:
            deadline: ``time.monotonic()`` value after which pending calls are abandoned.

        Returns:
            Per job, scorer name -> one ``ScoreOut`` per PNG. ``wall_s`` then holds, per scorer,
            the seconds from launch until its last call of this batch finished (callers in several
            threads use :meth:`score_timed`, which returns them instead).
        """
        results, self.wall_s = self.score_timed(jobs, deadline)
        return results

    def score_timed(self, jobs: Sequence[tuple[list[bytes], str, int]], deadline: float | None = None
                    ) -> tuple[list[dict[str, list[ScoreOut]]], dict[str, float]]:
        """:meth:`score` that returns ``(results, wall_s)`` and leaves ``self.wall_s`` alone: safe to
        call from several threads at once (the async producer scores groups in worker threads)."""
        t0 = time.monotonic()
        end = t0 + self.timeout_s if deadline is None else min(t0 + self.timeout_s, deadline)
        refs = {(j, name): actor.score_group.remote(pngs, prompt, seed)
                for j, (pngs, prompt, seed) in enumerate(jobs) for name, actor in self.actors.items()}
        results: list[dict[str, list[ScoreOut]]] = [{} for _ in jobs]
        pending = {ref: key for key, ref in refs.items()}
        wall_s = {name: 0.0 for name in self.actors}
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=max(0.0, end - time.monotonic()))
            if not ready:
                break
            ref = ready[0]
            j, name = pending.pop(ref)
            n = len(jobs[j][0])
            wall_s[name] = time.monotonic() - t0
            try:
                out = ray.get(ref)
                if len(out) != n:
                    raise ValueError(f"{name} returned {len(out)} results for {n} images")
                results[j][name] = out
                with self._lock:
                    self.failures[name] = 0
            except Exception as exc:  # noqa: BLE001 - RayTaskError, ActorDiedError, bad output
                log.warning("scorer %s failed: %r", name, exc)
                cause = f"scorer_error:{type(getattr(exc, 'cause', None) or exc).__name__}"
                results[j][name] = [ScoreOut(None, cause=cause) for _ in range(n)]
                self._failed(name)
        for ref, (j, name) in pending.items():
            try:
                ray.cancel(ref)  # frees an actor that is still queued; a running sync call runs on
            except Exception:  # noqa: BLE001 - cancelling is best effort
                pass
            results[j][name] = [ScoreOut(None, cause="scorer_timeout") for _ in jobs[j][0]]
            wall_s[name] = time.monotonic() - t0
            self._failed(name)
        return results, wall_s

    def _failed(self, name: str) -> None:
        with self._lock:
            self.failures[name] += 1
            if self.failures[name] < self.max_failures:
                return
            log.warning("scorer %s failed %d times in a row: restarting it", name, self.failures[name])
            self.restarts[name] += 1
            self.failures[name] = 0
        ray.kill(self.actors[name], no_restart=False)
