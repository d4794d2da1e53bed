"""A DeepSpeed learner of ``learner.workers`` Ray actors that the driver sees as one learner actor.

:class:`LearnerGroup` is a Ray actor with the methods of :class:`~brushrl.learner.actor.LearnerActor`
(``step``, ``adapter_state``, ``save_adapter``, ``save_state``, ``load_state``, ``policy_version``,
``completion_logprobs``, ``describe``), so the driver's ``LearnerSide`` is unchanged. It owns W
:class:`LearnerWorker` actors, rank r in bundle r of a placement group of W bundles (one per worker:
``learner.num_cpus`` CPUs plus what ``resources.learner`` asks for, e.g. one GPU; strategy ``PACK``:
one node when it fits, else the fewest nodes) that :func:`make_learner_group` reserves. Rank 0 publishes its node address and a
free port; every rank then builds its ``GRPOLearner``, which joins torch.distributed (NCCL on GPUs,
gloo on CPU) under DeepSpeed ZeRO (``brushrl.learner.zero``).

Each group method calls the same method on every rank (they contain collectives) and returns rank
0's answer: one batch (put once in the object store) for the step, one optimizer step, one adapter
gathered from rank 0, one checkpoint folder that every rank writes its shards into.

Failure: when a rank dies or raises, the others are stuck in a collective; the group kills them and
raises :class:`LearnerWorkerError` naming the rank, and every later call raises the same error. The
run then fails loudly and resumes from its last checkpoint (``brushrl train --resume``).

Why actors in a placement group rather than Ray Train: the driver calls the learner step by step
between rollouts (RPC style), while ``TorchTrainer.fit()`` owns the training loop. This is the
pattern of OpenRLHF's ``RayActorGroup`` and verl's ``RayWorkerGroup`` (one actor per GPU in a
placement group, rank 0's address as the rendezvous).
"""

from __future__ import annotations

import os
import socket
import weakref

import ray
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from brushrl.config import BrushRLConfig
from brushrl.hub.weights import offline_env
from brushrl.learner.actor import LearnerActor, PolicyLoader

#: Seconds to wait for the cluster to place every worker's bundle (the autoscaler may add nodes).
PLACEMENT_TIMEOUT_S = 900.0


class LearnerWorkerError(RuntimeError):
    """A learner worker died or failed; the message names its rank, node and process."""


class LearnerWorker(LearnerActor):
    """One rank of a :class:`LearnerGroup`: a :class:`LearnerActor` built by :meth:`setup` once the
    group's rendezvous address is known, its ``GRPOLearner`` one DeepSpeed rank.

    Args:
        rank: this worker's rank r, 0 <= r < ``world_size``.
        world_size: W, the number of workers.
    """

    def __init__(self, rank: int, world_size: int) -> None:  # noqa: D107 - no LearnerActor.__init__ yet
        self.rank, self.world_size = rank, world_size

    def where(self) -> str:
        """``rank r on <node ip> pid <pid>`` (for error messages)."""
        return f"rank {self.rank} on {ray.util.get_node_ip_address()} pid {os.getpid()}"

    def rendezvous(self) -> tuple[str, int]:
        """This node's address and a TCP port free on it a moment ago (rank 0's, for MASTER_ADDR/PORT)."""
        ip = ray.util.get_node_ip_address()
        with socket.socket() as s:
            s.bind((ip, 0))
            return ip, s.getsockname()[1]

    def setup(self, master_addr: str, master_port: int, cfg: BrushRLConfig, total_steps: int,
              policy_loader: PolicyLoader | None, learner_kwargs: dict) -> None:
        """Set the torch.distributed environment and build the learner (blocks until all ranks join).

        ``LOCAL_RANK`` is 0: Ray gives each worker its own GPU (``CUDA_VISIBLE_DEVICES``), device 0."""
        os.environ.update(RANK=str(self.rank), WORLD_SIZE=str(self.world_size), LOCAL_RANK="0",
                          LOCAL_WORLD_SIZE="1", MASTER_ADDR=master_addr, MASTER_PORT=str(master_port))
        LearnerActor.__init__(self, cfg, total_steps, policy_loader, learner_kwargs)

    def adapter_state(self) -> dict | None:
        """The LoRA weights on rank 0, None on the others (every rank takes part in gathering them)."""
        state = super().adapter_state()
        return state if self.rank == 0 else None


def _worker_options(cfg: BrushRLConfig) -> dict:
    """Ray options of one worker: ``learner.num_cpus`` CPUs plus ``resources.learner`` (GPUs, memory, custom)."""
    from brushrl.ray_setup import ray_options

    return {"num_cpus": cfg.learner.num_cpus, **ray_options(cfg.resources.learner)}


def _bundle(options: dict) -> dict:
    """The placement-group bundle that holds one worker with ``options``."""
    keys = {"num_cpus": "CPU", "num_gpus": "GPU", "memory": "memory"}
    return {**options.get("resources", {}), **{keys[k]: v for k, v in options.items() if k in keys}}


class LearnerGroup:
    """W :class:`LearnerWorker` ranks in placement group ``pg``, behind the :class:`LearnerActor`
    methods (module docstring). Runs as a Ray actor that reserves no CPU; the constructor returns
    once every rank has built its learner.

    Args:
        cfg: the run config (``learner.workers``, ``learner.num_cpus`` and ``resources.learner`` per
            worker, ``learner.deepspeed``).
        total_steps: optimizer steps of the run.
        pg: a placement group of ``learner.workers`` bundles of :func:`_bundle` (:func:`make_learner_group`).
        policy_loader: see :class:`LearnerActor`.
        learner_kwargs: extra ``GRPOLearner`` keyword arguments.

    Raises:
        LearnerWorkerError: the bundles were not placed within ``PLACEMENT_TIMEOUT_S``, or a rank failed to start.
    """

    def __init__(self, cfg: BrushRLConfig, total_steps: int, pg, policy_loader: PolicyLoader | None = None,
                 learner_kwargs: dict | None = None) -> None:
        self._broken: str | None = None
        self.pg, n, options = pg, cfg.learner.workers, _worker_options(cfg)
        try:
            ray.get(self.pg.ready(), timeout=PLACEMENT_TIMEOUT_S)
        except ray.exceptions.GetTimeoutError:
            raise LearnerWorkerError(f"learner placement group of {n} x {_bundle(options)} not placed within "
                                     f"{PLACEMENT_TIMEOUT_S:.0f} s (learner.workers, resources.learner)") from None
        threads = str(cfg.policy.torch_threads)
        remote_cls = ray.remote(LearnerWorker)
        self._workers = [
            remote_cls.options(
                **options,
                scheduling_strategy=PlacementGroupSchedulingStrategy(self.pg, placement_group_bundle_index=r),
                runtime_env={"env_vars": {"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads, **offline_env()}},
            ).remote(r, n)
            for r in range(n)
        ]
        self._where = self._all("where")
        addr, port = self._all("rendezvous", ranks=[0])[0]
        self._all("setup", addr, port, cfg, total_steps, policy_loader, learner_kwargs or {})

    # ------------------------------------------------------------------ fan-out
    def _all(self, method: str, *args, ranks: list[int] | None = None) -> list:
        """Call ``method(*args)`` on the given ranks (default: all) and return their results in rank
        order. Waits for each result as it comes, so a failing rank is seen while the others wait in
        a collective.

        Raises:
            LearnerWorkerError: a rank failed or died (named); the group is then broken for good.
        """
        if self._broken:
            raise LearnerWorkerError(self._broken)
        ranks = list(range(len(self._workers))) if ranks is None else ranks
        refs = [getattr(self._workers[r], method).remote(*args) for r in ranks]
        rank_of = dict(zip(refs, ranks))
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            try:
                ray.get(done[0])
            except Exception as exc:  # noqa: BLE001 - any failure of a rank breaks the group
                r = rank_of[done[0]]
                where = self._where[r] if getattr(self, "_where", None) else f"rank {r}"
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                self._broken = (f"learner worker {where} of {len(self._workers)} failed in {method}(): "
                                f"{type(exc).__name__}: {first}")
                self._stop_workers()
                raise LearnerWorkerError(self._broken) from None
        return ray.get(refs)

    def _stop_workers(self) -> None:
        for w in self._workers:
            ray.kill(w, no_restart=True)
        _remove(self.pg)

    # ---------------------------------------------------------- LearnerActor API
    def step(self, groups) -> dict[str, float]:
        """One optimizer step over all ranks (each takes its token-balanced shard); rank 0's metrics
        (the loss and the IS statistics are already summed over ranks)."""
        ref = ray.put(groups)
        return self._all("step", ref)[0]

    def adapter_state(self) -> dict:
        """The LoRA weights (CPU tensors), gathered once and sent from rank 0."""
        return self._all("adapter_state")[0]

    def save_adapter(self, path: str) -> str:
        """Rank 0 writes the adapter into folder ``path``; returns the path."""
        return self._all("save_adapter", path)[0]

    def save_state(self, path: str) -> str:
        """Every rank writes its part of the checkpoint folder ``path`` (``brushrl.learner.zero_checkpoint``)."""
        return self._all("save_state", path)[0]

    def load_state(self, path: str) -> int:
        """Every rank restores its part of ``path``; returns the policy version."""
        versions = self._all("load_state", path)
        assert len(set(versions)) == 1, f"ranks restored different policy versions {versions}"
        return versions[0]

    def policy_version(self) -> int:
        """Optimizer steps taken so far (rank 0's count; all ranks step together)."""
        return self._all("policy_version", ranks=[0])[0]

    def completion_logprobs(self, prompt_ids: list[int], completion_ids: list[int],
                            vision: dict | None = None) -> list[float]:
        """Per-token log-probs under the current policy (all ranks run the forward; ZeRO-3 gathers);
        ``vision`` as in ``LearnerActor.completion_logprobs``."""
        return self._all("completion_logprobs", prompt_ids, completion_ids, vision)[0]

    def describe(self) -> dict:
        """Rank 0's :meth:`LearnerActor.describe` (strategy, parameter counts)."""
        return self._all("describe", ranks=[0])[0]

    def workers(self) -> list:
        """The worker actor handles in rank order (tests inject failures through them)."""
        return list(self._workers)


def _remove(pg) -> None:
    """Remove a placement group if Ray still runs (idempotent)."""
    try:
        if ray.is_initialized():
            remove_placement_group(pg)
    except Exception:  # noqa: BLE001 - already removed, or Ray going down
        pass


def make_learner_group(cfg: BrushRLConfig, total_steps: int, *, policy_loader: PolicyLoader | None = None,
                       **learner_kwargs) -> "ray.actor.ActorHandle":
    """Start a :class:`LearnerGroup` actor (``learner.strategy: deepspeed``); arguments as
    :func:`brushrl.learner.launch.make_learner_actor`. Returns at once; the group waits for its
    placement group and builds the ranks in the background.

    Lifetimes: killing the returned actor ends its workers (Ray fate-shares actors with their owner),
    but not a placement group it would have created (measured with Ray 2.60: still reserved 120 s
    after the creator actor was killed). So the placement group is created here, by the caller, and
    removed when the returned handle is garbage-collected (a run's ``Trainer`` going away, e.g.
    between ``brushrl bench`` runs) or when the group fails; otherwise when the job ends.
    """
    bundle = _bundle(_worker_options(cfg))
    pg = placement_group([dict(bundle) for _ in range(cfg.learner.workers)], strategy="PACK")
    handle = ray.remote(LearnerGroup).options(num_cpus=0).remote(cfg, total_steps, pg, policy_loader, learner_kwargs)
    weakref.finalize(handle, _remove, pg).atexit = False
    return handle
