"""Subject fidelity, within-prompt diversity and copying of an evaluation's passing paintings
(``brushrl.reward.painting_metrics``, ``eval_report.painting_report``), on the starter pool's own
PNGs and small Pillow paintings; no Ray, no renderer."""

from __future__ import annotations

import io
import json
import math
import random
from pathlib import Path

import pandas as pd
import pytest
import yaml
from PIL import Image, ImageDraw

from brushrl.artifacts.eval_report import build_report, painting_report, table_lines
from brushrl.config import PoolScorerConfig, load_config
from brushrl.orchestrator.evaluate import EvalPrompt, Evaluator
from brushrl.pool.store import ReferencePool
from brushrl.reward.painting_metrics import MOVES, Painting, PoolSubjects, _moved, diversity, measure
from brushrl.reward.pool_scorer import image_features

ROOT = Path(__file__).resolve().parents[1]
POOL = ROOT / "pools" / "starter"


@pytest.fixture(scope="module")
def entries():
    return ReferencePool(POOL).entries


@pytest.fixture(scope="module")
def pool(entries):
    cfg = PoolScorerConfig()
    return PoolSubjects(entries, cfg.tiers, cfg.copy_min_corr)


@pytest.fixture(scope="module")
def moved(entries):
    """Each reference painted again twice, turned, scaled and moved (not a pixel copy): 32 paintings."""
    return [Painting(e.prompt, _moved(e.path.read_bytes(), *m), e.prompt) for e in entries for m in MOVES[:2]]


def _disc(colour: str, box=(60, 60, 190, 190)) -> bytes:
    img = Image.new("RGB", (256, 256), "#fdf8ee")
    ImageDraw.Draw(img).ellipse(box, fill=colour)
    out = io.BytesIO()
    img.save(out, "PNG")
    return out.getvalue()


def test_true_subjects_are_retrieved_far_above_chance_and_shuffled_ones_at_chance(pool, moved):
    m = measure(pool, moved)
    assert len(pool.subjects) == 16 and all(c is not None for c in m["correct"])
    chance, n = 1 / 16, len(moved)
    accuracy = sum(m["correct"]) / n
    # Shuffled subjects: the hits are Binomial(n, 1/16) whatever the attribution; 3 standard errors.
    tolerance = 3 * math.sqrt(chance * (1 - chance) / n)
    assert accuracy > chance + 2 * tolerance and accuracy >= 0.8
    labels = [p.subject for p in moved]
    random.Random(0).shuffle(labels)
    shuffled = measure(pool, [Painting(s, p.png, p.prompt) for s, p in zip(labels, moved)])
    assert abs(sum(shuffled["correct"]) / n - chance) <= tolerance


def test_a_subject_without_a_pool_reference_is_left_out_not_counted_wrong(pool):
    m = measure(pool, [Painting("a blue whale", _disc("#3050c0"), "p")])
    assert m["correct"] == [None]


def test_identical_paintings_have_no_diversity_and_different_ones_some(entries):
    same = image_features(entries[0].path.read_bytes())
    assert diversity([same, same, same]) == pytest.approx(0.0, abs=1e-12)
    assert diversity([same]) is None  # one painting has no pairs: not 0
    other = image_features(_disc("#3050c0"))
    assert 0.5 < diversity([same, other]) <= 1.0


def test_a_pool_reference_is_flagged_as_a_copy_and_a_disc_is_not(pool, entries):
    m = measure(pool, [Painting(entries[3].prompt, entries[3].path.read_bytes(), "p"),
                       Painting("a red rose", _disc("#c03030"), "q")])
    assert m["copy"] == [True, False]
    assert m["copy_distance"][0] == pytest.approx(0.0, abs=1e-9) and m["copy_distance"][1] > 0.1


def _eval_run(tmp_path: Path, entries) -> tuple[list[dict], list[EvalPrompt], object]:
    """An evaluated run on disk: 4 pool subjects x 3 samples; the base paints each subject as its
    reference turned (fidelity 1), the checkpoint paints the first reference for every prompt (a
    collapsed run) and passes more; failures have no PNG."""
    cfg = load_config(ROOT / "configs/local.yaml", {"eval.samples_per_prompt": 3, "eval.bootstrap": 200})
    subjects = [e.prompt for e in entries[:4]]
    prompts = [EvalPrompt(i, "held_out" if i < 2 else "training", s, f"Paint {s}.", i, i) for i, s in enumerate(subjects)]
    rows = []
    for policy in ("base", "step_0020"):
        (tmp_path / "eval" / "png" / policy).mkdir(parents=True)
        for p, e in zip(prompts, entries):
            for i in range(3):
                passed = policy == "step_0020" or i < 2
                png = None
                if passed:
                    src = e if policy == "base" else entries[0]
                    png = f"eval/png/{policy}/p{p.index:02d}_s{i}.png"
                    (tmp_path / png).write_bytes(_moved(src.path.read_bytes(), *MOVES[i % 2 if policy == "base" else 0]))
                rows.append({"policy": policy, "split": p.split, "prompt": p.prompt, "prompt_index": p.index,
                             "subject": p.subject, "sample": i, "gate_verdict": "pass" if passed else "syntax_error",
                             "total": (0.5 if passed else 0.0), "none_cause": None, "png": png, "code": "x",
                             "turn": None})
    return rows, prompts, cfg


def test_painting_report_tells_a_collapsed_run_from_a_faithful_one(tmp_path, entries):
    rows, prompts, cfg = _eval_run(tmp_path, entries)
    paint = painting_report(rows, ["base", "step_0020"], cfg, tmp_path)
    assert paint["subjects"] == 16 and paint["chance"] == 1 / 16
    base, final = paint["results"]["base"]["held_out"], paint["results"]["step_0020"]["held_out"]
    assert base["paintings"] == 4 and final["paintings"] == 6 and base["missing_png"] == 0
    assert base["fidelity"]["mean"] == 1.0 and final["fidelity"]["mean"] == pytest.approx(0.5)  # 1 of 2 subjects
    assert final["diversity"]["mean"] == pytest.approx(0.0, abs=1e-12) and base["diversity"]["mean"] > 0.1
    assert base["copies"] == 0 and final["copies"] == 0 and base["copy_distance"]["min"] > 0.1
    report = build_report(rows, ["base", "step_0020"], cfg, prompts)
    report["paintings"] = paint
    table = "\n".join(table_lines(report))
    assert "subject fidelity (passes; chance 6%)" in table and "diversity within prompt" in table
    assert "copy distance" in table and "0 of 6" in table
    json.dumps(report)


def test_painting_report_is_skipped_not_raised_without_a_pool(tmp_path, entries):
    rows, prompts, cfg = _eval_run(tmp_path, entries)
    cfg = cfg.model_copy(update={"reward": cfg.reward.model_copy(update={
        "pool": cfg.reward.pool.model_copy(update={"path": str(tmp_path / "nowhere")})})})
    paint = painting_report(rows, ["base", "step_0020"], cfg, tmp_path)
    assert set(paint) == {"skipped"} and "nowhere" in paint["skipped"]
    report = build_report(rows, ["base", "step_0020"], cfg, prompts)
    report["paintings"] = paint
    assert "subject fidelity" not in "\n".join(table_lines(report))


def test_report_only_rebuilds_an_old_eval_json_with_the_new_fields(tmp_path, entries):
    """``brushrl eval --report-only`` (``Evaluator.rereport``) on an eval.json written before the
    decomposition and the painting measures: the rebuilt one has both, from samples.parquet."""
    rows, prompts, cfg = _eval_run(tmp_path, entries)
    old = build_report(rows, ["base", "step_0020"], cfg, prompts, wall_s=12.0)
    for res in old["results"].values():
        for split, v in res.items():
            if split.startswith("vs_"):
                for vs in v.values():
                    del vs["decomposition"], vs["reward_both_pass"]
    (tmp_path / "eval" / "eval.json").write_text(json.dumps(old))
    pd.DataFrame(rows).to_parquet(tmp_path / "eval" / "samples.parquet", index=False)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg.model_dump(mode="json")))  # a run directory
    printed = io.StringIO()
    Evaluator(cfg, tmp_path, prompts, log=printed).rereport()
    new = json.loads((tmp_path / "eval" / "eval.json").read_text())
    vs = new["results"]["step_0020"]["vs_base"]["held_out"]
    assert vs["decomposition"]["better_paintings"]["diff"] == pytest.approx(0.0, abs=1e-12)  # all rewards 0.5
    assert vs["decomposition"]["fewer_failures"]["diff"] == pytest.approx(vs["reward"]["diff"])
    assert new["paintings"]["results"]["step_0020"]["training"]["diversity"]["mean"] == pytest.approx(0.0, abs=1e-12)
    assert new["wall_s"] == 12.0 and "from fewer failures" in printed.getvalue()
    page = (tmp_path / "eval.html").read_text()
    assert "subject fidelity" in page and "from better paintings" in page


def test_step_measures_of_a_good_and_a_collapsed_step(pool, moved, entries):
    from brushrl.reward.painting_metrics import STEP_KEYS, step_measures

    # a good step: two groups of the moved references, each painting its own subject
    good = [Painting(p.subject, p.png, f"g{i % 2}") for i, p in enumerate(moved[:8])]
    m = step_measures(pool, good)
    assert set(m) == set(STEP_KEYS) and m["paint/measured"] == 8
    assert m["paint/subject_fidelity"] >= 0.75 and m["paint/copies"] == 0 and m["paint/diversity"] > 0.1
    # collapsed: every painting of both groups is one image, labelled with the groups' own subjects
    one = moved[0].png
    collapsed = step_measures(pool, [Painting(p.subject, one, p.prompt) for p in good])
    assert collapsed["paint/diversity"] == 0.0 and collapsed["paint/subject_fidelity"] <= 2 / 8
    # a copy of a reference is flagged; nothing measurable is None, never 0
    copy = step_measures(pool, [Painting(entries[0].prompt, entries[0].path.read_bytes(), "c")])
    assert copy["paint/copies"] == 1 and copy["paint/copy_distance_min"] == pytest.approx(0.0, abs=1e-9) and copy["paint/diversity"] is None
    empty = step_measures(pool, [])
    assert empty == {"paint/measured": 0, "paint/subject_fidelity": None, "paint/diversity": None,
                     "paint/copies": 0, "paint/copy_distance_min": None}
    unknown = step_measures(pool, [Painting("a blue whale", moved[0].png, "u")])
    assert unknown["paint/subject_fidelity"] is None and unknown["paint/measured"] == 1


def test_step_paintings_measure_passing_last_turns_and_say_when_off(tmp_path, moved):
    from brushrl.orchestrator.writer import StepPaintings
    from brushrl.prompts import user_prompt
    from brushrl.types import Completion, GateVerdict, RenderResult, Sample, Trajectory

    cfg = load_config(ROOT / "configs/local.yaml", {})

    def sample(p: Painting, group: int, passed: bool = True) -> Sample:
        prompt = user_prompt(p.subject, cfg.prompts.template)
        return Sample(Completion(prompt, "", [], [], [], policy_version=0), "", 0, group, 1,
                      GateVerdict("pass" if passed else "blank_canvas"),
                      RenderResult(status="ok", png=p.png, paint_fraction=0.1, wall_s=1.0, draw_s=1.0))

    monitor = StepPaintings(cfg)
    assert monitor.off is None
    a, b, c = (sample(p, 0) for p in moved[:3])
    failed = sample(moved[3], 0, passed=False)
    first, last = sample(moved[4], 1), sample(moved[5], 1)
    traj = Trajectory(member=0, turns=[first, last])
    m = monitor.measures([(a, 0, "accepted", None), (b, 1, "accepted", None), (c, 2, "accepted", None),
                          (failed, 3, "accepted", None), (first, 0, "accepted", traj), (last, 0, "accepted", traj)])
    assert m["paint/measured"] == 4 and m["time/paint_s"] > 0  # the failed one and the first turn are not
    off = StepPaintings(load_config(ROOT / "configs/local.yaml", {"reward.pool.path": str(tmp_path / "nowhere")}))
    assert off.pool is None and "nowhere" in off.off and off.measures([(a, 0, "accepted", None)]) == {}
