"""``gallery.html``, ``reward_curve.svg`` and ``gate_mix.svg``: the run's paintings by step, its
reward curves per component and its gate-verdict mix over time. A multi-turn run's trajectories
are strips: painting, critique, revised painting, ... with the trajectory's reward.

The trainer rewrites all three after every step (atomically), so the page is live while the run
goes on: until the run finishes the page carries ``<meta http-equiv="refresh">`` and reloads itself,
opened from disk (``file://``) or served by ``brushrl serve runs/X`` alike; the final write drops it.
The page has no scripts and shows every string from the policy escaped: sketch code is untrusted
text and is never executed here.
"""

from __future__ import annotations

import html
import time
from collections import Counter, defaultdict
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
.charts{display:flex;flex-wrap:wrap;gap:16px;align-items:flex-start}
nav a{margin-right:6px}
.status{color:#555;font-size:13px}
.strips{display:flex;flex-direction:column;gap:12px}
.strip{display:flex;gap:8px;align-items:stretch;flex-wrap:wrap}
.strip .head{width:100%;font-size:12px;color:#444}
.critique{width:180px;font-size:11px;background:#fffbe8;border:1px solid #e6dcb0;border-radius:6px;padding:6px;overflow:auto;max-height:300px}
.critique .arrow{font-size:16px;color:#998}
"""

#: Colours of gate verdicts in ``gate_mix.svg``: pass green, None causes grey, reasons from a cycle.
_PASS_COLOUR, _NONE_COLOUR = "#3a7d44", "#9a9a9a"
_REASON_COLOURS = ("#c0392b", "#e67e22", "#8e44ad", "#2c7fb8", "#d4ac0d", "#a04000", "#17a589", "#cb4335",
                   "#5d6d7e", "#af7ac5", "#f1948a", "#76448a")

_COLOURS = {"total": "#222", "gate": "#888", "length": "#49a", "pool_similarity": "#c63", "subject": "#84c",
            "novelty": "#2a8"}


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
    return line_chart_svg(dict(sorted(series.items())), _COLOURS, width, height)


def line_chart_svg(series: dict[str, list[tuple[int, float]]], colours: dict[str, str], width: int = 640,
                   height: int = 240) -> str:
    """An SVG line chart of ``series`` (name -> (step, value in [0, 1]) points; values clipped to
    [0, 1]), one labelled polyline each in ``colours[name]`` (default green), in the given order."""
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
    for i, (name, pts) in enumerate(series.items()):
        colour = colours.get(name, "#6a4")
        points = " ".join(xy(s, v) for s, v in pts)
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{points}"/>')
        parts.append(f'<text x="{width - pad - 110}" y="{pad + 14 * i}" fill="{colour}">{html.escape(name)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def outcome(row: dict) -> str:
    """A sample's outcome for the verdict mix: ``none:<cause>`` when its reward is None (an
    infrastructure failure, not a verdict), else its gate verdict (``pass`` or a reason code)."""
    if row.get("total") is None and row.get("none_cause"):
        return f"none:{row['none_cause']}"
    return str(row.get("gate_verdict") or "unknown")


def _outcome_colours(names: list[str]) -> dict[str, str]:
    reasons = sorted(n for n in names if n != "pass" and not n.startswith("none:"))
    colours = {n: _REASON_COLOURS[i % len(_REASON_COLOURS)] for i, n in enumerate(reasons)}
    colours.update({n: _NONE_COLOUR for n in names if n.startswith("none:")})
    colours["pass"] = _PASS_COLOUR
    return colours


def gate_mix_svg(rows: list[dict], width: int = 640, height: int = 240) -> str:
    """An SVG stacked bar chart: per step, the share of samples by outcome (``outcome(row)``).

    Args:
        rows: ``rollouts.parquet`` rows with ``step``, ``gate_verdict``, ``total``, ``none_cause``.
    """
    by_step: dict[int, Counter] = defaultdict(Counter)
    for row in rows:
        by_step[int(row["step"])][outcome(row)] += 1
    names = sorted({n for c in by_step.values() for n in c}, key=lambda n: (n != "pass", n.startswith("none:"), n))
    colours = _outcome_colours(names)
    pad, legend_w = 36, 150
    plot_w = width - 2 * pad - legend_w
    steps = sorted(by_step)
    bar_w = plot_w / max(len(steps), 1)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{pad}" y="14">gate verdicts by step (share of samples)</text>',
        f'<line x1="{pad}" y1="{height - pad}" x2="{pad + plot_w}" y2="{height - pad}" stroke="#999"/>',
        f'<text x="4" y="{pad + 4}">100%</text><text x="4" y="{height - pad}">0%</text>',
    ]
    if steps:
        parts.append(f'<text x="{pad}" y="{height - 8}">step {steps[0]}..{steps[-1]}</text>')
    for i, step in enumerate(steps):
        counts, total = by_step[step], sum(by_step[step].values())
        y = float(height - pad)
        for name in names:
            if counts[name]:
                h = counts[name] / total * (height - 2 * pad)
                y -= h
                parts.append(
                    f'<rect x="{pad + i * bar_w + 0.5:.1f}" y="{y:.1f}" width="{max(bar_w - 1, 0.5):.1f}" height="{h:.1f}" '
                    f'fill="{colours[name]}"><title>step {step}: {html.escape(name)} {counts[name]}/{total}</title></rect>'
                )
    for j, name in enumerate(names):
        y = pad + 14 * j
        parts.append(f'<rect x="{width - legend_w}" y="{y - 9}" width="10" height="10" fill="{colours[name]}"/>')
        parts.append(f'<text x="{width - legend_w + 14}" y="{y}">{html.escape(name)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _card(row: dict, root: Path, label: str = "") -> str:
    verdict = row.get("gate_verdict", "")
    total = row.get("total")
    total_txt = "None (" + html.escape(str(row.get("none_cause"))) + ")" if total is None else f"{total:.3f}"
    comps = " ".join(
        f"{html.escape(k[7:])}={v:.2f}" for k, v in sorted(row.items())
        if k.startswith("reward_") and isinstance(v, (int, float))
    )
    png = row.get("png")
    if png:
        rel = html.escape(_run_relative(png, root))
        img = f'<img src="{rel}" alt="painting" loading="lazy">'
    else:
        img = f'<div class="noimg">{html.escape(outcome(row))}</div>'
    cls = "pass" if verdict == "pass" else "fail"
    return (
        f'<div class="card">{img}<div>{label}group {row["group_id"]} · v{row["policy_version"]} · '
        f'<b>{total_txt}</b></div><div class="{cls}">gate: {html.escape(verdict)}</div>'
        f"<div>{comps}</div><details><summary>code</summary><pre>{html.escape(row.get('code') or row.get('completion') or '')}</pre></details></div>"
    )


def _is_set(value) -> bool:
    """A parquet cell that holds a value (not None, not NaN)."""
    return value is not None and not (isinstance(value, float) and value != value)


def _strip(rows: list[dict], root: Path) -> str:
    """One multi-turn trajectory as a strip: painting, critique, revised painting, ... (rows of one
    ``trajectory_id``, any order)."""
    rows = sorted(rows, key=lambda r: int(r["turn"]))
    first = rows[0]
    reward = first.get("trajectory_reward")
    reward_txt = (f"{reward:.3f}" if _is_set(reward)
                  else "None (" + html.escape(str(first.get("trajectory_none_cause"))) + ")")
    parts = [f'<div class="head">trajectory {html.escape(str(first["trajectory_id"]))} · reward <b>{reward_txt}</b>'
             f' · {int(first.get("trajectory_turns") or len(rows))} turn(s), ended: '
             f'{html.escape(str(first.get("trajectory_stop")))}</div>']
    for row in rows:
        parts.append(_card(row, root, f"turn {int(row['turn'])} · "))
        critique, cause = row.get("critique"), row.get("critique_cause")
        if _is_set(cause):
            parts.append(f'<div class="critique fail"><span class="arrow">&rarr;</span> critic failed: '
                         f"{html.escape(str(cause))}</div>")
        elif _is_set(critique):
            done = " <b>(done)</b>" if row.get("critique_done") is True else ""
            parts.append(f'<div class="critique"><span class="arrow">&rarr;</span> critique{done}:<br>'
                         f"{html.escape(str(critique))}</div>")
    return f'<div class="strip">{"".join(parts)}</div>'


def _run_relative(png: str, root: Path) -> str:
    """A row's PNG path relative to the run directory ``root`` (resolved). ``rollouts.parquet`` holds
    the absolute paths the run wrote; a run directory copied or moved since (a cluster's run folder
    on a laptop) holds the same files under its own ``png/``, so a path outside ``root`` keeps its
    part from the last ``png`` folder on."""
    path = Path(png)
    if not path.is_absolute():
        return png
    try:
        return str(path.resolve().relative_to(root))
    except ValueError:
        parts = path.parts
        if "png" not in parts:
            return png
        return str(Path(*parts[len(parts) - 1 - parts[::-1].index("png"):]))


def write_gallery(root: Path, rows: list[dict], metrics: list[dict], name: str, *,
                  total_steps: int | None = None, running: bool = False, refresh_s: int = 15) -> Path:
    """Write ``gallery.html`` (newest step first), ``reward_curve.svg`` and ``gate_mix.svg`` into
    ``root``, each atomically.

    Args:
        root: the run directory; PNG paths in ``rows`` are linked relative to it.
        rows: ``rollouts.parquet`` rows so far.
        metrics: ``metrics.jsonl`` records so far.
        name: the run name (page title).
        total_steps: the run's planned steps, shown as progress.
        running: the run goes on; the page then reloads itself every ``refresh_s`` seconds.
        refresh_s: reload period of a running run's page, seconds (>= 1).

    Returns:
        The gallery path.
    """
    root = Path(root).resolve()
    atomic_write(root / "reward_curve.svg", reward_curve_svg(metrics))
    atomic_write(root / "gate_mix.svg", gate_mix_svg(rows))
    by_step: dict[int, list[dict]] = defaultdict(list)
    for row in rows:
        by_step[row["step"]].append(row)
    head = "".join(
        f"<tr><td>{m['step']}</td><td>{_num(m.get('reward/mean'), 3)}</td>"
        f"<td>{_num(m.get('gate/pass_rate'), 2)}</td><td>{m.get('samples/none', '')}</td>"
        f"<td>{_num(m.get('paint/subject_fidelity'), 2)}</td><td>{_num(m.get('paint/diversity'), 3)}</td>"
        f"<td>{m.get('paint/copies', '')}</td><td>{_num(m.get('time/step_s'), 1)}</td></tr>"
        for m in metrics[-10:][::-1]
    )
    sections = []
    for step in sorted(by_step, reverse=True):
        single = [r for r in by_step[step] if not _is_set(r.get("turn"))]
        trajectories: dict[str, list[dict]] = defaultdict(list)
        for r in by_step[step]:
            if _is_set(r.get("turn")):
                trajectories[str(r["trajectory_id"])].append(r)
        cards = "".join(_card(r, root) for r in single)
        strips = "".join(_strip(rs, root) for rs in trajectories.values())
        strips = f'<div class="strips">{strips}</div>' if strips else ""
        prompts = sorted({r["prompt"] for r in by_step[step]})
        mix = Counter(outcome(r) for r in by_step[step])
        mix_txt = " · ".join(f"{html.escape(k)} {v}" for k, v in mix.most_common())
        sections.append(
            f'<section class="step" id="step-{step}" data-step="{step}"><h2>step {step}</h2>'
            f'<div>{html.escape(" · ".join(prompts))}</div><div class="status">gate: {mix_txt}</div>'
            f'<div class="grid">{cards}</div>{strips}</section>'
        )
    latest = max(by_step) if by_step else (metrics[-1]["step"] if metrics else 0)
    of = f"/{total_steps}" if total_steps else ""
    state = "running" if running else "finished"
    refresh = f'<meta http-equiv="refresh" content="{max(int(refresh_s), 1)}">' if running else ""
    nav = "".join(f'<a href="#step-{s}">{s}</a>' for s in sorted(by_step, reverse=True)[:50])
    version = f"?v={latest}"  # a new URL per step, so a reload never shows a cached chart
    eval_link = ('<p><a href="eval.html">evaluation: base vs checkpoints on held-out prompts</a></p>'
                 if (root / "eval.html").exists() else "")
    page = (
        f"<!doctype html><html><head><meta charset='utf-8'>{refresh}"
        f"<link rel='icon' href='data:,'><title>brushrl · {html.escape(name)}</title>"
        f"<style>{_CSS}</style></head><body data-latest-step='{latest}' data-state='{state}'>"
        f"<h1>brushrl run: {html.escape(name)}</h1>{eval_link}"
        f'<div class="status" id="status">{state} · step {latest}{of} · updated '
        f'{time.strftime("%Y-%m-%d %H:%M:%S")}{" · reloads every " + str(max(int(refresh_s), 1)) + " s" if running else ""}</div>'
        f'<div class="charts"><img src="reward_curve.svg{version}" alt="reward curves per component">'
        f'<img src="gate_mix.svg{version}" alt="gate verdict mix by step"></div>'
        f'<table class="m"><tr><th>step</th><th>reward</th><th>gate pass</th><th>None</th>'
        f'<th title="share of passing paintings attributed to their own pool subject (docs/metrics.md)">subject</th>'
        f'<th title="mean within-group diversity of passing paintings, 0-1">diversity</th>'
        f'<th title="passing paintings flagged as pool copies">copies</th><th>s/step</th></tr>{head}</table>'
        f"<nav>steps: {nav}</nav>"
        f"{''.join(sections)}</body></html>"
    )
    atomic_write(root / "gallery.html", page)
    return root / "gallery.html"


def _num(value, digits: int) -> str:
    return "" if value is None else f"{float(value):.{digits}f}"
