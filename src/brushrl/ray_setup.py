"""Connecting to (or starting) the Ray cluster."""

from __future__ import annotations

import logging
import os

import ray

from brushrl.config import RayConfig

log = logging.getLogger(__name__)

#: Local starts tried. Ray 2.60's raylet aborts when the dashboard agent has not written its port
#: files within ~15 s (node_manager.cc WaitForDashboardAgentPorts, not configurable in 2.60; seen
#: repeatedly on the shared 2-core machine at load ~30), and ray.init then raises "The current node
#: timed out during startup"; a second start usually finds the imports in the page cache.
_START_ATTEMPTS = 3


def init_ray(cfg: RayConfig) -> None:
    """Connect to the cluster the job runs on, or start a local one bound to 127.0.0.1.

    Under ``ray job submit`` (``RAY_ADDRESS`` is set) the driver joins the job's cluster and passes
    no ``runtime_env``: the job-level one applies (a driver-level one would conflict with it, a known
    Ray trap). Without a cluster, a new local one is started with ``cfg.num_cpus`` logical CPUs (``address="local"``:
    a plain ``ray.init`` would attach to any cluster recorded in ``/tmp/ray/ray_current_cluster``, even
    a stale one, and then reject ``num_cpus``). Ray binds
    to the machine's first interface by default; ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` kept every
    port on 127.0.0.1 on our CPU machine (shared/notes/probes.md), so it is set for local clusters.
    """
    if ray.is_initialized():
        return
    address = cfg.address or os.environ.get("RAY_ADDRESS")
    if address:
        ray.init(address=address, log_to_driver=True)
        return
    kwargs = {}
    if cfg.metrics_export_port:
        kwargs["_metrics_export_port"] = cfg.metrics_export_port
    start_local_ray(num_cpus=cfg.num_cpus,
                    runtime_env={"env_vars": {"OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}}, **kwargs)


def start_local_ray(**kwargs) -> None:
    """Start a new local Ray cluster bound to 127.0.0.1: ``ray.init(address="local",
    include_dashboard=False, _node_ip_address="127.0.0.1", **kwargs)`` with
    ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, tried up to ``_START_ATTEMPTS`` times when Ray's
    startup times out (see ``_START_ATTEMPTS``). A cluster this process is already connected to
    is shut down first, so the new one has exactly ``kwargs``' resources. The tests start their
    clusters with it too.

    Raises:
        Exception: what ``ray.init`` raised, for any other failure or the last timed-out start.
    """
    if ray.is_initialized():
        ray.shutdown()
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    kwargs = {"include_dashboard": False, **kwargs}
    for attempt in range(1, _START_ATTEMPTS + 1):
        try:
            # address="local": always a new cluster, never attach to one found in /tmp/ray
            ray.init(address="local", _node_ip_address="127.0.0.1", **kwargs)
            return
        except Exception as exc:  # noqa: BLE001 - Ray raises a bare Exception for this
            if "timed out during startup" not in str(exc) or attempt == _START_ATTEMPTS:
                raise
            log.warning("Ray local start timed out (attempt %d/%d); retrying", attempt, _START_ATTEMPTS)
            ray.shutdown()
