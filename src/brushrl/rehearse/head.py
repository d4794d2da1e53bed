"""A private local Ray head for ``brushrl rehearse``: ``ray start --head --block`` on free loopback
ports with its own temp dir and token auth (as ``make ray-head`` starts one), so a rehearsal never
touches another Ray on the machine; jobs go to it with ``ray job submit``."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: Ray 2.60's raylet aborts when its dashboard agent is slow to write its port files on a loaded
#: machine, and ``ray start`` exits (brushrl.ray_setup); a new start usually works.
ATTEMPTS = 4
#: ``ray start`` options naming a port (each given a free one).
PORT_OPTIONS = ("port", "ray-client-server-port", "dashboard-agent-listen-port", "dashboard-agent-grpc-port",
                "metrics-export-port", "runtime-env-agent-port", "node-manager-port", "object-manager-port")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PrivateHead:
    """A local head with ``num_cpus`` logical CPUs; ``address`` is its dashboard (the job API).

    Args:
        log_path: where ``ray start``'s output goes.
        num_cpus: logical CPUs of the head.
    """

    def __init__(self, log_path: Path, num_cpus: int = 4):
        self.log_path, self.num_cpus = log_path, num_cpus
        bindir = str(Path(sys.executable).parent)
        self.env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
                    "PATH": f"{bindir}:{os.environ.get('PATH', '')}"}
        for name in ("RAY_ADDRESS",):
            self.env.pop(name, None)
        self.ray = str(Path(bindir) / "ray")
        self.proc: subprocess.Popen | None = None
        self.temp_dir = ""
        self.address = ""
        self.gcs = ""

    def start(self, timeout_s: float = 240) -> str:
        """Start the head; returns its dashboard address once ``ray job list`` answers.

        Raises:
            RuntimeError: no start in ``ATTEMPTS`` tries (the log's tail in the message).
        """
        subprocess.run([self.ray, "get-auth-token", "--generate"], env=self.env, capture_output=True, timeout=120)
        for _ in range(ATTEMPTS):
            self.temp_dir = tempfile.mkdtemp(prefix="brh", dir="/tmp")  # short: Ray's socket paths
            dashboard, ports = free_port(), {name: free_port() for name in PORT_OPTIONS}
            self.address = f"http://127.0.0.1:{dashboard}"
            self.gcs = f"127.0.0.1:{ports['port']}"
            cmd = [self.ray, "start", "--head", "--block", "--node-ip-address=127.0.0.1", "--dashboard-host=127.0.0.1",
                   f"--dashboard-port={dashboard}", f"--num-cpus={self.num_cpus}", f"--temp-dir={self.temp_dir}",
                   "--disable-usage-stats", *(f"--{name}={port}" for name, port in ports.items())]
            with open(self.log_path, "a") as log:
                self.proc = subprocess.Popen(cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                             start_new_session=True)
            end = time.monotonic() + timeout_s
            while self.proc.poll() is None and time.monotonic() < end:
                if self.jobs("list").returncode == 0:
                    return self.address
                time.sleep(2)
            self.stop()
        raise RuntimeError(f"local Ray head did not come up:\n{self.log_path.read_text()[-3000:]}")

    def jobs(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        """``ray job ARGS --address <this head>`` with the head's token."""
        return subprocess.run([self.ray, "job", args[0], "--address", self.address, *args[1:]], env=self.env,
                              capture_output=True, text=True, timeout=timeout)

    def stop(self) -> None:
        """End ``ray start --block`` (it stops the head's processes) and remove the temp dir."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc = None
        import shutil

        import psutil

        for proc in psutil.process_iter(["pid", "cmdline"]):  # this head's own processes left behind
            try:
                if self.temp_dir and self.temp_dir in " ".join(proc.info["cmdline"] or []):
                    proc.kill()
            except psutil.Error:
                continue
        shutil.rmtree(self.temp_dir, ignore_errors=True)
