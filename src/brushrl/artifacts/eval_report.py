"""``eval/eval.json``: what ``brushrl eval`` measured, its side-by-side table and the summary's headline.

Per policy and split (``held_out``, ``training``, ``unseen``; :data:`SPLIT_NOTES` says what each
holds), over the completions with a reward (None: infrastructure, excluded and counted by cause):

* ``reward``: mean total reward (a gate failure counts 0), with a 95% interval;
* ``gate_pass``: share of completions that pass the gate, with a 95% interval, and the failures
  by reason code;
* ``reward_passing``: mean total reward of the completions that passed the gate (q), with a 95%
  interval;
* ``components``: each reward component's mean over the completions that passed the gate (the
  judge's is its win-rate against the reference pool, both orders), with 95% intervals;
* per policy after the first, ``vs_<first>``: the difference of its mean reward and gate pass
  rate from the first policy's (the base), with a 95% interval, and ``improved``: the interval of
  the reward difference lies above 0 (None for the ``unseen`` split: its difference is shown, not
  judged, it has no target). Differences are paired: completion ``sample`` of a prompt
  is drawn with the same sampler seed and rendered with the same render seed under every policy
  (common random numbers, ``orchestrator/evaluate.py``), so the difference is taken per
  (prompt, sample) over the pairs where both have a reward (``n``), and only the policy varies
  between the two halves of a pair. On the demo's seeds the two halves correlate (r 0.38-0.47 on
  held-out prompts, docs/perf/demo_seeds_41929a2.json), so the paired interval is the narrower honest one.
  Over the same pairs, ``reward_both_pass``: the paired difference of reward over the pairs where
  both halves pass the gate (a better painting of the same prompt and seeds), and
  ``decomposition`` (:func:`decompose`): the reward difference split exactly into ``fewer_failures``
  (``Δp · q̄``) and ``better_paintings`` (``p̄ · Δq``), p the gate pass rate and q the mean reward of
  the passing paintings of each policy (docs/reward.md, "Fewer failures or better paintings").

``paintings`` (:func:`painting_report`, added by ``brushrl eval`` when the run's reference pool
loads): per policy and split, over the paintings that passed the gate, subject fidelity (share
attributed to their own pool subject, with chance ``1 / subjects``), within-prompt diversity and
the distance to the nearest pool image with the copies flagged
(:mod:`brushrl.reward.painting_metrics`); and, pool or not, ``colour_accuracy``
(:func:`colour_accuracy`): the share of passing paintings whose dominant painted colour is the
colour word of their prompt, among the words the split's prompts use, with its chance.

Intervals are stratified bootstrap percentile intervals (``brushrl.stats.bootstrap_means``,
``eval.bootstrap`` resamples, each prompt resampled within itself, seeded by ``eval.seed``).

Multi-turn evaluation (``brushrl eval --turns K``) adds ``turns`` (:func:`turn_report`): per policy
and split, each turn's reward and gate pass (the painting a trajectory holds after k turns) and the
difference of turn k from turn 1 paired by trajectory, with 95% intervals.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np

from brushrl.stats import bootstrap_indices, bootstrap_means, percentile_interval

#: Folder of a run directory that ``brushrl eval`` writes into, and its report file.
EVAL_DIR = "eval"
EVAL_JSON = "eval.json"
#: The prompt splits, in report order: subjects RL never trained on, the training subjects, then
#: colour x species pairs neither the SFT corpus nor RL painted (``eval.unseen_subjects``).
SPLITS = ("held_out", "training", "unseen")
#: The splits whose difference from the base is judged (``improved``); ``unseen`` has no target.
JUDGED = ("held_out", "training")
#: How each split is named in tables.
SPLIT_LABELS = {"held_out": "held-out", "training": "training", "unseen": "unseen"}
#: What each split's prompts have been through, said under the table and on ``eval.html``.
SPLIT_NOTES = {
    "held_out": "held-out: eval.subjects, never RL's prompts; the tiny policy's SFT corpus does paint them "
                "(held out from RL only)",
    "training": "training: prompts.subjects, RL's own prompts",
    "unseen": "unseen: eval.unseen_subjects, colour x species pairs that neither the SFT corpus nor RL "
              "painted (each word known, the pair new); no target: its difference is shown, not judged",
}


def _is_none(value) -> bool:
    return value is None or value != value  # None in memory, NaN after a parquet round trip


def _estimate(values: list[float], strata: list, n_boot: int, seed: int) -> dict:
    """``{"mean", "lo", "hi", "n"}`` of ``values`` (means None for no values)."""
    if not values:
        return {"mean": None, "lo": None, "hi": None, "n": 0}
    lo, hi = percentile_interval(bootstrap_means(values, strata, n_boot, seed))
    return {"mean": sum(values) / len(values), "lo": lo, "hi": hi, "n": len(values)}


#: The None cause of a weighted ``subject`` on a prompt that names no pool subject (every unseen
#: prompt; ``painting_metrics.subject_values``): the painting keeps its gate verdict, only its
#: reward is undefined.
UNKNOWN_SUBJECT = "subject:unknown_subject"


def _unknown_subject(row: dict) -> bool:
    return _is_none(row["total"]) and row.get("none_cause") == UNKNOWN_SUBJECT


def _verdict_rows(rows: list[dict]) -> list[dict]:
    """The rows whose gate verdict counts: those with a reward, and those whose reward is None only
    because of :data:`UNKNOWN_SUBJECT` (copied with total 0.0, which only a gate pass rate reads)."""
    return [dict(r, total=0.0) if _unknown_subject(r) else r for r in rows
            if not _is_none(r["total"]) or _unknown_subject(r)]


def _split_stats(rows: list[dict], components: list[str], n_boot: int, seed: int) -> dict:
    """One policy's numbers on one split (module docstring). With a weighted ``subject`` every
    passing painting of a prompt naming no pool subject (the unseen split's) has reward None
    (``unknown_subject``, counted): the gate pass rate still counts their verdicts, but the reward
    of such a split is undefined (None: its mean would be over the gate failures alone)."""
    valid = [r for r in rows if not _is_none(r["total"])]
    judged = _verdict_rows(rows)
    unknown = sum(_unknown_subject(r) for r in rows)
    strata = [r["prompt"] for r in valid]
    passed = [r for r in valid if r["gate_verdict"] == "pass"]
    comps = {}
    for name in components:
        vals = [(float(r[f"reward_{name}"]), r["prompt"]) for r in passed if not _is_none(r.get(f"reward_{name}"))]
        comps[name] = _estimate([v for v, _ in vals], [p for _, p in vals], n_boot, seed)
    undefined = _estimate([], [], n_boot, seed)
    return {
        "completions": len(rows),
        "prompts": len({r["prompt"] for r in rows}),
        "none": dict(Counter(r.get("none_cause") or "unknown" for r in rows if _is_none(r["total"]))),
        "unknown_subject": unknown,
        "reward": undefined if unknown else _estimate([float(r["total"]) for r in valid], strata, n_boot, seed),
        "gate_pass": _estimate([_passed(r) for r in judged], [r["prompt"] for r in judged], n_boot, seed),
        "reward_passing": undefined if unknown else _estimate(
            [float(r["total"]) for r in passed], [r["prompt"] for r in passed], n_boot, seed),
        "gate_failures": dict(Counter(r["gate_verdict"] for r in judged if r["gate_verdict"] != "pass").most_common()),
        "components": comps,
    }


def build_report(rows: list[dict], policies: list[str], cfg, prompts, wall_s: float | None = None) -> dict:
    """The ``eval.json`` record (module docstring) of ``brushrl eval``'s sample rows.

    Args:
        rows: one per completion: ``policy``, ``split``, ``prompt``, ``gate_verdict``, ``total``,
            ``none_cause``, ``reward_<component>``, ``png``.
        policies: policy names in table order (the first is the reference of the differences).
        cfg: the evaluation's config (``eval``, ``reward.weights``, ``rollout``).
        prompts: the :class:`~brushrl.orchestrator.evaluate.EvalPrompt` set.
        wall_s: wall seconds of the evaluation, recorded.
    """
    n_boot, seed = cfg.eval.bootstrap, cfg.eval.seed
    components = [c for c in cfg.reward.weights if c != "gate" and cfg.reward.weights[c]]
    report = {
        "policies": policies,
        "splits": {s: [p.subject for p in prompts if p.split == s] for s in SPLITS},
        "split_notes": {s: SPLIT_NOTES[s] for s in SPLITS if any(p.split == s for p in prompts)},
        "prompts": [{"index": p.index, "split": p.split, "subject": p.subject, "render_seed": p.render_seed,
                     "gen_seed": p.gen_seed} for p in prompts],
        "samples_per_prompt": cfg.eval.samples_per_prompt,
        "eval": cfg.eval.model_dump(mode="json"),
        "reward_weights": dict(cfg.reward.weights),
        "sampling": {"temperature": cfg.rollout.temperature, "top_p": cfg.rollout.top_p, "top_k": cfg.rollout.top_k,
                     "max_new_tokens": cfg.rollout.max_new_tokens},
        "wall_s": wall_s,
        "results": {},
    }
    for policy in policies:
        mine = [r for r in rows if r["policy"] == policy]
        report["results"][policy] = {s: _split_stats([r for r in mine if r["split"] == s], components, n_boot, seed)
                                     for s in SPLITS if any(r["split"] == s for r in mine)}
    base = policies[0]
    for policy in policies[1:]:
        vs = {}
        for split in report["results"][policy]:
            def of(name: str) -> list[dict]:
                return [r for r in rows if r["policy"] == name and r["split"] == split]

            a, b = of(base), of(policy)
            gate = _paired(_verdict_rows(a), _verdict_rows(b), _passed, _sample_key, n_boot, seed)
            if any(_unknown_subject(r) for r in a + b):
                a = b = []  # the reward is undefined there (_split_stats): no reward difference either
            reward = _paired(a, b, _reward, _sample_key, n_boot, seed)
            vs[split] = {"reward": reward, "gate_pass": gate,
                         "reward_both_pass": _paired(a, b, _reward, _sample_key, n_boot, seed, both_pass=True),
                         "decomposition": paired_decomposition(a, b, _sample_key, n_boot, seed),
                         "improved": (reward["lo"] is not None and reward["lo"] > 0) if split in JUDGED else None}
        report["results"][policy][f"vs_{base}"] = vs
    return report


def _ci(e: dict, pct: bool = False) -> str:
    if e.get("mean") is None:
        return "-"
    if pct:
        return f"{e['mean']:.0%} [{e['lo']:.0%}, {e['hi']:.0%}]"
    return f"{e['mean']:.3f} [{e['lo']:.3f}, {e['hi']:.3f}]"


def _diff(e: dict, pct: bool = False) -> str:
    if e.get("diff") is None:
        return "-"
    if pct:
        return f"{e['diff'] * 100:+.0f} pts [{e['lo'] * 100:+.0f}, {e['hi'] * 100:+.0f}]"
    return f"{e['diff']:+.3f} [{e['lo']:+.3f}, {e['hi']:+.3f}]"


def split_colour_words(rows: list[dict]) -> dict[str, list[str]]:
    """Per split, the colour words its prompts use (``brushrl.corpus.colours.colour_word`` of each
    row's ``subject``, every policy's rows): the candidate words of its colour accuracy."""
    from brushrl.corpus.colours import colour_word

    words: dict[str, set[str]] = {}
    for r in rows:
        word = colour_word(str(r.get("subject") or ""))
        words.setdefault(r["split"], set())
        if word is not None:
            words[r["split"]].add(word)
    return {split: sorted(ws) for split, ws in words.items()}


def colour_accuracy(paintings: list, rows: list[dict], words: list[str], n_boot: int, seed: int) -> dict:
    """One policy's colour accuracy on one split (docs/reward.md, "Colour accuracy"): the share of its passing
    paintings whose dominant painted colour (``painting_metrics.ColourWords`` among ``words``) is
    their prompt's colour word, with a stratified (by prompt) bootstrap 95% interval.

    Args:
        paintings: ``painting_metrics.Painting`` s, one per row of ``rows`` (same order).
        rows: their ``samples.parquet`` rows (``prompt``, ``prompt_index``, ``sample``, ``png``).
        words: the candidate words (:func:`split_colour_words`); none: nothing is measured.

    Returns:
        ``{"value", "interval": [lo, hi], "n" (paintings measured: their prompt names a candidate
        word), "chance_uniform" (1/K), "chance_prompt_blind" (the largest share of one word among
        the measured paintings' prompts: what always painting that word, ``prompt_blind_word``,
        scores), "words", "no_colour_word" (passing paintings whose prompt names no colour word:
        not measured), "no_paint" (measured paintings with no pixel of any candidate: counted
        wrong), "dominant": {word: n}, "paintings": [{"png", "prompt_index", "sample", "word",
        "dominant", "correct"}]}``; value and interval None when nothing is measured.
    """
    from brushrl.reward.painting_metrics import colour_chance, colour_results

    results = colour_results(paintings, words) if words else [
        {"word": None, "dominant": None, "correct": None} for _ in paintings]
    measured = [(r, x) for r, x in zip(rows, results) if x["correct"] is not None]
    est = _estimate([float(x["correct"]) for _, x in measured], [r["prompt"] for r, _ in measured], n_boot, seed)
    chance = colour_chance([x["word"] for _, x in measured], words)
    return {"value": est["mean"], "interval": None if est["mean"] is None else [est["lo"], est["hi"]],
            "n": est["n"], "chance_uniform": chance["uniform"], "chance_prompt_blind": chance["prompt_blind"],
            "prompt_blind_word": chance["prompt_blind_word"], "words": list(words),
            "no_colour_word": len(results) - len(measured),
            "no_paint": sum(x["dominant"] is None for _, x in measured),
            "dominant": dict(Counter(str(x["dominant"]) for _, x in measured).most_common()),
            "paintings": [{"png": str(r["png"]), "prompt_index": _int(r.get("prompt_index")),
                           "sample": _int(r.get("sample")), **x} for r, x in zip(rows, results)]}


def _int(value) -> int | None:
    return None if _is_none(value) else int(value)


def painting_report(rows: list[dict], policies: list[str], cfg, root: str | Path) -> dict:
    """``eval.json``'s ``paintings``: subject fidelity, within-prompt diversity and copying
    (:mod:`brushrl.reward.painting_metrics`) of each policy's passing paintings per split, and
    their colour accuracy (:func:`colour_accuracy`).

    Args:
        rows: ``samples.parquet`` rows (``policy``, ``split``, ``prompt``, ``subject``,
            ``gate_verdict``, ``png`` relative to ``root``); a passing row's reward may be None (its
            painting is still measured).
        policies: policy names.
        cfg: the evaluation's config (``reward.pool``: path, tiers, ``copy_min_corr``; ``eval``).
        root: the run directory.

    Returns:
        ``{"pool", "subjects", "chance", "copy_min_corr", "results": {policy: {split: {"paintings",
        "missing_png", "fidelity" (estimate, mean a share; ``unknown_subject``: paintings whose
        subject the pool lacks, left out: every painting of the unseen split), "diversity"
        (estimate over prompts with two or more passing paintings), "copy_distance" (estimate, and
        ``min``), "copies", "colour_accuracy"}}}}``. When the pool does not load: ``{"skipped":
        why, "results"}`` with only ``paintings``, ``missing_png`` and ``colour_accuracy`` (which
        needs no pool); the rest of the report stands.
    """
    from brushrl.pool.store import PoolError
    from brushrl.reward.painting_metrics import Painting, PoolSubjects, measure

    pool_cfg, n_boot, seed = cfg.reward.pool, cfg.eval.bootstrap, cfg.eval.seed
    try:
        pool = PoolSubjects.from_config(pool_cfg)
        out: dict = {"pool": pool_cfg.path, "subjects": len(pool.subjects), "chance": 1 / len(pool.subjects),
                     "copy_min_corr": pool.copy_min_corr}
    except (PoolError, ValueError, OSError) as e:
        pool, out = None, {"skipped": f"reference pool {pool_cfg.path}: {e}"}
    words = split_colour_words(rows)
    out["results"] = {}
    for policy in policies:
        res = {}
        for split in SPLITS:
            passed = [r for r in rows if r["policy"] == policy and r["split"] == split and r["gate_verdict"] == "pass"]
            if not any(r["policy"] == policy and r["split"] == split for r in rows):
                continue
            found = [r for r in passed if r.get("png") and (Path(root) / str(r["png"])).is_file()]
            paintings = [Painting(r["subject"], (Path(root) / str(r["png"])).read_bytes(), r["prompt"]) for r in found]
            entry: dict = {"paintings": len(found), "missing_png": len(passed) - len(found)}
            if pool is not None:
                m = measure(pool, paintings)
                known = [(float(c), r["prompt"]) for c, r in zip(m["correct"], found) if c is not None]
                div = [d for d in m["diversity"].values() if d is not None]
                strata = [r["prompt"] for r in found]
                entry |= {
                    "fidelity": {**_estimate([c for c, _ in known], [p for _, p in known], n_boot, seed),
                                 "unknown_subject": len(found) - len(known)},
                    "diversity": _estimate(div, None, n_boot, seed),
                    "copy_distance": {**_estimate(m["copy_distance"], strata, n_boot, seed),
                                      "min": min(m["copy_distance"], default=None)},
                    "copies": sum(m["copy"]),
                }
            entry["colour_accuracy"] = colour_accuracy(paintings, found, words.get(split, []), n_boot, seed)
            res[split] = entry
        out["results"][policy] = res
    return out


def _colour_cell(acc: dict | None) -> str:
    """A policy's colour accuracy in the table: ``67% [50%, 83%] (n 12, blind 50%)``."""
    if not acc or acc.get("value") is None:
        return "-"
    lo, hi = acc["interval"]
    return f"{acc['value']:.0%} [{lo:.0%}, {hi:.0%}] (n {acc['n']}, blind {acc['chance_prompt_blind']:.0%})"


def _painting_rows(report: dict, split: str, policies: list[str], n_diffs: int) -> list[list[str]]:
    """The table's rows of ``report["paintings"]`` for ``split`` (none when absent; only colour
    accuracy when the pool was skipped)."""
    paint = report.get("paintings") or {}
    if "results" not in paint:
        return []
    res = {p: paint["results"].get(p, {}).get(split) for p in policies}
    if not any(res.values()):
        return []

    def cell(p: str, show) -> str:
        return show(res[p]) if res[p] else "-"

    blank = [""] * n_diffs
    rows = []
    if "skipped" not in paint:
        rows += [
            ["", f"subject fidelity (passes; chance {paint['chance']:.0%})",
             *(cell(p, lambda r: _ci(r["fidelity"], True)) for p in policies), *blank],
            ["", "diversity within prompt", *(cell(p, lambda r: _ci(r["diversity"])) for p in policies), *blank],
            ["", f"copy distance (copies: c >= {paint['copy_min_corr']})",
             *(cell(p, lambda r: f"{_ci(r['copy_distance'])}; {r['copies']} of {r['paintings']}") for p in policies),
             *blank],
        ]
    acc = next((r["colour_accuracy"] for r in res.values() if r and r.get("colour_accuracy")), None)
    if acc and acc.get("words"):
        label = f"colour accuracy (passes; {len(acc['words'])} words, chance {acc['chance_uniform']:.0%})"
        rows.append(["", label, *(cell(p, lambda r: _colour_cell(r.get("colour_accuracy"))) for p in policies), *blank])
    return rows


def table_lines(report: dict) -> list[str]:
    """The side-by-side table: per split, reward, gate pass and each component for every policy,
    and each later policy's difference from the first (95% intervals in brackets); then what each
    split's prompts are (``split_notes``; the unseen split's difference is not judged)."""
    policies, base = report["policies"], report["policies"][0]
    diffs = [f"{p} - {base}" for p in policies[1:]]
    head = ["split", "metric", *policies, *diffs]
    body = []
    for split in SPLITS:
        res = {p: report["results"][p].get(split) for p in policies}
        if not any(res.values()):
            continue
        first = next(r for r in res.values() if r)
        label = (f"{SPLIT_LABELS[split]} ({first['prompts']}x{report['samples_per_prompt']}"
                 f"{'' if split in JUDGED else ', no target'})")
        vs = [report["results"][p][f"vs_{base}"].get(split, {}) for p in policies[1:]]
        body.append([label, "reward", *(_ci(res[p]["reward"]) if res[p] else "-" for p in policies),
                     *(_diff(v.get("reward", {})) for v in vs)])
        body.append(["", "gate pass", *(_ci(res[p]["gate_pass"], True) if res[p] else "-" for p in policies),
                     *(_diff(v.get("gate_pass", {}), True) for v in vs)])
        body.extend(_gain_rows(res, policies, vs))
        for name in first["components"]:
            shown = "judge win-rate" if name == "judge" else name
            body.append(["", f"{shown} (passes)", *(_ci(res[p]["components"][name]) if res[p] else "-" for p in policies),
                         *([""] * len(diffs))])
        body.extend(_painting_rows(report, split, policies, len(diffs)))
        fails = ["; ".join(f"{k} {v}" for k, v in res[p]["gate_failures"].items()) or "none" if res[p] else "-"
                 for p in policies]
        body.append(["", "gate failures", *fails, *([""] * len(diffs))])
        nones = [", ".join(f"{k} {v}" for k, v in res[p]["none"].items()) or "0" if res[p] else "-" for p in policies]
        if any(n not in ("0", "-") for n in nones):
            body.append(["", "None (excluded)", *nones, *([""] * len(diffs))])
    widths = [max(len(str(row[i])) for row in [head, *body]) for i in range(len(head))]
    fmt = lambda row: "  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip()  # noqa: E731
    notes = [f"  {note}" for split, note in (report.get("split_notes") or {}).items()
             if any(report["results"][p].get(split) for p in policies)]
    return [fmt(head), *(fmt(row) for row in body), *(["splits:", *notes] if notes else [])]


def _gain_rows(res: dict, policies: list[str], vs: list[dict]) -> list[list[str]]:
    """The table's rows that say where a reward difference comes from: each policy's reward among
    its passing paintings and the paired difference where both pass, then the difference's two
    parts (:func:`decompose`). Reports written before these existed show "-"."""
    blank = [""] * len(policies)
    parts = [v.get("decomposition") or {} for v in vs]
    return [
        ["", "reward (passes)", *(_ci(res[p].get("reward_passing", {})) if res[p] else "-" for p in policies),
         *(_diff(v.get("reward_both_pass", {})) + " both pass" if v.get("reward_both_pass") else "-" for v in vs)],
        ["", "  from fewer failures", *blank, *(_diff(d.get("fewer_failures", {})) for d in parts)],
        ["", "  from better paintings", *blank, *(_diff(d.get("better_paintings", {})) for d in parts)],
    ]


def headline_lines(report: dict) -> list[str]:
    """At most two lines for the run summary: per judged split (:data:`JUDGED`), the first and last
    policy's mean reward (95% intervals), the difference and whether it clears its interval, the
    gate pass rates, and the difference's two parts (fewer failures, better paintings;
    :func:`decompose`) with their intervals when the report has them."""
    policies = report["policies"]
    first, last = policies[0], policies[-1]
    out = []
    for split in JUDGED:  # the unseen split has no target: the table shows it
        a, b = report["results"][first].get(split), report["results"][last].get(split)
        if not a or not b:
            continue
        line = (f"eval {SPLIT_LABELS[split]} ({a['prompts']}x{report['samples_per_prompt']}): reward {first} "
                f"{_ci(a['reward'])}, {last} {_ci(b['reward'])}")
        if last != first:
            vs = report["results"][last][f"vs_{first}"][split]
            verdict = "above its 95% CI" if vs["improved"] else "within its 95% CI"
            line += f", {_diff(vs['reward'])} ({verdict})"
        gate = f"{a['gate_pass']['mean']:.0%}" + (f" -> {b['gate_pass']['mean']:.0%}" if last != first else "")
        line += f"; gate pass {gate}"
        parts = report["results"][last][f"vs_{first}"][split].get("decomposition") if last != first else None
        if parts:
            line += (f"; of the difference, fewer failures {_diff(parts['fewer_failures'])}, better paintings "
                     f"{_diff(parts['better_paintings'])}")
        out.append(line)
    return out


def turn_views(rows: list[dict], turns: int) -> dict[int, list[dict]]:
    """The painting each trajectory holds after k = 1..``turns`` turns, as rows.

    A trajectory that stopped because the critic said done (``trajectory_stop == "done"``) keeps its
    last painting for the later turns; one whose reward is None (``none``) has, for the turns it did
    not reach, a row with ``total`` None and ``none_cause`` its trajectory's cause (excluded, never
    0). Rows without ``turn`` (a single-turn evaluation) are turn 1.

    Args:
        rows: ``samples.parquet`` rows of ``brushrl eval --turns`` (``trajectory_id``, ``turn``,
            ``trajectory_stop``, ``trajectory_none_cause``, ``policy``, ...).
        turns: K.

    Returns:
        ``{k: rows}``, each row a copy with ``eval_turn`` k, trajectories in the order first seen.
    """
    by_traj: dict[tuple, list[dict]] = {}
    for r in rows:
        if _is_none(r.get("turn")):
            by_traj[(r["policy"], r["prompt"], "single", r.get("sample"), id(r))] = [r]
        else:
            by_traj.setdefault((r["policy"], r["prompt"], str(r["trajectory_id"])), []).append(r)
    out: dict[int, list[dict]] = {k: [] for k in range(1, turns + 1)}
    for traj in by_traj.values():
        traj = sorted(traj, key=lambda r: 1 if _is_none(r.get("turn")) else int(r["turn"]))
        for k in range(1, turns + 1):
            if k <= len(traj):
                row = dict(traj[k - 1])
            elif traj[-1].get("trajectory_stop") == "none":
                row = dict(traj[-1], total=None, none_cause=traj[-1].get("trajectory_none_cause"))
            else:
                row = dict(traj[-1])
            row["eval_turn"] = k
            row["eval_key"] = id(traj[0])
            out[k].append(row)
    return out


def _reward(row: dict) -> float:
    return float(row["total"])


def _passed(row: dict) -> float:
    return float(row["gate_verdict"] == "pass")


def _sample_key(row: dict) -> tuple:
    """A completion's place in the evaluation: the same under every policy (same seeds)."""
    return row["prompt"], row["sample"]


def _trajectory_key(row: dict):
    return row["eval_key"]


def _pairs(first: list[dict], later: list[dict], key, both_pass: bool = False) -> list[tuple[dict, dict]]:
    """``(row of first, row of later)`` with the same ``key``, both with a reward (a None in either
    drops the pair; with ``both_pass`` a gate failure in either too), in ``later``'s order."""
    a = {key(r): r for r in first if not _is_none(r["total"])}
    pairs = [(a[key(r)], r) for r in later if not _is_none(r["total"]) and key(r) in a]
    return [(x, y) for x, y in pairs if _passed(x) and _passed(y)] if both_pass else pairs


def _paired(first: list[dict], later: list[dict], value, key, n_boot: int, seed: int,
            both_pass: bool = False) -> dict:
    """Mean of ``value(later) - value(first)`` over the rows of ``later`` whose ``key`` matches a
    row of ``first``, both with a reward (a None in either drops the pair; with ``both_pass`` only
    the pairs where both pass the gate), with a stratified (by prompt) bootstrap 95% interval of
    those differences; ``{"diff", "lo", "hi", "n"}``."""
    pairs = [(value(y) - value(x), y["prompt"]) for x, y in _pairs(first, later, key, both_pass)]
    if not pairs:
        return {"diff": None, "lo": None, "hi": None, "n": 0}
    d = [x for x, _ in pairs]
    lo, hi = percentile_interval(bootstrap_means(d, [p for _, p in pairs], n_boot, seed))
    return {"diff": sum(d) / len(d), "lo": lo, "hi": hi, "n": len(d)}


def decompose(pass_a: np.ndarray, total_a: np.ndarray, pass_b: np.ndarray, total_b: np.ndarray) -> dict:
    """Split the change of mean reward from policy a to policy b into fewer failures and better
    paintings (docs/reward.md, "Fewer failures or better paintings").

    With p the gate pass rate and q the mean reward of the passing paintings (a gate failure's
    reward is 0, so the mean reward is ``p q``), ``Δ(pq) = Δp · q̄ + p̄ · Δq`` exactly, with
    ``p̄ = (p_a + p_b) / 2`` and ``q̄ = (q_a + q_b) / 2``: the symmetric (Shapley value of the two
    factors; the two-fold Oaxaca-Blinder split with averaged weights) decomposition of a product's
    change, which, unlike either one-sided split, does not depend on which policy is the reference.

    Args:
        pass_a, pass_b: float ``[..., n]``, 1.0 where the painting passed the gate, else 0.0.
        total_a, total_b: float ``[..., n]``, the rewards (0.0 for a failure). Leading axes (e.g.
            bootstrap resamples) are kept.

    Returns:
        float64 arrays of the leading shape: ``total`` (``p_b q_b - p_a q_a``: the mean reward
        difference), ``fewer_failures``, ``better_paintings`` (NaN where a policy has no passing
        painting: q is then undefined), ``p_a``, ``p_b``, ``q_a``, ``q_b`` (q NaN likewise).
    """
    p_a, p_b = pass_a.mean(axis=-1), pass_b.mean(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        q_a = (total_a * pass_a).sum(axis=-1) / pass_a.sum(axis=-1)
        q_b = (total_b * pass_b).sum(axis=-1) / pass_b.sum(axis=-1)
    return {"total": total_b.mean(axis=-1) - total_a.mean(axis=-1),
            "fewer_failures": (p_b - p_a) * (q_a + q_b) / 2, "better_paintings": (p_a + p_b) / 2 * (q_b - q_a),
            "p_a": p_a, "p_b": p_b, "q_a": q_a, "q_b": q_b}


def _interval(point: float, boot: np.ndarray) -> dict:
    """``{"diff", "lo", "hi"}`` of a point estimate and its resampled values (NaN resamples, where
    the statistic is undefined, left out; all None when the estimate itself is undefined)."""
    defined = boot[~np.isnan(boot)]
    if point != point or not len(defined):
        return {"diff": None, "lo": None, "hi": None}
    lo, hi = percentile_interval(defined)
    return {"diff": float(point), "lo": lo, "hi": hi}


def paired_decomposition(first: list[dict], later: list[dict], key, n_boot: int, seed: int) -> dict:
    """:func:`decompose` over the pairs of ``first`` (the base) and ``later`` (same ``key``, both
    with a reward), each part with a 95% interval from the pairs resampled by prompt
    (:func:`brushrl.stats.bootstrap_indices`, the resamples of the reward difference's interval),
    the decomposition recomputed in each resample.

    Returns:
        ``{"n", "total", "fewer_failures", "better_paintings"}`` (each ``{"diff", "lo", "hi"}``;
        the parts None when either policy has no passing painting among the pairs), ``base`` and
        ``final`` (``{"gate_pass", "reward_passing"}``: p and q over the pairs) and
        ``undefined_resamples`` (resamples in which a policy had no pass, left out of the parts'
        intervals).
    """
    pairs = _pairs(first, later, key)
    none = {"diff": None, "lo": None, "hi": None}
    if not pairs:
        return {"n": 0, "total": none, "fewer_failures": none, "better_paintings": none,
                "base": None, "final": None, "undefined_resamples": 0}
    cols = [np.array([f(r) for r in side]) for side in zip(*pairs) for f in (_passed, _reward)]
    point = decompose(*cols)
    idx = bootstrap_indices([y["prompt"] for _, y in pairs], len(pairs), n_boot, seed)
    boot = decompose(*(c[idx] for c in cols))

    def q(v) -> float | None:
        return None if v != v else float(v)

    return {"n": len(pairs), **{k: _interval(point[k], boot[k]) for k in ("total", "fewer_failures", "better_paintings")},
            "base": {"gate_pass": float(point["p_a"]), "reward_passing": q(point["q_a"])},
            "final": {"gate_pass": float(point["p_b"]), "reward_passing": q(point["q_b"])},
            "undefined_resamples": int(np.isnan(boot["better_paintings"]).sum())}


def turn_report(rows: list[dict], policies: list[str], cfg, turns: int) -> dict:
    """``eval.json``'s ``turns``: ``{"turns": K, "results": {policy: {split: {...}}}}`` where each
    split has ``by_turn`` (``{k: {"reward", "gate_pass"}}`` estimates over :func:`turn_views`),
    ``vs_turn1`` (``{k: {"reward", "gate_pass", "improved"}}`` for k > 1: paired differences, and
    whether both intervals lie above 0), ``improved_share`` (trajectories whose turn-K reward beats
    their turn-1 reward, among those valid at both), ``stops`` (why trajectories ended) and
    ``revised`` (``n`` trajectories that reached turn K with a reward, and their turn-K gate pass:
    what the revisions did, apart from the paintings a trajectory kept by stopping early)."""
    n_boot, seed = cfg.eval.bootstrap, cfg.eval.seed
    views = turn_views(rows, turns)
    out: dict = {"turns": turns, "results": {}}
    for policy in policies:
        res = {}
        for split in SPLITS:
            mine = {k: [r for r in v if r["policy"] == policy and r["split"] == split] for k, v in views.items()}
            if not mine[1]:
                continue
            by_turn = {}
            for k, rs in mine.items():
                valid = [r for r in rs if not _is_none(r["total"])]
                strata = [r["prompt"] for r in valid]
                by_turn[k] = {"reward": _estimate([_reward(r) for r in valid], strata, n_boot, seed),
                              "gate_pass": _estimate([_passed(r) for r in valid], strata, n_boot, seed),
                              "none": dict(Counter(r.get("none_cause") or "unknown" for r in rs
                                                   if _is_none(r["total"])))}
            vs = {}
            for k in range(2, turns + 1):
                dr = _paired(mine[1], mine[k], _reward, _trajectory_key, n_boot, seed)
                dg = _paired(mine[1], mine[k], _passed, _trajectory_key, n_boot, seed)
                vs[k] = {"reward": dr, "gate_pass": dg,
                         "improved": dr["lo"] is not None and dr["lo"] > 0 and dg["lo"] is not None and dg["lo"] > 0}
            last = _paired(mine[1], mine[turns], _reward, _trajectory_key, n_boot, seed)
            first = {r["eval_key"]: r for r in mine[1] if not _is_none(r["total"])}
            better = [_reward(r) > _reward(first[r["eval_key"]]) for r in mine[turns]
                      if not _is_none(r["total"]) and r["eval_key"] in first]
            stops = Counter(str(r.get("trajectory_stop")) for r in mine[1] if not _is_none(r.get("turn")))
            # The trajectories that did reach turn K (not stopped earlier): what the revisions
            # themselves did, apart from the paintings kept (stop_on_done / stop_on_gate_pass).
            revised = [r for r in mine[turns] if not _is_none(r.get("turn")) and int(r["turn"]) == turns
                       and not _is_none(r["total"])]
            res[split] = {"by_turn": by_turn, "vs_turn1": vs, "trajectories": len(mine[1]),
                          "improved_share": sum(better) / len(better) if better else None,
                          "paired": last["n"], "stops": dict(stops),
                          "revised": {"n": len(revised), "gate_pass": _estimate(
                              [_passed(r) for r in revised], [r["prompt"] for r in revised], n_boot, seed)}}
        out["results"][policy] = res
    return out


def turn_table_lines(report: dict) -> list[str]:
    """The turns side by side (``report["turns"]``): per split and policy, reward and gate pass of
    each turn, and turn k minus turn 1 paired by trajectory (95% intervals in brackets)."""
    turns = report["turns"]["turns"]
    head = ["split", "policy", "metric", *(f"turn {k}" for k in range(1, turns + 1)),
            *(f"turn {k} - turn 1" for k in range(2, turns + 1))]
    body = []
    for split in SPLITS:
        for policy in report["policies"]:
            res = report["turns"]["results"].get(policy, {}).get(split)
            if not res:
                continue
            label = f"{SPLIT_LABELS[split]} ({res['trajectories']} traj.)"
            body.append([label, policy, "reward", *(_ci(res["by_turn"][k]["reward"]) for k in res["by_turn"]),
                         *(_diff(res["vs_turn1"][k]["reward"]) for k in res["vs_turn1"])])
            body.append(["", "", "gate pass", *(_ci(res["by_turn"][k]["gate_pass"], True) for k in res["by_turn"]),
                         *(_diff(res["vs_turn1"][k]["gate_pass"], True) for k in res["vs_turn1"])])
            share = res["improved_share"]
            stops = ", ".join(f"{k} {v}" for k, v in sorted(res["stops"].items()))
            rev = res.get("revised")  # absent in eval.json files written before it
            rev = "" if not rev else f"; {rev['n']} reached turn {turns}, gate pass " + (
                "-" if not rev["n"] else _ci(rev["gate_pass"], True))
            body.append(["", "", "improved / ended", "-" if share is None else f"{share:.0%} improved",
                         stops + rev, *([""] * (len(head) - 5))])
    widths = [max(len(str(row[i])) for row in [head, *body]) for i in range(len(head))]
    fmt = lambda row: "  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip()  # noqa: E731
    return [fmt(head), *(fmt(row) for row in body)]


def load_report(run_root: str | Path) -> dict | None:
    """``<run_root>/eval/eval.json``, or None when the run was not evaluated."""
    path = Path(run_root) / EVAL_DIR / EVAL_JSON
    return json.loads(path.read_text()) if path.is_file() else None
