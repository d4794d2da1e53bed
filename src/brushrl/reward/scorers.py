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

    An actor gives one component, named like the actor (``score_group``), unless ``components``
    names several for it: then it is called once a group as ``score_components(pngs, prompt, seed,
    components)`` and answers ``{component: [ScoreOut]}`` (the pool scorer actor, which computes a
    painting's features once for ``pool_similarity``, ``subject`` and ``novelty``); a failure or
    timeout of that call is None for every one of its components. Results are keyed by component.

    Args:
        actors: scorer actor name -> actor handle.
        timeout_s: per-call limit, seconds (``reward.scorer_timeout_s``).
        max_failures: consecutive failures before a restart (``reward.max_scorer_failures``).
        components: actor name -> the components it gives (``{"pool": reward.pool_components}``);
            an actor not named gives its own name.

    Raises:
        ValueError: a component given by two actors.
    """

    def __init__(self, actors: dict, timeout_s: float, max_failures: int = 3,
                 components: dict[str, Sequence[str]] | None = None):
        self.actors, self.timeout_s, self.max_failures = dict(actors), timeout_s, max_failures
        self.components = {name: tuple((components or {}).get(name) or ()) for name in self.actors}
        given = [c for name in self.actors for c in self.gives(name)]
        twice = sorted({c for c in given if given.count(c) > 1})
        if twice:
            raise ValueError(f"component(s) {twice} given by more than one scorer actor")
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
            Per job, component -> one ``ScoreOut`` per PNG. ``wall_s`` then holds, per component,
            the seconds from launch until the last call of this batch of the actor giving it
            finished (callers in several threads use :meth:`score_timed`, which returns them
            instead).
        """
        results, self.wall_s = self.score_timed(jobs, deadline)
        return results

    def score_timed(self, jobs: Sequence[tuple[list[bytes], str, int]], deadline: float | None = None
                    ) -> tuple[list[dict[str, list[ScoreOut]]], dict[str, float]]:
        """:meth:`score` that returns ``(results, wall_s)`` and leaves ``self.wall_s`` alone: safe to
        call from several threads at once (the async producer scores groups in worker threads)."""
        t0 = time.monotonic()
        end = t0 + self.timeout_s if deadline is None else min(t0 + self.timeout_s, deadline)
        refs = {(j, name): self._call(name, pngs, prompt, seed)
                for j, (pngs, prompt, seed) in enumerate(jobs) for name in self.actors}
        results: list[dict[str, list[ScoreOut]]] = [{} for _ in jobs]
        pending = {ref: key for key, ref in refs.items()}
        wall_s = {c: 0.0 for name in self.actors for c in self.gives(name)}
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=max(0.0, end - time.monotonic()))
            if not ready:
                break
            ref = ready[0]
            j, name = pending.pop(ref)
            n = len(jobs[j][0])
            wall_s.update(dict.fromkeys(self.gives(name), time.monotonic() - t0))
            try:
                out = ray.get(ref)
                outs = out if self.components[name] else {name: out}
                if not isinstance(outs, dict) or set(outs) != set(self.gives(name)):
                    raise ValueError(f"{name} returned components {sorted(outs) if isinstance(outs, dict) else outs!r} "
                                     f"for {list(self.gives(name))}")
                for c, values in outs.items():
                    if len(values) != n:
                        what = "" if c == name else f" {c}"
                        raise ValueError(f"{name} returned {len(values)}{what} results for {n} images")
                results[j].update(outs)
                with self._lock:
                    self.failures[name] = 0
            except Exception as exc:  # noqa: BLE001 - RayTaskError, ActorDiedError, bad output
                log.warning("scorer %s failed: %r", name, exc)
                cause = f"scorer_error:{type(getattr(exc, 'cause', None) or exc).__name__}"
                results[j].update({c: [ScoreOut(None, cause=cause) for _ in range(n)] for c in self.gives(name)})
                self._failed(name)
        for ref, (j, name) in pending.items():
            try:
                ray.cancel(ref)  # frees an actor that is still queued; a running sync call runs on
            except Exception:  # noqa: BLE001 - cancelling is best effort
                pass
            results[j].update({c: [ScoreOut(None, cause="scorer_timeout") for _ in jobs[j][0]]
                               for c in self.gives(name)})
            wall_s.update(dict.fromkeys(self.gives(name), time.monotonic() - t0))
            self._failed(name)
        return results, wall_s

    def gives(self, name: str) -> tuple[str, ...]:
        """The components actor ``name`` gives (``components``, else its own name)."""
        return self.components[name] or (name,)

    def _call(self, name: str, pngs: list[bytes], prompt: str, seed: int):
        actor = self.actors[name]
        if self.components[name]:
            return actor.score_components.remote(pngs, prompt, seed, list(self.components[name]))
        return actor.score_group.remote(pngs, prompt, seed)

    def _failed(self, name: str) -> None:
        with self._lock:
            self.failures[name] += 1
            if self.failures[name] < self.max_failures:
                return
            log.warning("scorer %s failed %d times in a row: restarting it", name, self.failures[name])
            self.restarts[name] += 1
            self.failures[name] = 0
        ray.kill(self.actors[name], no_restart=False)
