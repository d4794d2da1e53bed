"""Run Chromium in an empty network namespace (``unshare -n`` as root, else ``unshare -rn``; util-linux).

Why: the page's own defences (route interception, CSP, WebRTC policy) stop every request, but not
Chromium's speculative *preconnect*: a sketch that opens a popup, submits a form or navigates to
``http://127.0.0.1:PORT/`` made a TCP connection reach a listener on that port although the request
itself was aborted or refused (measured, Chromium 156). In a network namespace of its own Chromium
has only a loopback that is down and no route anywhere, so nothing it opens leaves it; Playwright
talks to it over a pipe (``--remote-debugging-pipe``) and is unaffected.

As root ``unshare -n`` suffices (it needs CAP_SYS_ADMIN, which a container has only when granted);
other users need unprivileged user namespaces (``-rn``). Isolation fails closed: where neither
works (a default Kubernetes pod, some container runtimes) ``network_launcher`` raises, unless the
config opts out with ``render.network_isolation: none`` (the Renderer then logs a warning and
counts ``brushrl_renderers_unisolated_total``). docs/cluster.md says what a pod needs. Cost: none measurable (skeleton, llvmpipe, 3 alternating pairs each, shared box:
``-n`` 2.07-2.57 vs 2.41-2.86 core-s without; ``-rn`` 3.92-4.01 vs 4.62-4.87 at higher load).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path


def unshare_flags() -> str:
    """``-n`` as root (a network namespace only), else ``-rn`` (inside a new user namespace)."""
    return "-n" if os.geteuid() == 0 else "-rn"


_probed: dict[str, bool] = {}  # unshare_flags() -> the probe's definite answer


def netns_available() -> bool:
    """Whether ``unshare <unshare_flags()> true`` works on this machine. A definite answer is
    cached per process; a probe that timed out (a loaded machine) says False and is asked again
    next time, so that one slow probe does not turn isolation off for the process's life."""
    flags = unshare_flags()
    if flags not in _probed:
        exe = shutil.which("unshare")
        try:
            _probed[flags] = exe is not None and subprocess.run(
                [exe, flags, "true"], capture_output=True, timeout=30).returncode == 0
        except subprocess.TimeoutExpired:
            return False  # not cached: asked again next time
        except OSError:
            _probed[flags] = False
    return _probed[flags]


def network_launcher(chromium_path: str, mode: str) -> tuple[str, bool]:
    """The executable to launch and whether it isolates the network.

    Args:
        chromium_path: the real Chromium executable.
        mode: ``"netns"`` (an empty network namespace, required) or ``"none"`` (explicitly no
            namespace: ``chromium_path`` unchanged; the page defences and launch flags remain).

    Returns:
        ``(executable, isolated)``; with isolation, ``executable`` is a two-line shell wrapper
        ``exec unshare -n|-rn -- CHROMIUM "$@"`` in the temp folder (one per Chromium path and user).

    Raises:
        RuntimeError: ``mode == "netns"`` and ``unshare`` does not work here (the message says how
            to grant it or opt out).
        ValueError: unknown ``mode`` (``"auto"``, which fell back silently, is gone).
    """
    if mode not in ("netns", "none"):
        raise ValueError(
            f"render.network_isolation must be netns or none, not {mode!r} (auto used to fall back "
            "to no isolation silently; say none to opt out explicitly)"
        )
    if mode == "none":
        return chromium_path, False
    if not netns_available():
        raise RuntimeError(
            f"render.network_isolation=netns but `unshare {unshare_flags()} true` fails on this machine: "
            "the renderer refuses to start without a network namespace. Grant one (root with "
            "CAP_SYS_ADMIN, or unprivileged user namespaces; see docs/cluster.md) or set "
            "render.network_isolation: none to run without it (logged and counted)"
        )
    tag = hashlib.sha256(chromium_path.encode()).hexdigest()[:12]
    wrapper = Path(tempfile.gettempdir()) / f"brushrl-chromium-netns-{tag}-{os.getuid()}"
    text = f'#!/bin/sh\nexec {shutil.which("unshare")} {unshare_flags()} -- {chromium_path} "$@"\n'
    if not wrapper.exists() or wrapper.read_text() != text:
        tmp = wrapper.with_name(wrapper.name + f".{os.getpid()}")
        tmp.write_text(text)
        tmp.chmod(0o755)
        os.replace(tmp, wrapper)
    return str(wrapper), True


#: ``brushrl_renderers_unisolated_total``: name and description, shared by the driver's
#: ``PipelineMetrics`` (orchestrator/metrics.py) and the renderer processes that count (``count_unisolated_renderer``).
UNISOLATED = ("brushrl_renderers_unisolated_total",
              "Browsers a renderer started without a network namespace (render.network_isolation: none)")
_unisolated: list = []  # this process's counter, created on first use


def count_unisolated_renderer() -> None:
    """Count one browser started without a network namespace, from the process that started it (a
    renderer actor). Does nothing outside Ray (a CLI render, a test without a cluster)."""
    import ray

    if not ray.is_initialized():
        return
    if not _unisolated:
        from ray.util import metrics

        _unisolated.append(metrics.Counter(*UNISOLATED))
    _unisolated[0].inc()
