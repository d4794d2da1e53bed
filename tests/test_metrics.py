"""docs/metrics.md against the code and against a real Ray node's Prometheus endpoint."""

from __future__ import annotations

import os
import re
import time
import urllib.request
from pathlib import Path

import pytest

from brushrl.orchestrator.metrics import PipelineMetrics
from brushrl.ray_setup import start_local_ray
from brushrl.render.netns import count_unisolated_renderer
from brushrl.stats import quantile
from test_cluster import emitted_metrics
from conftest import free_port

ROOT = Path(__file__).resolve().parents[1]


def documented_metrics() -> dict[str, tuple[str, tuple[str, ...]]]:
    """Prometheus name -> (kind, labels) from the table in docs/metrics.md."""
    out = {}
    for line in (ROOT / "docs/metrics.md").read_text().splitlines():
        m = re.match(r"\| `(ray_brushrl_\w+)` \| (\w+) \|([^|]*)\|", line)
        if m:
            out[m.group(1)] = (m.group(2), tuple(re.findall(r"`(\w+)`", m.group(3))))
    return out


def test_documented_metrics_are_the_emitted_ones(monkeypatch):
    documented = documented_metrics()
    assert len(documented) >= 20
    assert documented == emitted_metrics(monkeypatch)


def test_ledger_states_are_the_ledger_counts():
    """``metrics.LEDGER_STATES`` is the group ledger's own definition, and names its group counts."""
    import brushrl.orchestrator.metrics as bm
    from brushrl.orchestrator import capacity
    from brushrl.orchestrator.capacity import GroupLedger

    assert bm.LEDGER_STATES is capacity.LEDGER_STATES
    counts = set(GroupLedger(groups_per_step=1).as_dict()) - {"groups_per_step", "max_staleness", "forfeited"}
    assert set(capacity.LEDGER_STATES) == counts
    assert capacity.LEDGER_STATES[1:-1] == capacity.TERMINAL


def test_quantile_interpolates_linearly_and_is_zero_for_none():
    xs = [3.0, 1.0, 9.0, 4.5, 2.0, 7.0]  # sorted: 1 2 3 4.5 7 9
    assert [quantile(xs, q) for q in (0, 0.5, 1)] == [1.0, 3.75, 9.0]
    assert quantile(xs, 0.95) == pytest.approx(7 + 0.75 * 2)
    assert quantile([], 0.5) == 0.0


@pytest.mark.slow
def test_every_documented_metric_reaches_prometheus():
    """Publish one step on a real local Ray node and find every documented series (with its labels)
    on the node's Prometheus endpoint.

    Runs in a fresh interpreter: after an earlier ``ray.init``/``ray.shutdown`` in the same process
    (other tests), gauges created for the new node were not exported (counters were)."""
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT / "src")])}
    code = "import test_metrics; test_metrics._publish_and_scrape()"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]


def _publish_and_scrape() -> None:
    import ray

    port = free_port()
    start_local_ray(num_cpus=1, log_to_driver=False, _metrics_export_port=port)
    try:
        m = PipelineMetrics()
        m.render_queue(3, 2)
        m.groups_in_flight(2)
        m.renderers.set(2)
        record = {"step": 1, "policy_version": 1, "reward/mean": 0.4, "reward/gate": 0.75, "gate/pass_rate": 0.75,
                  "samples": 4, "render/per_s": 0.5, "render/mean_s": 2.0, "staleness/max": 0,
                  "time/step_s": 10.0, "time/update_s": 2.0, "time/sync_s": 0.5}  # no ledger keys: those gauges start at 0
        counts = {"render": {"ok": 3}, "gate": {"pass": 3, "external_access": 1}, "none": {"render_infra": 1},
                  "groups": {"accepted": 1}, "scorer_none": {"judge:timeout": 1}}
        m.publish(record, counts, [1.0, 2.0, 3.0])
        count_unisolated_renderer()  # what a renderer actor started with network_isolation: none does
        wanted = documented_metrics()
        deadline, text = time.time() + 60, ""
        while time.time() < deadline:
            try:
                text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
            except OSError:
                text = ""
            if all(name in text for name in wanted):
                break
            time.sleep(2)
        missing = [n for n in wanted if n not in text]
        assert not missing, f"not on the endpoint: {missing}"
        for name, (kind, labels) in wanted.items():
            series = [ln for ln in text.splitlines() if ln.startswith(name + ("_bucket" if kind == "histogram" else ""))]
            assert series, name
            for label in labels:
                assert any(f'{label}="' in ln for ln in series), f"{name}: no {label} label"
        assert re.search(r'ray_brushrl_render_quantile_seconds\{[^}]*quantile="0.95"[^}]*\} 2.9', text)
        assert re.search(r'ray_brushrl_learner_idle_share\{[^}]*\} 0.75', text)
        # Nothing is set again: Ray alone drops a gauge ~20 s after its last recording (measured,
        # Ray 2.60, with the default 10 s report interval); every gauge must outlive that, at its value.
        gauges = [n for n, (kind, _) in wanted.items() if kind == "gauge"]
        quiet_since = time.monotonic()
        while time.monotonic() - quiet_since < 35.0:
            text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
            gone = [n for n in gauges if n not in text]
            assert not gone, f"{time.monotonic() - quiet_since:.1f} s after the last set, gone: {gone}"
            assert re.search(r'ray_brushrl_learner_idle_share\{[^}]*\} 0.75', text)
            time.sleep(1)
    finally:
        ray.shutdown()
