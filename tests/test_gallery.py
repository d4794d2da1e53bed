"""The live gallery in headless Debian Chromium (Playwright): it loads from disk and from
``brushrl serve``, shows the latest step first, reloads itself while the run goes on, runs no
policy code and logs no console errors."""

from __future__ import annotations

import shutil
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import sync_playwright

from brushrl.artifacts.gallery import gate_mix_svg, outcome, write_gallery
from brushrl.artifacts.serve import RunServer
from brushrl.cli import main

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
EVIL = '<script>alert("pwned")</script><img src=x onerror=alert(1)>'


def _rows(step: int, run: Path) -> list[dict]:
    """Four samples of one group: a rendered pass (a real PNG), a static-gate failure whose code
    tries to run script, a runtime failure and an infrastructure None."""
    png_dir = run / "png" / f"step_{step:04d}"
    png_dir.mkdir(parents=True, exist_ok=True)
    png = png_dir / "g0_s0.png"
    shutil.copy(ROOT / "pools/starter/anemone-0.png", png)
    base = {"step": step, "group_id": step, "prompt": "Paint a white anemone in loose watercolour.",
            "policy_version": step - 1, "completion": "", "png": None}
    return [
        base | {"sample": 0, "gate_verdict": "pass", "total": 0.5 + step / 10, "reward_gate": 1.0,
                "reward_length": 0.4, "reward_pool_similarity": 0.6, "code": "brush.circle(300, 300, 40);",
                "png": str(png)},
        base | {"sample": 1, "gate_verdict": "external_access", "total": 0.0, "code": EVIL},
        base | {"sample": 2, "gate_verdict": "blank_canvas", "total": 0.0, "code": "brush.noFill();"},
        base | {"sample": 3, "gate_verdict": "pass", "total": None, "none_cause": "render_infra", "code": "x"},
    ]


def _metrics(step: int) -> dict:
    return {"step": step, "reward/mean": 0.3 + step / 20, "reward/gate": 0.75, "reward/length": 0.4,
            "reward/pool_similarity": 0.2 + step / 10, "gate/pass_rate": 0.5, "samples/none": 1, "time/step_s": 12.5}


def _write(run: Path, upto: int, running: bool) -> None:
    rows = [r for s in range(1, upto + 1) for r in _rows(s, run)]
    write_gallery(run, rows, [_metrics(s) for s in range(1, upto + 1)], "demo", total_steps=3, running=running,
                  refresh_s=2)


@pytest.fixture
def run(tmp_path):
    run = tmp_path / "runs" / "demo"
    run.mkdir(parents=True)
    _write(run, 2, running=True)
    return run


@pytest.fixture
def page():
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        pg = browser.new_page()
        pg.problems = []  # console errors, page errors, dialogs, failed requests
        pg.on("console", lambda m: m.type == "error" and pg.problems.append(f"console: {m.text}"))
        pg.on("pageerror", lambda e: pg.problems.append(f"pageerror: {e}"))
        # A reload aborts the loads still in flight (net::ERR_ABORTED): that is not a broken page.
        pg.on("requestfailed", lambda r: "ERR_ABORTED" not in (r.failure or "") and pg.problems.append(f"requestfailed: {r.url} {r.failure}"))

        def on_dialog(d):
            pg.problems.append(f"dialog: {d.message}")
            d.dismiss()

        pg.on("dialog", on_dialog)
        yield pg
        browser.close()


#: One consistent look at the page (a running page reloads itself, so a series of separate queries
#: could straddle a reload).
SNAPSHOT = """() => ({
  latest: document.body.dataset.latestStep,
  state: document.body.dataset.state,
  first: document.querySelector("section.step")?.dataset.step,
  h2: document.querySelector("section.step h2")?.textContent,
  complete: [...document.images].every(i => i.complete),
  broken: [...document.images].filter(i => i.complete && i.naturalWidth === 0).map(i => i.src),
  charts: [...document.querySelectorAll(".charts img")].map(i => i.alt),
  pre: [...document.querySelectorAll("pre")].map(p => p.textContent),
  scripts: document.querySelectorAll("script").length,
})"""


def _check_loaded(page, step: int, timeout_s: float = 30.0) -> dict:
    """Wait until the page shows ``step`` with every image loaded; check it and return the snapshot."""
    deadline, snap = time.time() + timeout_s, None
    while time.time() < deadline:
        try:
            snap = page.evaluate(SNAPSHOT)
        except PlaywrightError:  # the context went away in a reload: look again
            snap = None
        if snap and snap["latest"] == str(step) and snap["complete"]:
            break
        time.sleep(0.2)
    assert snap and snap["latest"] == str(step), snap
    assert snap["first"] == str(step) and snap["h2"] == f"step {step}"  # the latest step comes first
    assert snap["broken"] == []
    assert snap["charts"] == ["reward curves per component", "gate verdict mix by step"]
    # Policy code is shown as text, never run.
    assert EVIL in snap["pre"] and snap["scripts"] == 0
    return snap


def test_gallery_from_disk_updates_while_the_run_goes_on(run, page):
    page.goto((run / "gallery.html").as_uri())
    assert _check_loaded(page, 2)["state"] == "running"
    _write(run, 3, running=False)  # the trainer's last write: no more reloads
    assert _check_loaded(page, 3)["state"] == "finished"  # the page reloaded itself
    assert "step 3/3" in page.locator("#status").inner_text()
    assert page.locator("meta[http-equiv='refresh']").count() == 0
    cards = page.locator("section[data-step='3'] .card")
    assert cards.count() == 4
    assert "gate: pass" in cards.nth(0).inner_text() and "pool_similarity=0.60" in cards.nth(0).inner_text()
    assert "None (render_infra)" in cards.nth(3).inner_text()
    assert page.problems == []


def test_gallery_served_by_brushrl_serve(run, page):
    server = RunServer(run, 0).start()
    try:
        with urllib.request.urlopen(server.url) as resp:
            assert resp.headers["Cache-Control"] == "no-store"
        page.goto(server.url)
        _check_loaded(page, 2)
        _write(run, 3, running=False)
        _check_loaded(page, 3)
        assert page.problems == []
        # Nothing outside the run directory is served.
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(server.url.replace("gallery.html", "../../../etc/passwd"))
    finally:
        server.close()


def test_serve_cli_rejects_a_missing_run(tmp_path, capsys):
    assert main(["serve", str(tmp_path / "nope")]) == 2
    assert "does not exist" in capsys.readouterr().out


def test_gate_mix_counts_outcomes(tmp_path):
    rows = _rows(1, tmp_path) + _rows(2, tmp_path)[:2]
    assert [outcome(r) for r in rows[:4]] == ["pass", "external_access", "blank_canvas", "none:render_infra"]
    svg = gate_mix_svg(rows)
    assert "step 1: pass 1/4" in svg and "step 1: none:render_infra 1/4" in svg
    assert "step 2: external_access 1/2" in svg and "step 2: blank_canvas" not in svg
    assert svg.count("<rect x=") == 4 + 2 + 4  # bars of step 1, of step 2, legend swatches


def test_a_moved_run_directory_links_its_own_pngs(tmp_path):
    """rollouts.parquet keeps the absolute PNG paths the run wrote; after the run folder was copied
    elsewhere, the gallery links the copy's own png/ files (it failed with ValueError before)."""
    first, moved = tmp_path / "cluster" / "runs" / "demo", tmp_path / "laptop" / "demo"
    rows = _rows(1, first)
    shutil.copytree(first, moved)
    write_gallery(moved, rows, [_metrics(1)], "demo", total_steps=1)
    page = (moved / "gallery.html").read_text()
    assert 'src="png/step_0001/g0_s0.png"' in page and str(first) not in page
    assert (moved / "png" / "step_0001" / "g0_s0.png").exists()


def test_eval_page_learning_curve_is_a_moving_mean_of_the_training_metrics(tmp_path):
    """The eval page's training curve (issue 35): per step the mean of the last 5 steps' reward,
    gate pass, subject fidelity and diversity from metrics.jsonl; nothing without the file."""
    import json
    import re

    from brushrl.artifacts.eval_page import learning_curve

    assert learning_curve(tmp_path) == ""
    records = [{"step": s, "reward/mean": 0.1 * s, "gate/pass_rate": 1.0, "paint/subject_fidelity": 0.5,
                "paint/diversity": 0.0 if s < 10 else 1.0} for s in range(1, 11)]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    html_text = learning_curve(tmp_path)
    lines = re.findall(r'points="([^"]+)"', html_text)
    assert len(lines) == 4 and all(len(p.split()) == 10 for p in lines)
    for label in ("reward", "gate pass", "subject fidelity", "diversity"):
        assert f">{label}</text>" in html_text
    ys = lambda pts: [float(xy.split(",")[1]) for xy in pts.split()]  # noqa: E731
    reward, gate, _, diversity = (ys(p) for p in lines)
    top, bottom = 36, 240 - 36
    # reward at step 10: mean of 0.6..1.0 = 0.8; diversity at step 10: one 1.0 in the window = 0.2
    assert reward[-1] == pytest.approx(bottom - 0.8 * (bottom - top), abs=0.2)
    assert diversity[-1] == pytest.approx(bottom - 0.2 * (bottom - top), abs=0.2) and diversity[0] == bottom
    assert set(gate) == {top}
