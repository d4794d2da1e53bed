"""Subject fidelity, within-prompt diversity and copying of an evaluation's passing paintings
(``brushrl.reward.painting_metrics``, ``eval_report.painting_report``), on the starter pool's own
PNGs and small Pillow paintings; no Ray, no renderer."""

from __future__ import annotations

import io
import json
import math
import random
from pathlib import Path

import numpy as np
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
    assert set(paint) == {"skipped", "results"} and "nowhere" in paint["skipped"]
    # colour accuracy needs no pool: it alone is measured
    assert set(paint["results"]["base"]["held_out"]) == {"paintings", "missing_png", "colour_accuracy"}
    report = build_report(rows, ["base", "step_0020"], cfg, prompts)
    report["paintings"] = paint
    table = "\n".join(table_lines(report))
    assert "subject fidelity" not in table and "colour accuracy" in table


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


# ------------------------------------------------------------------ colour accuracy (issue 35)
def _first_recoloured(base: str):
    """The first variant of ``base`` repainted in another colour word than its canonical sketch's."""
    from brushrl.corpus import make_variant
    from brushrl.corpus.colours import colour_word

    own = colour_word(make_variant(base, 0).subject)
    return next(item for i in range(1, 40) if colour_word((item := make_variant(base, i)).subject) not in (own, None))


@pytest.fixture(scope="module")
def corpus_renders():
    """Corpus sketches rendered in Chromium by the project's renderer (600 px, seed 0): five
    canonical ones in five colour words and the first recoloured tulip. ``{subject: png}``."""
    from brushrl.config import RenderConfig
    from brushrl.corpus import make_variant
    from brushrl.render.browser import Renderer

    items = [make_variant(b, 0) for b in ("tulip", "lotus", "blue_iris", "white_anemone", "marigold")]
    items.append(_first_recoloured("tulip"))
    out = {}
    with Renderer.from_config(RenderConfig()) as renderer:
        for item in items:
            res = renderer.render(item.code, seed=0, size=600, deadline_s=90, attempts=1)
            assert res.status == "ok" and res.png, (item.name, res.status, res.detail)
            out[item.subject] = res.png
    return out


def test_the_colour_measure_reads_corpus_renders_as_their_colour_word(corpus_renders):
    """Among every colour word of the corpus, each render's dominant painted colour is the word its
    subject names, recoloured variant included; the stems and leaves go to foliage, not a word;
    the same image as PNG bytes and as an RGB array measures the same."""
    from brushrl.corpus.colours import COLOUR_WORDS, colour_word
    from brushrl.reward.painting_metrics import ColourWords, read_rgb

    words = ColourWords(COLOUR_WORDS)
    assert len(corpus_renders) == 6 and len(set(map(colour_word, corpus_renders))) >= 5  # five words or six
    for subject, png in corpus_renders.items():
        counts = words.counts(png)
        assert words.dominant(png) == colour_word(subject), (subject, counts)
        paper = [int(counts["paper"][i:i + 2], 16) for i in (1, 3, 5)]
        assert min(paper) >= 0xE0 and counts["foliage"] > 0 and 0 < counts["painted"] < counts["pixels"]  # a cream
        assert words.counts(read_rgb(png)) == counts
    # a smaller candidate set: the red tulip among {red, pink} is still red
    assert ColourWords(["pink", "red"]).dominant(corpus_renders["a red tulip"]) == "red"


def test_bare_paper_and_foliage_have_no_dominant_colour():
    from brushrl.corpus.colours import COLOUR_WORDS
    from brushrl.corpus.palettes import PALETTES
    from brushrl.reward.painting_metrics import ColourWords

    words = ColourWords(COLOUR_WORDS)
    paper = Image.new("RGB", (120, 120), "#fdf8ee")
    assert words.dominant(np.asarray(paper)) is None and words.counts(np.asarray(paper))["painted"] == 0
    ImageDraw.Draw(paper).ellipse((20, 20, 100, 100), fill=next(iter(PALETTES.values()))[0].leaf)
    counts = words.counts(np.asarray(paper))
    assert words.dominant(np.asarray(paper)) is None and counts["foliage"] == counts["painted"] > 0
    with pytest.raises(ValueError, match="colour words"):
        ColourWords(["chartreuse"])


def test_colour_chance_is_uniform_and_prompt_blind():
    from brushrl.reward.painting_metrics import colour_chance

    chance = colour_chance(["red", "red", "pink", "orange"], ["orange", "pink", "red"])
    assert chance == {"uniform": pytest.approx(1 / 3), "prompt_blind": 0.5, "prompt_blind_word": "red"}
    assert colour_chance([], ["red"])["prompt_blind"] is None


def test_spectral_constants_are_p5_brushs_and_glazes_run_from_paper_to_pigment():
    """The vendored constants are the installed p5.brush shader's, digit for digit; a glaze at 0 is
    the paper and at 1 the pigment; a thin blue glaze on cream paper is greener than either
    (Kubelka-Munk, not alpha blending: why the measure compares with glazes, not with references)."""
    import re

    from brushrl.render.harness import find_js_dir
    from brushrl.reward import spectral

    try:
        shader = find_js_dir() / "node_modules" / "p5.brush" / "src" / "core" / "gl" / "shader.frag"
    except (FileNotFoundError, OSError):
        shader = None
    if shader is not None and shader.is_file():
        src = shader.read_text()
        rows = re.findall(r"R\[\s*\d+\] = max\(SPECTRAL_EPSILON, ((?:[wcmyrgb] \* [\d.]+(?: \+ )?)+)\);", src)
        bases = np.array([[float(x) for x in re.findall(r"\* ([\d.]+)", r)] for r in rows])
        cmf = np.array([[float(x) for x in m] for m in re.findall(
            r"xyz \+= R\[\s*\d+\] \* vec3\(([\d.]+), ([\d.]+), ([\d.]+)\);", src)])
        assert bases.shape == (38, 7) and (bases == spectral.BASE_SPECTRA).all()
        assert cmf.shape == (38, 3) and (cmf == spectral.CMF).all()
    paper, blue = np.array([253, 248, 238]) / 255, np.array([[0x4F, 0x74, 0xC9]]) / 255
    g = spectral.glazes(paper, blue, [0.0, 0.1, 1.0])[0]
    assert np.abs(g[0] - paper).max() < 2 / 255 and np.abs(g[2] - blue[0]).max() < 2 / 255
    alpha = paper + 0.1 * (blue[0] - paper)
    assert g[1][1] - g[1][0] > alpha[1] - alpha[0]  # greener than the straight line


def _colour_run(tmp_path: Path, renders: dict) -> tuple[list[dict], list[EvalPrompt], object]:
    """An evaluated run on disk with real renders: held-out prompts a red tulip, a pink lotus and an
    orange marigold; unseen prompts a blue tulip and a pink tulip. The base paints each prompt with
    the render of its colour (sample 0 fails, 1 and 2 pass); the final checkpoint paints every
    prompt with the red tulip's render and fails every sample of the lotus."""
    cfg = load_config(ROOT / "configs/local.yaml", {"eval.samples_per_prompt": 3, "eval.bootstrap": 200})
    pink_tulip = next(s for s in renders if s.endswith("tulip") and s != "a red tulip")
    plan = [("held_out", "a red tulip", "a red tulip"), ("held_out", "a pink lotus", "a pink lotus"),
            ("held_out", "an orange marigold", "an orange marigold"), ("unseen", "a blue tulip", "a blue iris"),
            ("unseen", pink_tulip, pink_tulip)]
    prompts = [EvalPrompt(i, split, s, f"Paint {s} in loose watercolour.", i, i)
               for i, (split, s, _) in enumerate(plan)]
    rows = []
    for policy in ("base", "step_0020"):
        (tmp_path / "eval" / "png" / policy).mkdir(parents=True)
        for p, (_, _, painted) in zip(prompts, plan):
            for i in range(3):
                passed = i > 0 if policy == "base" else p.subject != "a pink lotus"
                png = None
                if passed:
                    png = f"eval/png/{policy}/p{p.index:02d}_s{i}.png"
                    (tmp_path / png).write_bytes(renders[painted if policy == "base" else "a red tulip"])
                rows.append({"policy": policy, "split": p.split, "prompt": p.prompt, "prompt_index": p.index,
                             "subject": p.subject, "sample": i, "gate_verdict": "pass" if passed else "syntax_error",
                             "total": 0.5 if passed else 0.0, "none_cause": None, "png": png, "code": "x",
                             "turn": None})
    return rows, prompts, cfg


def test_colour_accuracy_in_the_report_tells_a_faithful_painter_from_one_colour(tmp_path, corpus_renders):
    rows, prompts, cfg = _colour_run(tmp_path, corpus_renders)
    paint = painting_report(rows, ["base", "step_0020"], cfg, tmp_path)
    base = paint["results"]["base"]["held_out"]["colour_accuracy"]
    final = paint["results"]["step_0020"]["held_out"]["colour_accuracy"]
    assert base["words"] == ["orange", "pink", "red"] and base["chance_uniform"] == pytest.approx(1 / 3)
    assert base["value"] == 1.0 and base["n"] == 6 and base["chance_prompt_blind"] == pytest.approx(1 / 3)
    # red for everything: right on the tulip, wrong on the marigold; the lotus never passed
    assert final["n"] == 6 and final["value"] == pytest.approx(0.5) and final["dominant"] == {"red": 6}
    assert final["chance_prompt_blind"] == pytest.approx(0.5) and final["prompt_blind_word"] == "red"
    assert final["interval"][0] <= 0.5 <= final["interval"][1]
    unseen = paint["results"]["base"]["unseen"]
    assert unseen["colour_accuracy"]["value"] == 1.0 and unseen["colour_accuracy"]["words"] == ["blue", "pink"]
    assert unseen["fidelity"]["unknown_subject"] == unseen["paintings"] == 4 and unseen["fidelity"]["mean"] is None
    report = build_report(rows, ["base", "step_0020"], cfg, prompts)
    report["paintings"] = paint
    table = "\n".join(table_lines(report))
    assert "colour accuracy (passes; 3 words, chance 33%)" in table and "100% [100%, 100%] (n 6, blind 33%)" in table
    assert "unseen (2x3, no target)" in table and "SFT corpus does paint them" in table
    assert "neither the SFT corpus nor RL" in table
    assert report["results"]["step_0020"]["vs_base"]["unseen"]["improved"] is None
    json.dumps(report)


def test_report_only_rebuilds_colour_accuracy_and_the_subject_strip(tmp_path, corpus_renders):
    """``--report-only`` from samples.parquet: colour accuracy and the unseen split come back, a
    prompt the last evaluation did not score is left out, and eval.html has the subject strip."""
    rows, prompts, cfg = _colour_run(tmp_path, corpus_renders)
    (tmp_path / "eval" / "eval.json").write_text(json.dumps(build_report(rows, ["base", "step_0020"], cfg, prompts)))
    pd.DataFrame(rows).to_parquet(tmp_path / "eval" / "samples.parquet", index=False)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg.model_dump(mode="json")))
    extra = EvalPrompt(len(prompts), "unseen", "a violet rose", "Paint a violet rose in loose watercolour.", 9, 9)
    printed = io.StringIO()
    Evaluator(cfg, tmp_path, [*prompts, extra], log=printed).rereport()
    new = json.loads((tmp_path / "eval" / "eval.json").read_text())
    assert [p["subject"] for p in new["prompts"]] == [p.subject for p in prompts] and "left out" in printed.getvalue()
    assert new["paintings"]["results"]["step_0020"]["held_out"]["colour_accuracy"]["value"] == pytest.approx(0.5)
    page = (tmp_path / "eval.html").read_text()
    strip = page[page.index("<h2>Subject strip</h2>"):page.index("</table>", page.index("<h2>Subject strip</h2>"))]
    assert strip.count("<tr>") == 1 + len(prompts) and all(p.subject in strip for p in prompts)
    assert strip.count("no pass") == 1  # the final policy never passed the lotus
    assert "eval/png/base/p01_s1.png" in strip and "eval/png/step_0020/p00_s0.png" in strip  # the first passes
    assert "pink ✓" in strip and "red ✗" in strip
    assert "colour accuracy" in page and "unseen prompts" in page
