"""``gallery.html`` and ``reward_curve.svg``: the run's paintings by step and its reward curves.

The page is static (no scripts), opens from disk, and shows every string from the policy escaped:
sketch code is untrusted text and is never executed here.
"""

from __future__ import annotations

import html
from collections import defaultdict
from pathlib import Path

from brushrl.artifacts.run_dir import atomic_write

_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;background:#faf7f2;color:#222}
h2{margin-top:1.6em;border-bottom:1px solid #ddd}
.grid{display:flex;flex-wrap:wrap;gap:12px}
.card{background:#fff;border:1px solid #ddd;border-radius:6px;padding:8px;width:220px;font-size:12px}
.card img{width:200px;height:200px;object-fit:contain;background:#eee;display:block}
.noimg{width:200px;height:200px;display:flex;align-items:center;justify-content:center;background:#eee;color:#a33}
.fail{color:#a33}.pass{color:#264}
pre{white-space:pre-wrap;max-height:240px;overflow:auto;background:#f4f4f4;font-size:10px}
table.m td,table.m th{padding:2px 8px;text-align:right}
"""

_COLOURS = {"total": "#222", "gate": "#888", "length": "#49a", "pool_similarity": "#c63"}


def reward_curve_svg(metrics: list[dict], width: int = 640, height: int = 240) -> str:
    """An SVG line chart of mean reward per step: the total and each ``reward/<component>`` key.

    Args:
        metrics: ``metrics.jsonl`` records with ``step`` and ``reward/mean`` / ``reward/<name>``.
    """
    series: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for m in metrics:
        for key, value in m.items():
            if key.startswith("reward/") and isinstance(value, (int, float)):
                name = "total" if key == "reward/mean" else key.split("/", 1)[1]
                series[name].append((m["step"], float(value)))
    pad = 36
    steps = [s for pts in series.values() for s, _ in pts] or [0, 1]
    lo, hi = min(steps), max(max(steps), min(steps) + 1)

    def xy(step: int, value: float) -> str:
        x = pad + (step - lo) / (hi - lo) * (width - 2 * pad)
        y = height - pad - max(0.0, min(1.0, value)) * (height - 2 * pad)
        return f"{x:.1f},{y:.1f}"

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" y2="{height - pad}" stroke="#999"/>',
        f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{height - pad}" stroke="#999"/>',
        f'<text x="4" y="{pad + 4}">1.0</text><text x="4" y="{height - pad}">0.0</text>',
        f'<text x="{width / 2 - 20:.0f}" y="{height - 8}">step {lo}..{hi}</text>',
    ]
    for i, (name, pts) in enumerate(sorted(series.items())):
        colour = _COLOURS.get(name, "#6a4")
        points = " ".join(xy(s, v) for s, v in pts)
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{points}"/>')
        parts.append(f'<text x="{width - pad - 110}" y="{pad + 14 * i}" fill="{colour}">{html.escape(name)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _card(row: dict, root: Path) -> str:
    verdict = row.get("gate_verdict", "")
    total = row.get("total")
    total_txt = "None (" + html.escape(str(row.get("none_cause"))) + ")" if total is None else f"{total:.3f}"
    comps = " ".join(
        f"{html.escape(k[7:])}={v:.2f}" for k, v in sorted(row.items())
        if k.startswith("reward_") and isinstance(v, (int, float))
    )
    png = row.get("png")
    if png:
        rel = html.escape(str(Path(png).resolve().relative_to(root)) if Path(png).is_absolute() else png)
        img = f'<img src="{rel}" alt="painting" loading="lazy">'
    else:
        img = f'<div class="noimg">{html.escape(verdict)}</div>'
    cls = "pass" if verdict == "pass" else "fail"
    return (
        f'<div class="card">{img}<div>group {row["group_id"]} · v{row["policy_version"]} · '
        f'<b>{total_txt}</b></div><div class="{cls}">gate: {html.escape(verdict)}</div>'
        f"<div>{comps}</div><details><summary>code</summary><pre>{html.escape(row.get('code') or row.get('completion') or '')}</pre></details></div>"
    )


def write_gallery(root: Path, rows: list[dict], metrics: list[dict], name: str) -> Path:
    """Write ``gallery.html`` (newest step first) and ``reward_curve.svg`` into ``root``.

    Returns the gallery path.
    """
    root = Path(root).resolve()
    atomic_write(root / "reward_curve.svg", reward_curve_svg(metrics))
    by_step: dict[int, list[dict]] = defaultdict(list)
    for row in rows:
        by_step[row["step"]].append(row)
    head = "".join(
        f"<tr><td>{m['step']}</td><td>{m.get('reward/mean', float('nan')):.3f}</td>"
        f"<td>{m.get('gate/pass_rate', float('nan')):.2f}</td><td>{m.get('time/step_s', float('nan')):.1f}</td></tr>"
        for m in metrics[-10:]
    )
    sections = []
    for step in sorted(by_step, reverse=True):
        cards = "".join(_card(r, root) for r in by_step[step])
        prompts = sorted({r["prompt"] for r in by_step[step]})
        sections.append(
            f'<h2 id="step-{step}">step {step}</h2><div>{html.escape(" · ".join(prompts))}</div>'
            f'<div class="grid">{cards}</div>'
        )
    page = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>brushrl · {html.escape(name)}</title>"
        f"<style>{_CSS}</style></head><body><h1>brushrl run: {html.escape(name)}</h1>"
        f'<img src="reward_curve.svg" alt="reward curve">'
        f'<table class="m"><tr><th>step</th><th>reward</th><th>gate pass</th><th>s/step</th></tr>{head}</table>'
        f"{''.join(sections)}</body></html>"
    )
    atomic_write(root / "gallery.html", page)
    return root / "gallery.html"
