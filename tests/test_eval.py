"""``brushrl eval``: the fixed prompt set and the report (bootstrap intervals, table, headline,
turns). The real evaluation of a run's base policy and checkpoint (tiny transformer, Chromium, local
Ray) that gives the same numbers twice is in tests/test_train.py, on the run trained there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from brushrl.artifacts.eval_report import build_report, headline_lines, table_lines
from brushrl.artifacts.summary import summarize
from brushrl.config import ConfigError, load_config
from brushrl.orchestrator.evaluate import EvalPrompt, eval_prompts
from brushrl.stats import bootstrap_means, percentile_interval

ROOT = Path(__file__).resolve().parents[1]


def test_prompt_set_is_fixed_and_reports_held_out_apart():
    cfg = load_config(ROOT / "configs/local.yaml")
    prompts = eval_prompts(cfg)
    assert [p.split for p in prompts] == ["held_out"] * len(cfg.eval.subjects) + ["training"] * len(cfg.prompts.subjects)
    assert not {p.subject for p in prompts if p.split == "held_out"} & set(cfg.prompts.subjects)
    assert prompts == eval_prompts(cfg)  # fixed
    assert len({p.render_seed for p in prompts}) == len(prompts)
    # A subject keeps its seeds whatever else is in the set; another eval.seed changes them.
    few = eval_prompts(cfg, held_out=1, training=1)
    assert [p.subject for p in few] == [cfg.eval.subjects[0], cfg.prompts.subjects[0]]
    assert few[1].render_seed == prompts[len(cfg.eval.subjects)].render_seed
    other = eval_prompts(load_config(ROOT / "configs/local.yaml", {"eval.seed": 1}))
    assert other[0].render_seed != prompts[0].render_seed
    # The unseen split comes last (asked for: brushrl eval asks for all unless --unseen K), so the
    # other prompts keep their indices and seeds; its pairs are neither held out nor trained on.
    every = eval_prompts(cfg, unseen=None)
    assert every[: len(prompts)] == prompts and [p.subject for p in every[len(prompts):]] == cfg.eval.unseen_subjects
    assert {p.split for p in every[len(prompts):]} == {"unseen"} and len(cfg.eval.unseen_subjects) >= 12
    assert not set(cfg.eval.unseen_subjects) & (set(cfg.eval.subjects) | set(cfg.prompts.subjects))
    assert [p.subject for p in eval_prompts(cfg, held_out=1, training=0, unseen=2)] == [
        cfg.eval.subjects[0], *cfg.eval.unseen_subjects[:2]]


def test_eval_cli_takes_unseen_and_refuses_an_unseen_pair_that_is_trained_on(tmp_path, capsys):
    import argparse

    import yaml

    from brushrl.orchestrator.cli import add_eval_arguments, run_eval

    parser = argparse.ArgumentParser()
    add_eval_arguments(parser)
    assert parser.parse_args(["run"]).unseen is None  # all
    assert parser.parse_args(["run", "--unseen", "0", "--unseen", "3"]).unseen == 3  # the Makefile's demo prefix
    cfg = load_config(ROOT / "configs/local.yaml", {"eval.unseen_subjects": ["a blue tulip", "a coral poppy"]})
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg.model_dump(mode="json")))
    assert run_eval(parser.parse_args([str(tmp_path)])) == 2
    assert "eval.unseen_subjects: ['a coral poppy']" in capsys.readouterr().out


def test_a_weighted_subject_reward_does_not_refuse_the_unseen_split():
    """The unseen pairs name no pool subject (fidelity skips them, a weighted ``subject`` scores
    them None), yet a config weighting ``subject`` is not refused for them: only training and
    held-out subjects must be in the pool."""
    from brushrl.orchestrator.actors import refuse_unknown_subjects
    from brushrl.reward.painting_metrics import PoolSubjects

    cfg = load_config(ROOT / "configs/local.yaml", {
        "reward.weights": {"gate": 0.05, "length": 0.05, "pool_similarity": 0.6, "subject": 0.2, "novelty": 0.1}})
    pool = PoolSubjects.from_config(cfg.reward.pool)
    assert pool.unknown(cfg.eval.unseen_subjects, cfg.prompts.template) == cfg.eval.unseen_subjects
    refuse_unknown_subjects(cfg)  # no ConfigError


def test_the_unseen_split_is_reported_apart_without_a_target():
    """An unseen split under a weighted ``subject``: each passing painting's reward is None
    (``subject:unknown_subject``), so its reward is undefined, but its gate pass counts every
    verdict; its difference is shown, not judged (``improved`` None), and the headline keeps to
    the judged splits."""
    from brushrl.artifacts.eval_report import UNKNOWN_SUBJECT

    cfg = load_config(ROOT / "configs/local.yaml", {"eval.samples_per_prompt": 6})
    prompts = [EvalPrompt(p, ("held_out", "held_out", "training", "training", "unseen", "unseen")[p], f"s{p}",
                          f"prompt {p}", p, p) for p in range(6)]

    def rows(policy: str, pass_every: int, value: float) -> list[dict]:
        out = []
        for p in range(6):
            for i in range(6):
                passed = i % pass_every == 0
                unseen = p >= 4
                out.append({"policy": policy, "split": prompts[p].split, "prompt": f"prompt {p}", "prompt_index": p,
                            "sample": i, "gate_verdict": "pass" if passed else "syntax_error",
                            "total": (None if unseen else value) if passed else 0.0,
                            "none_cause": UNKNOWN_SUBJECT if passed and unseen else None,
                            "reward_pool_similarity": value if passed else 0.0, "png": None, "code": "x"})
        return out

    report = build_report(rows("base", 3, 0.4) + rows("step_0020", 1, 0.6), ["base", "step_0020"], cfg, prompts)
    base, final = report["results"]["base"]["unseen"], report["results"]["step_0020"]["unseen"]
    assert base["gate_pass"]["mean"] == pytest.approx(2 / 6) and final["gate_pass"]["mean"] == 1.0
    assert base["reward"]["mean"] is None and base["unknown_subject"] == 4 and final["none"] == {UNKNOWN_SUBJECT: 12}
    vs = report["results"]["step_0020"]["vs_base"]
    assert vs["unseen"]["improved"] is None and vs["unseen"]["reward"]["diff"] is None
    assert vs["unseen"]["gate_pass"]["diff"] == pytest.approx(4 / 6) and vs["held_out"]["improved"] is True
    assert set(report["split_notes"]) == {"held_out", "training", "unseen"}
    lines = table_lines(report)
    table = "\n".join(lines)
    assert "unseen (2x6, no target)" in table and "splits:" in table and "held out from RL only" in table
    at = next(i for i, line in enumerate(lines) if line.startswith("unseen (2x6, no target)"))
    assert " - " in lines[at] and "+67 pts" in lines[at + 1]  # no reward; the gate difference is shown
    assert [line.split(" (")[0] for line in headline_lines(report)] == ["eval held-out", "eval training"]
    json.dumps(report)


def test_config_refuses_a_held_out_subject_that_is_trained_on():
    with pytest.raises(ConfigError, match="eval.subjects"):
        load_config(ROOT / "configs/local.yaml", {"eval.subjects": ["a coral poppy"]})


def test_stratified_bootstrap_is_seeded_and_keeps_strata():
    values, strata = [0.0, 0.0, 1.0, 1.0], ["a", "a", "b", "b"]
    boot = bootstrap_means(values, strata, 500, seed=3)
    assert (boot == 0.5).all()  # each prompt resampled within itself: the mix never changes
    mixed = bootstrap_means([0.0, 1.0, 0.0, 1.0], strata, 500, seed=3)
    assert (mixed == bootstrap_means([0.0, 1.0, 0.0, 1.0], strata, 500, seed=3)).all()
    lo, hi = percentile_interval(mixed)
    assert 0.0 <= lo < 0.5 < hi <= 1.0


def _rows(policy: str, pass_every: int, value: float) -> list[dict]:
    rows = []
    for p in range(4):
        for i in range(6):
            passed = i % pass_every == 0
            rows.append({"policy": policy, "split": "held_out" if p < 2 else "training", "prompt": f"prompt {p}",
                         "prompt_index": p, "sample": i, "gate_verdict": "pass" if passed else "syntax_error",
                         "total": value if passed else 0.0, "none_cause": None,
                         "reward_length": 0.4 if passed else 0.0, "reward_pool_similarity": value if passed else 0.0,
                         "png": None, "code": "x"})
    return rows


def test_report_gives_the_side_by_side_table_and_the_headline():
    cfg = load_config(ROOT / "configs/local.yaml", {"eval.samples_per_prompt": 6})
    prompts = [EvalPrompt(p, "held_out" if p < 2 else "training", f"s{p}", f"prompt {p}", p, p) for p in range(4)]
    rows = _rows("base", 3, 0.4) + _rows("step_0020", 1, 0.6)
    report = build_report(rows, ["base", "step_0020"], cfg, prompts)
    assert report == build_report(rows, ["base", "step_0020"], cfg, prompts)  # deterministic
    held = report["results"]["step_0020"]["vs_base"]["held_out"]
    assert held["improved"] and held["reward"]["diff"] == pytest.approx(0.6 - 0.4 * 2 / 6)
    base = report["results"]["base"]["held_out"]
    assert base["gate_pass"]["mean"] == pytest.approx(2 / 6) and base["gate_failures"] == {"syntax_error": 8}
    assert base["components"]["pool_similarity"]["mean"] == pytest.approx(0.4)  # among passes
    table = "\n".join(table_lines(report))
    assert "step_0020 - base" in table and "held-out (2x6)" in table and "gate failures" in table
    (line, _) = headline_lines(report)
    assert "above its 95% CI" in line and "gate pass 33% -> 100%" in line
    json.dumps(report)  # eval.json is plain JSON



def test_base_vs_checkpoint_difference_is_paired_by_prompt_and_sample():
    """Every policy samples completion i of a prompt with the same seeds, so the difference is taken
    per (prompt, sample): a small gain on completions that vary a lot between samples clears its
    interval paired, although each policy's own interval is wide; a None drops only its pair."""
    cfg = load_config(ROOT / "configs/local.yaml", {"eval.samples_per_prompt": 6})
    prompts = [EvalPrompt(p, "held_out" if p < 2 else "training", f"s{p}", f"prompt {p}", p, p) for p in range(4)]
    base = _rows("base", 1, 0.0)
    for r in base:
        r["total"] = 0.1 + 0.15 * r["sample"]  # samples differ far more than the policies do
    after = [dict(r, policy="step_0020", total=r["total"] + 0.03) for r in base]
    after[0]["total"], after[0]["none_cause"] = None, "render_infra"  # prompt 0, sample 0
    report = build_report(base + after, ["base", "step_0020"], cfg, prompts)
    held = report["results"]["step_0020"]["vs_base"]["held_out"]
    assert held["reward"]["n"] == 11 and held["reward"]["diff"] == pytest.approx(0.03)
    assert held["reward"]["lo"] == pytest.approx(0.03) and held["improved"]
    mine = report["results"]["step_0020"]["held_out"]["reward"]
    assert mine["lo"] < report["results"]["base"]["held_out"]["reward"]["mean"]  # alone, within the base's spread
    # Shuffle which sample is which: the pairs no longer share seeds, the gain is lost in the spread.
    shuffled = [dict(r, sample=(r["sample"] + 3) % 6) for r in after]
    held = build_report(base + shuffled, ["base", "step_0020"], cfg, prompts)["results"]["step_0020"]["vs_base"]["held_out"]
    assert not held["improved"]


def _graded_rows(policy: str, passes, value) -> list[dict]:
    """4 prompts x 6 samples; sample i passes when ``passes(i)``, with reward ``value(prompt, i)``."""
    return [{"policy": policy, "split": "held_out" if p < 2 else "training", "prompt": f"prompt {p}",
             "prompt_index": p, "sample": i, "gate_verdict": "pass" if passes(i) else "syntax_error",
             "total": value(p, i) if passes(i) else 0.0, "none_cause": None, "png": None, "code": "x"}
            for p in range(4) for i in range(6)]


def _six_prompts_report(rows: list[dict]) -> dict:
    cfg = load_config(ROOT / "configs/local.yaml", {"eval.samples_per_prompt": 6})
    prompts = [EvalPrompt(p, "held_out" if p < 2 else "training", f"s{p}", f"prompt {p}", p, p) for p in range(4)]
    return build_report(rows, ["base", "step_0020"], cfg, prompts)


def test_a_run_that_only_fails_less_gains_only_from_fewer_failures():
    """The final policy passes every sample, the base the even ones; a painting that passes under
    both has the same reward, and the newly passing ones are as good as the base's (0.3, 0.5, 0.4
    vs 0.4, 0.3, 0.5): the whole gain is fewer failures, none of it better paintings."""
    value = lambda p, i: (0.3, 0.4, 0.5, 0.3, 0.4, 0.5)[i] + 0.01 * p  # noqa: E731
    rows = _graded_rows("base", lambda i: i % 2 == 0, value) + _graded_rows("step_0020", lambda i: True, value)
    report = _six_prompts_report(rows)
    for split in ("held_out", "training"):
        vs = report["results"]["step_0020"]["vs_base"][split]
        parts = vs["decomposition"]
        assert parts["total"]["diff"] == pytest.approx(vs["reward"]["diff"]) and vs["reward"]["diff"] > 0.19
        assert parts["better_paintings"]["diff"] == pytest.approx(0.0, abs=1e-12)
        assert parts["fewer_failures"]["diff"] == pytest.approx(vs["reward"]["diff"])
        assert vs["reward_both_pass"] == {"diff": 0.0, "lo": 0.0, "hi": 0.0, "n": 6}
        assert parts["base"]["gate_pass"] == 0.5 and parts["final"]["gate_pass"] == 1.0
    line = headline_lines(report)[0]
    assert "fewer failures +0.20" in line and ("better paintings +0.000" in line or "better paintings -0.000" in line)
    table = "\n".join(table_lines(report))
    assert "from fewer failures" in table and "from better paintings" in table and "both pass" in table


def test_a_run_that_only_paints_better_gains_only_from_better_paintings():
    value = lambda p, i: 0.2 + 0.1 * i  # noqa: E731
    rows = (_graded_rows("base", lambda i: i < 4, value)
            + _graded_rows("step_0020", lambda i: i < 4, lambda p, i: value(p, i) + 0.05))
    parts = _six_prompts_report(rows)["results"]["step_0020"]["vs_base"]["held_out"]["decomposition"]
    assert parts["fewer_failures"]["diff"] == pytest.approx(0.0, abs=1e-12)
    assert parts["better_paintings"]["diff"] == pytest.approx(4 / 6 * 0.05)
    assert parts["better_paintings"]["lo"] > 0


def test_the_two_parts_sum_to_the_total_in_the_estimate_and_every_resample():
    """Random passes and rewards, a None that drops its pair: fewer failures + better paintings is
    the paired reward difference, and the total's interval is the reward difference's (the same
    resamples of pairs)."""
    import numpy as np

    from brushrl.artifacts.eval_report import decompose

    rng = np.random.default_rng(7)
    a_pass, b_pass = rng.random((4, 6)) < 0.5, rng.random((4, 6)) < 0.8
    a_val, b_val = rng.random((4, 6)), rng.random((4, 6))
    rows = (_graded_rows("base", lambda i: True, lambda p, i: float(a_val[p, i]))
            + _graded_rows("step_0020", lambda i: True, lambda p, i: float(b_val[p, i])))
    for r in rows:
        ok = (a_pass if r["policy"] == "base" else b_pass)[int(r["prompt"][-1]), r["sample"]]
        r["gate_verdict"], r["total"] = ("pass", r["total"]) if ok else ("syntax_error", 0.0)
    rows[1]["total"], rows[1]["none_cause"] = None, "render_infra"
    for split in ("held_out", "training"):
        vs = _six_prompts_report(rows)["results"]["step_0020"]["vs_base"][split]
        parts = vs["decomposition"]
        assert parts["fewer_failures"]["diff"] + parts["better_paintings"]["diff"] == pytest.approx(vs["reward"]["diff"])
        assert (parts["total"]["lo"], parts["total"]["hi"]) == pytest.approx((vs["reward"]["lo"], vs["reward"]["hi"]))
        assert parts["n"] == vs["reward"]["n"]
    pa, pb = (rng.integers(0, 2, (50, 10)).astype(float) for _ in range(2))  # 50 "resamples" of 10 pairs
    boot = decompose(pa, pa * rng.random((50, 10)), pb, pb * rng.random((50, 10)))  # a failure's reward is 0
    ok = ~np.isnan(boot["better_paintings"])
    assert np.allclose((boot["fewer_failures"] + boot["better_paintings"])[ok], boot["total"][ok])


def test_the_parts_are_none_when_a_policy_never_passes_and_old_reports_still_read():
    rows = (_graded_rows("base", lambda i: False, lambda p, i: 0.5)
            + _graded_rows("step_0020", lambda i: True, lambda p, i: 0.5))
    report = _six_prompts_report(rows)
    parts = report["results"]["step_0020"]["vs_base"]["held_out"]["decomposition"]
    assert parts["total"]["diff"] == pytest.approx(0.5)  # the difference itself is defined
    assert parts["fewer_failures"]["diff"] is None and parts["better_paintings"]["diff"] is None
    assert parts["base"]["reward_passing"] is None  # q of no passing painting: undefined, not 0
    # An eval.json written before the decomposition: the table and headline still read it.
    for res in report["results"].values():
        for split in list(res):
            if split.startswith("vs_"):
                for vs in res[split].values():
                    del vs["decomposition"], vs["reward_both_pass"]
            else:
                del res[split]["reward_passing"]
    assert "from better paintings" in "\n".join(table_lines(report))
    assert "fewer failures" not in headline_lines(report)[0]


def test_demo_seeds_reads_each_seeds_eval_into_its_table():
    """scripts/demo_seeds.py (behind docs/perf/demo_seeds.json): base vs final per split from
    eval.json, the difference's interval and whether gate pass held."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("demo_seeds", ROOT / "scripts" / "demo_seeds.py")
    demo_seeds = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo_seeds)
    cfg = load_config(ROOT / "configs/local.yaml", {"eval.samples_per_prompt": 6})
    prompts = [EvalPrompt(p, "held_out" if p < 2 else "training", f"s{p}", f"prompt {p}", p, p) for p in range(4)]
    report = build_report(_rows("base", 3, 0.4) + _rows("step_0020", 1, 0.6), ["base", "step_0020"], cfg, prompts)
    splits = demo_seeds.seed_splits(json.loads(json.dumps(report)))
    held = splits["held_out"]
    assert set(splits) == {"held_out", "training"} and held["improved"] and held["gate_not_lower"]
    assert held["base_reward"]["mean"] == pytest.approx(0.4 * 2 / 6) and held["final_reward"]["mean"] == pytest.approx(0.6)
    assert held["diff"]["lo"] > 0 and held["base_gate_pass"] == pytest.approx(2 / 6)
    record = {"seed": 3, "train_s": 600.0, "eval_s": 200.0, "splits": splits}
    lines = demo_seeds.table([record])
    assert len(lines) == 4 and lines[1].startswith("3    held_out") and "+0.467" in lines[1] and " *" in lines[1]
    assert "33% -> 100%" in lines[1]
    rows = demo_seeds.markdown([record])  # the README's table: header, rule, one row per split
    assert len(rows) == 4 and all(r.count("|") == 12 for r in rows)
    assert rows[2].startswith("| 3 | held-out | 0.133 [") and "| +0.467 [" in rows[2] and " ✓ |" in rows[2]
    assert "| 33% → 100% |" in rows[2]


def test_summary_ends_with_the_eval_headline(tmp_path):
    cfg = load_config(ROOT / "configs/local.yaml", {"eval.samples_per_prompt": 6})
    prompts = [EvalPrompt(p, "held_out" if p < 2 else "training", f"s{p}", f"prompt {p}", p, p) for p in range(4)]
    run = tmp_path / "local"
    (run / "eval").mkdir(parents=True)
    (run / "status.json").write_text(json.dumps({"state": "finished", "steps": 2, "last_step": 2}))
    report = build_report(_rows("base", 3, 0.4) + _rows("step_0002", 2, 0.5), ["base", "step_0002"], cfg, prompts)
    (run / "eval" / "eval.json").write_text(json.dumps(report))
    lines = summarize(run).lines(wall_s=900)
    assert lines[0].startswith("run 'local': finished, 2/2 steps")
    assert any(line.startswith("eval held-out (2x6): reward base") for line in lines)
    assert any(line.startswith("eval page: ") for line in lines) and len("\n".join(lines)) < 2000


# ------------------------------------------------------------------------- brushrl eval --turns
def _turn_rows(policy: str, fix: bool) -> list[dict]:
    """Two-turn trajectories on 4 prompts x 4 members: turn 1 passes the gate for members 0-1
    (reward 0.4), fails for 2-3 (0.0); with ``fix`` turn 2 repairs every failure (0.5) and member 0
    says done after turn 1 (keeps its 0.4); member 3 of prompt 0 loses its critic (None)."""
    rows = []
    for p in range(4):
        for m in range(4):
            tid = f"{p}-{m}"
            done = fix and m == 0
            broken = p == 0 and m == 3
            stop = "none" if broken else "done" if done else "turns"
            base = {"policy": policy, "split": "held_out" if p < 2 else "training", "prompt": f"prompt {p}",
                    "prompt_index": p, "sample": m, "trajectory_id": tid, "trajectory_stop": stop,
                    "trajectory_none_cause": "critic:timeout" if broken else None, "none_cause": None, "code": "x"}
            ok1 = m < 2
            rows.append(dict(base, turn=1, gate_verdict="pass" if ok1 else "syntax_error", total=0.4 if ok1 else 0.0))
            if not (done or broken):
                ok2 = ok1 or fix
                rows.append(dict(base, turn=2, gate_verdict="pass" if ok2 else "syntax_error",
                                 total=(0.5 if fix else 0.4) if ok2 else 0.0))
    return rows


def test_turn_report_puts_turns_side_by_side_with_paired_intervals():
    from brushrl.artifacts.eval_report import turn_report, turn_table_lines, turn_views

    cfg = load_config(ROOT / "configs/local.yaml", {"eval.samples_per_prompt": 4})
    rows = _turn_rows("base", fix=False) + _turn_rows("step_0010", fix=True)
    views = turn_views(rows, 2)
    assert len(views[1]) == len(views[2]) == 2 * 16  # every trajectory has a painting at every turn
    done = next(r for r in views[2] if r["policy"] == "step_0010" and r["trajectory_id"] == "1-0")
    assert done["turn"] == 1 and done["total"] == 0.4  # stopped at done: its painting stands
    lost = next(r for r in views[2] if r["policy"] == "base" and r["trajectory_id"] == "0-3")
    assert lost["total"] is None and lost["none_cause"] == "critic:timeout"  # excluded, never 0

    report = {"policies": ["base", "step_0010"], "turns": turn_report(rows, ["base", "step_0010"], cfg, 2)}
    assert report["turns"] == turn_report(rows, ["base", "step_0010"], cfg, 2)  # deterministic
    after = report["turns"]["results"]["step_0010"]["held_out"]
    assert after["by_turn"][1]["gate_pass"]["mean"] == 0.5  # 0-3's own first turn keeps its reward
    assert after["by_turn"][2]["gate_pass"]["mean"] == 1.0 and after["by_turn"][2]["none"] == {"critic:timeout": 1}
    vs = after["vs_turn1"][2]
    assert vs["improved"] and vs["gate_pass"]["lo"] > 0 and vs["reward"]["n"] == 7
    before = report["turns"]["results"]["base"]["held_out"]["vs_turn1"][2]
    assert before["reward"]["diff"] == 0.0 and not before["improved"]
    assert after["stops"] == {"done": 2, "none": 1, "turns": 5} and after["improved_share"] == pytest.approx(5 / 7)
    # what the revisions did: the 5 that reached turn 2 (not done, not None) all pass; base's 7 pass 4 of 7
    assert after["revised"]["n"] == 5 and after["revised"]["gate_pass"]["mean"] == 1.0
    base_rev = report["turns"]["results"]["base"]["held_out"]["revised"]
    assert base_rev["n"] == 7 and base_rev["gate_pass"]["mean"] == pytest.approx(4 / 7)
    table = "\n".join(turn_table_lines(report))
    assert "turn 2 - turn 1" in table and "held-out (8 traj.)" in table and "improved" in table
    assert "5 reached turn 2, gate pass 100%" in table
    json.dumps(report)
