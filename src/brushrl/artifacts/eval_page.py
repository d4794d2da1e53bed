"""``eval.html``: ``brushrl eval``'s table and its paintings side by side, one row per prompt and one
column per policy (the same prompt, render seed and sampler seed in every column). With
``brushrl eval --turns K`` each sample's turns follow one another (``t1``, ``t2``, ...) and the
turn table follows the policy table.

Above them, the subject strip (:func:`subject_strip`): one row per prompt, its subject as the row's
label, the base's and the final policy's first passing painting side by side as thumbnails (with
the dominant colour word the colour accuracy measured), so that one sees at a glance whether a
tulip, a lotus and a poppy differ; and what each split's prompts are (the table's ``splits:``).

Like ``gallery.html`` it has no scripts and escapes every string from the policy (sketch code is
untrusted text and is never executed here); ``gallery.html`` links to it.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

from brushrl.artifacts.eval_report import SPLIT_LABELS, SPLITS, table_lines, turn_table_lines
from brushrl.artifacts.gallery import line_chart_svg
from brushrl.artifacts.run_dir import atomic_write

#: The page's file name in the run directory.
EVAL_PAGE = "eval.html"
#: Thumbnail side of the subject strip, CSS pixels.
STRIP_PX = 120

_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;background:#faf7f2;color:#222}
h2{margin-top:1.6em;border-bottom:1px solid #ddd}
pre.t{background:#fff;border:1px solid #ddd;padding:8px;font-size:12px;overflow:auto}
table.side{border-collapse:collapse}
table.side td,table.side th{border:1px solid #ddd;padding:6px;vertical-align:top;background:#fff}
.cell{display:flex;flex-wrap:wrap;gap:6px}
.card{width:150px;font-size:11px}
.card img,.noimg{width:150px;height:150px;object-fit:contain;background:#eee;display:block}
.noimg{display:flex;align-items:center;justify-content:center;color:#a33}
.fail{color:#a33}.pass{color:#264}
pre.code{white-space:pre-wrap;max-height:200px;overflow:auto;background:#f4f4f4;font-size:9px}
table.strip{border-collapse:collapse}
table.strip td,table.strip th{border:1px solid #ddd;padding:4px;vertical-align:top;background:#fff;font-size:11px}
table.strip th.subject{text-align:left;min-width:10em}
.thumb{width:%(px)dpx;height:%(px)dpx;object-fit:contain;display:block;background:#eee}
.nopass{width:%(px)dpx;height:%(px)dpx;display:flex;align-items:center;justify-content:center;
background:#f3eeee;color:#a33}
""" % {"px": STRIP_PX}


def _card(row: dict) -> str:
    total = row.get("total")
    none = total is None or total != total
    score = f"None ({html.escape(str(row.get('none_cause')))})" if none else f"{float(total):.3f}"
    verdict = str(row.get("gate_verdict") or "")
    png = row.get("png")
    img = (f'<img src="{html.escape(str(png))}" alt="painting" loading="lazy">' if png
           else f'<div class="noimg">{html.escape(verdict)}</div>')
    cls = "pass" if verdict == "pass" else "fail"
    code = html.escape(str(row.get("code") or row.get("completion") or ""))
    turn = row.get("turn")
    label = "" if turn is None or turn != turn else f"t{int(turn)} "
    return (f'<div class="card">{img}{label}<b>{score}</b> <span class="{cls}">{html.escape(verdict)}</span>'
            f"<details><summary>code</summary><pre class='code'>{code}</pre></details></div>")


def _first_pass(rows: list[dict], policy: str, index: int) -> dict | None:
    """``policy``'s first passing painting of prompt ``index`` (lowest sample, first turn), or None."""
    def first_turn(r: dict) -> bool:
        turn = r.get("turn")
        return turn is None or turn != turn or int(turn) == 1  # NaN after a parquet round trip

    passing = [r for r in rows if r["policy"] == policy and r["prompt_index"] == index
               and r.get("gate_verdict") == "pass" and r.get("png") and first_turn(r)]
    return min(passing, key=lambda r: r["sample"], default=None)


def _measured_colours(report: dict) -> dict[str, tuple[str | None, bool | None]]:
    """PNG path -> (dominant colour word, whether it is the prompt's) from ``paintings``' colour accuracy."""
    out = {}
    for res in ((report.get("paintings") or {}).get("results") or {}).values():
        for split in res.values():
            for p in (split.get("colour_accuracy") or {}).get("paintings") or []:
                out[p["png"]] = (p.get("dominant"), p.get("correct"))
    return out


def subject_strip(report: dict, rows: list[dict]) -> str:
    """The subject strip's HTML (module docstring): one row per prompt of the report, a column for
    the first policy (the base) and one for the last (the final checkpoint), each cell the policy's
    first passing painting as a thumbnail, or 'no pass'."""
    policies = report["policies"]
    shown = [policies[0]] + ([policies[-1]] if len(policies) > 1 else [])
    colours = _measured_colours(report)
    body = []
    for p in report["prompts"]:
        cells = []
        for policy in shown:
            row = _first_pass(rows, policy, p["index"])
            if row is None:
                cells.append('<td><div class="nopass">no pass</div></td>')
                continue
            png = str(row["png"])
            dominant, correct = colours.get(png, (None, None))
            mark = "" if correct is None else (" ✓" if correct else " ✗")
            said = ("" if dominant is None and correct is None
                    else f" · {html.escape(str(dominant or 'no colour'))}{mark}")
            cells.append(f'<td><img class="thumb" src="{html.escape(png)}" alt="{html.escape(p["subject"])}" '
                         f'loading="lazy"><small>s{int(row["sample"])}{said}</small></td>')
        body.append(f'<tr><th class="subject">{html.escape(p["subject"])}<br><small>'
                    f'{html.escape(SPLIT_LABELS.get(p["split"], p["split"]))}</small></th>{"".join(cells)}</tr>')
    head = "".join(f"<th>{html.escape(p)}</th>" for p in shown)
    return ("<h2>Subject strip</h2><p>Each prompt's first passing painting (lowest sample) under the base and the "
            "final policy, with the dominant painted colour word the colour accuracy measured (✓: the prompt's).</p>"
            f"<table class='strip'><tr><th>prompt</th>{head}</tr>{''.join(body)}</table>")


#: The training curve's series: ``metrics.jsonl`` key -> label, colour.
CURVE = {"reward/mean": ("reward", "#222"), "gate/pass_rate": ("gate pass", "#888"),
         "paint/subject_fidelity": ("subject fidelity", "#84c"), "paint/diversity": ("diversity", "#2a8")}


def learning_curve(root: Path, window: int = 5) -> str:
    """The run's training curve from its ``metrics.jsonl``: per step, the mean over the last
    ``window`` steps of reward, gate pass rate, and the passing paintings' subject fidelity and
    diversity (``paint/*``, docs/metrics.md); "" without a metrics file. These are the training
    samples (one prompt a group, the prompts drawn by step), so the curve is noisy where the table
    above is paired: it shows the trend, the table the comparison."""
    path = root / "metrics.jsonl"
    if not path.exists():
        return ""
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    series = {}
    for key, (label, _) in CURVE.items():
        pts = [(m["step"], float(m[key])) for m in records if isinstance(m.get(key), (int, float))]
        series[label] = [(s, sum(v for _, v in pts[max(0, i - window + 1): i + 1]) / len(pts[max(0, i - window + 1): i + 1]))
                         for i, (s, _) in enumerate(pts)]
    if not any(series.values()):
        return ""
    svg = line_chart_svg(series, {label: colour for label, colour in CURVE.values()}, width=720)
    return (f"<h2>Training curve</h2><p>Training samples by step, mean of the last {window} steps "
            f"(<code>metrics.jsonl</code>); the table above compares checkpoints on fixed prompts.</p>{svg}")


def write_eval_page(root: str | Path, report: dict, rows: list[dict]) -> Path:
    """Write ``<root>/eval.html`` atomically from the report (``eval.json``) and the sample rows
    (PNG paths relative to ``root``); returns its path."""
    root = Path(root)
    policies = report["policies"]
    sections = []
    for split in SPLITS:
        prompts = [p for p in report["prompts"] if p["split"] == split]
        if not prompts:
            continue
        head = "".join(f"<th>{html.escape(p)}</th>" for p in policies)
        body = []
        for p in prompts:
            cells = []
            for policy in policies:
                mine = sorted((r for r in rows if r["policy"] == policy and r["prompt_index"] == p["index"]),
                              key=lambda r: (r["sample"], r.get("turn") or 0))
                cells.append(f'<td><div class="cell">{"".join(_card(r) for r in mine)}</div></td>')
            body.append(f"<tr><th>{html.escape(p['subject'])}<br><small>render seed {p['render_seed']}</small></th>"
                        f"{''.join(cells)}</tr>")
        sections.append(f"<h2>{SPLIT_LABELS[split]} prompts</h2><table class='side'><tr><th>prompt</th>{head}</tr>"
                        f"{''.join(body)}</table>")
    lines = table_lines(report) + (["", *turn_table_lines(report)] if "turns" in report else [])
    table = html.escape("\n".join(lines))
    page = (f"<!doctype html><html><head><meta charset='utf-8'><link rel='icon' href='data:,'>"
            f"<title>brushrl eval · {html.escape(root.name)}</title><style>{_CSS}</style></head><body>"
            f"<h1>brushrl eval: {html.escape(root.name)}</h1><p><a href='gallery.html'>training gallery</a> · "
            f"{report['samples_per_prompt']} samples a prompt, fixed render and sampler seeds, 95% bootstrap "
            f"intervals</p><pre class='t'>{table}</pre>{learning_curve(root)}{subject_strip(report, rows)}"
            f"{''.join(sections)}</body></html>")
    atomic_write(root / EVAL_PAGE, page)
    return root / EVAL_PAGE
