"""Connecting to (or starting) the Ray cluster: the job's, an in-process local one, or a private local
head that jobs are submitted to (:class:`PrivateHead`), and the runtime env of a local job."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import ray

from brushrl.config import ActorPlacement, RayConfig

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


#: Left out of a job's upload (Ray's gitignore-style patterns): history (a ``.git`` over 100 MiB
#: fails the job), envs, runs, caches and the npm libraries (the job reads them in place).
JOB_EXCLUDES = [".git", ".venv*", "runs", ".cache", "js/node_modules", "**/__pycache__"]


def job_runtime_env(root: str | Path, **env_vars: str) -> dict:
    """The runtime env of a brushrl job submitted from the checkout at ``root`` to a local head
    (``make submit``, ``brushrl rehearse``, the tests; a cluster uses ``cluster/runtime_env.yaml``).

    The checkout is the working dir and its package goes first on the job's ``PYTHONPATH``
    (``py_modules``), so the job runs the code submitted, not another installed copy;
    ``BRUSHRL_JS_DIR`` points the renderers at this checkout's browser libraries; one thread per
    actor (the actors share the cores); ``RAY_JOB_STOP_WAIT_TIME_S``: seconds ``ray job stop`` waits
    after SIGTERM before SIGKILL (Ray's 3 s is too short to close the browsers and finish the step
    being written; read by the job's supervisor actor, which gets these variables). ``env_vars``
    add or replace variables.
    """
    root = Path(root).resolve()
    return {"working_dir": str(root), "py_modules": [str(root / "src" / "brushrl")], "excludes": JOB_EXCLUDES,
            "env_vars": {"BRUSHRL_JS_DIR": str(root / "js"), "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
                         "RAY_JOB_STOP_WAIT_TIME_S": "60", **env_vars}}


def ray_options(placement: ActorPlacement) -> dict:
    """Ray actor options (``num_gpus``, ``memory`` in bytes, ``resources``) of a placement, leaving
    out the ones at their default so a local config asks for nothing extra."""
    opts: dict = {}
    if placement.num_gpus:
        opts["num_gpus"] = placement.num_gpus
    if placement.memory_gb:
        opts["memory"] = int(placement.memory_gb * 2**30)
    if placement.resources:
        opts["resources"] = dict(placement.resources)
    return opts


#: Ports Ray's own components take by default (dashboard agent HTTP 52365, GCS 6379, dashboard
#: 8265, client server 10001): a port handed to Ray for something else must not be one of them
#: (CI once drew 52365 for metrics_export_port and ``ray.init`` refused it).
RAY_DEFAULT_PORTS = frozenset({6379, 8265, 10001, 52365})


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that was free a moment ago (the OS picked it; a server started right
    after will almost always get it), never one of :data:`RAY_DEFAULT_PORTS`."""
    while True:
        with socket.socket() as s:
            s.bind((host, 0))
            port = s.getsockname()[1]
        if port not in RAY_DEFAULT_PORTS:
            return port


#: The dashboard agent's HTTP port when ``ray start`` is given none (Ray's default; ``make ray-head``).
DEFAULT_AGENT_PORT = 52365


def node_healthy(agent_port: int = DEFAULT_AGENT_PORT, host: str = "127.0.0.1", timeout_s: float = 5.0) -> bool:
    """True when the node's dashboard agent on ``agent_port`` answers ``GET /api/healthz`` with 200:
    the agent is up and reports its raylet and the GCS alive (``ray/dashboard/modules/reporter/
    healthz_agent.py``, the probe Ray's own Kubernetes operator uses).

    Why not the job API alone: a head whose job API answers can still lose its raylet ~15-17 s later
    when the agent is slow to start (Ray 2.60 ``WaitForDashboardAgentPorts``, see
    ``_START_ATTEMPTS``); the agent serving HTTP means it has registered. Measured here (quiet): the
    job API answered 14.4 s after ``ray start``, the agent's port was refused then and healthy 1 s later.
    """
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://{host}:{agent_port}/api/healthz", timeout=timeout_s) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError):
        return False


def wait_node_healthy(agent_port: int = DEFAULT_AGENT_PORT, timeout_s: float = 180.0,
                      alive: Callable[[], bool] | None = None) -> None:
    """Block until :func:`node_healthy` (polled every second).

    Args:
        agent_port: the node's ``--dashboard-agent-listen-port``.
        timeout_s: seconds to wait in all.
        alive: checked each poll; False ends the wait early (the head's process exited).

    Raises:
        TimeoutError: not healthy within ``timeout_s``, or ``alive()`` turned False.
    """
    end = time.monotonic() + timeout_s
    while time.monotonic() < end and (alive is None or alive()):
        if node_healthy(agent_port):
            return
        time.sleep(1)
    raise TimeoutError(f"the Ray node's dashboard agent on 127.0.0.1:{agent_port} did not report its raylet and GCS "
                       f"healthy (GET /api/healthz) within {timeout_s:.0f} s")


class PrivateHead:
    """A local Ray head of its own: ``ray start --head --block`` on free loopback ports, its own temp
    dir and token auth, so it never touches another Ray on the machine (a ``ray stop`` would stop
    them all); it is stopped by ending its process group. Jobs go to it with :meth:`jobs`.

    Args:
        log_path: where the head's output goes.
        num_cpus: logical CPUs of the head.
        env: the environment of the head and of the ``ray job`` CLI (default: this process's, with
            ``RAY_AUTH_MODE=token``, ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, this Python's ``bin``
            first on ``PATH`` and no ``RAY_ADDRESS``).
        keep_logs: folder that receives the Ray session's logs when the head stops (None: dropped).
    """

    #: Starts tried: on a loaded machine Ray 2.60's raylet aborts when the dashboard agent is slow
    #: to write its port files (see ``_START_ATTEMPTS``), and ``ray start`` exits.
    ATTEMPTS = 5
    #: ``ray start`` options naming a port (each given a free one).
    PORT_OPTIONS = ("port", "ray-client-server-port", "dashboard-agent-listen-port", "dashboard-agent-grpc-port",
                    "metrics-export-port", "runtime-env-agent-port", "node-manager-port", "object-manager-port")

    def __init__(self, log_path: Path, num_cpus: int = 4, env: dict | None = None, keep_logs: Path | None = None):
        self.log_path, self.num_cpus, self.keep_logs = Path(log_path), num_cpus, keep_logs
        self.bin = Path(sys.executable).parent
        self.env = dict(os.environ if env is None else env, RAY_AUTH_MODE="token", RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0",
                        PATH=f"{self.bin}:{os.environ.get('PATH', '')}")
        self.env.pop("RAY_ADDRESS", None)
        self.proc: subprocess.Popen | None = None
        self.temp_dir = self.address = ""
        self.agent_port = 0

    def start(self, timeout_s: float = 240) -> str:
        """Start the head; returns its dashboard address (the job API) once ``ray job list`` answers
        with the token and the node's agent reports the raylet alive (:func:`node_healthy`: the job
        API alone answered while the raylet could still abort, issue 38).

        Raises:
            RuntimeError: no start in ``ATTEMPTS`` tries (the log's tail in the message).
        """
        for _ in range(self.ATTEMPTS):
            self.temp_dir = tempfile.mkdtemp(prefix="brh", dir="/tmp")  # short: Ray's socket paths
            dashboard, ports = free_port(), {name: free_port() for name in self.PORT_OPTIONS}
            self.address = f"http://127.0.0.1:{dashboard}"
            args = ["--block", f"--dashboard-port={dashboard}", f"--num-cpus={self.num_cpus}",
                    f"--temp-dir={self.temp_dir}", *(f"--{name}={port}" for name, port in ports.items())]
            self.proc = self._launch(args)
            end = time.monotonic() + timeout_s
            self.agent_port = ports["dashboard-agent-listen-port"]
            while self.proc.poll() is None and time.monotonic() < end:
                if node_healthy(self.agent_port) and self.jobs("list").returncode == 0:
                    return self.address
                time.sleep(2)
            self.stop()
        raise RuntimeError(f"local Ray head did not come up:\n{self.log_path.read_text()[-3000:]}")

    def _launch(self, args: list[str]) -> subprocess.Popen:
        """Create the token where none exists (``ray start`` does not), then start the head with
        ``args`` (``--block``, ports, temp dir) in a new process group."""
        subprocess.run([str(self.bin / "ray"), "get-auth-token", "--generate"], env=self.env, capture_output=True,
                       timeout=120)
        cmd = [str(self.bin / "ray"), "start", "--head", "--node-ip-address=127.0.0.1", "--dashboard-host=127.0.0.1",
               "--disable-usage-stats", *args]
        with open(self.log_path, "a") as log:
            return subprocess.Popen(cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def jobs(self, command: str, *args: str, timeout: float = 120, cwd: str | Path | None = None
             ) -> subprocess.CompletedProcess:
        """``ray job COMMAND --address <this head> ARGS...`` with the head's token (the CLI, not
        ``JobSubmissionClient``: Ray reads ``RAY_AUTH_MODE`` once per process)."""
        return subprocess.run([str(self.bin / "ray"), "job", command, "--address", self.address, *args], cwd=cwd,
                              env=self.env, capture_output=True, text=True, timeout=timeout)

    def stop(self) -> None:
        """End the head's process group (``ray start --block`` stops the head's processes), then any
        process still running from its temp dir; keep the logs (``keep_logs``), remove the temp
        dir. Safe to call twice."""
        import psutil

        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc = None
        if not self.temp_dir:
            return
        for proc in psutil.process_iter(["pid", "cmdline"]):  # this head's own processes left behind
            try:
                if self.temp_dir in " ".join(proc.info["cmdline"] or []):
                    proc.kill()
            except psutil.Error:
                continue
        logs = Path(self.temp_dir) / "session_latest" / "logs"
        if self.keep_logs is not None and logs.is_dir():
            shutil.copytree(logs, self.keep_logs / f"ray_logs_{Path(self.temp_dir).name}", dirs_exist_ok=True)
        shutil.rmtree(self.temp_dir, ignore_errors=True)
        self.temp_dir = ""


def main(argv: list[str] | None = None) -> int:
    """``python -m brushrl.ray_setup wait-healthy [--agent-port P] [--timeout S]``: block until the
    local node is healthy (``make ray-head`` runs it after ``ray start``); exit 1 with the reason."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m brushrl.ray_setup", description=main.__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    w = sub.add_parser("wait-healthy", help="wait until the local Ray node's agent reports its raylet and GCS alive")
    w.add_argument("--agent-port", type=int, default=DEFAULT_AGENT_PORT,
                   help="the node's --dashboard-agent-listen-port (default: %(default)s, Ray's)")
    w.add_argument("--timeout", type=float, default=180.0, help="seconds (default: %(default)s)")
    args = p.parse_args(argv)
    try:
        wait_node_healthy(args.agent_port, args.timeout)
    except TimeoutError as exc:
        print(f"[brushrl] {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
