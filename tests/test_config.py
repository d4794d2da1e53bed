"""Config validation: bad fields are named, the shipped configs load, overrides apply."""

from pathlib import Path

import pytest
import yaml

from brushrl.config import BrushRLConfig, ConfigError, load_config, parse_config, save_resolved

ROOT = Path(__file__).resolve().parents[1]


def test_local_config_loads_with_documented_defaults():
    cfg = load_config(ROOT / "configs/local.yaml")
    assert cfg.rollout.group_size >= 4
    assert cfg.learner.scale_rewards == "none"
    assert cfg.learner.lora.target_modules == "all-linear"
    assert cfg.learner.lr_scheduler == "constant_with_warmup"
    assert cfg.policy.model == "tiny"


def test_unknown_field_is_named():
    with pytest.raises(ConfigError) as err:
        parse_config({"render": {"num_actor": 3}})
    assert "render.num_actor" in str(err.value)


def test_wrong_type_is_named():
    with pytest.raises(ConfigError) as err:
        parse_config({"rollout": {"group_size": "four"}})
    assert "rollout.group_size" in str(err.value)


def test_out_of_range_is_named():
    with pytest.raises(ConfigError) as err:
        parse_config({"rollout": {"group_size": 1}})
    assert "rollout.group_size" in str(err.value)


def test_unknown_reward_component_rejected():
    with pytest.raises(ConfigError, match="reward.weights"):
        parse_config({"reward": {"weights": {"gate": 0.1, "beauty": 0.9}}})


def test_overrides_and_resolved_roundtrip(tmp_path):
    cfg = load_config(ROOT / "configs/local.yaml", {"run.steps": 2, "render.num_actors": 1})
    assert cfg.run.steps == 2 and cfg.render.num_actors == 1
    out = tmp_path / "config.yaml"
    save_resolved(cfg, out)
    again = BrushRLConfig.model_validate(yaml.safe_load(out.read_text()))
    assert again == cfg


def test_bad_yaml_and_missing_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("run: [unclosed")
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_config(bad)
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.yaml")


def test_reward_presets_and_scorers():
    from brushrl.config import REWARD_PRESETS

    assert parse_config({}).reward.weights == REWARD_PRESETS["cpu"]
    cfg = parse_config({"reward": {"preset": "judge_led", "judge": {"base_url": "http://judge:8000/v1"}}})
    assert cfg.reward.weights == {"gate": 0.05, "length": 0.05, "hpsv3": 0.30, "judge": 0.60}
    assert cfg.reward.scorers == ["hpsv3", "judge"]
    assert parse_config({"reward": {"preset": "hps_only"}}).reward.scorers == ["hpsv3"]
    assert parse_config({"reward": {"preset": "hps_led", "judge": {"base_url": "http://j/v1"}}}).reward.weights["hpsv3"] == 0.60
    explicit = parse_config({"reward": {"preset": "hps_only", "weights": {"gate": 1.0}}})
    assert explicit.reward.weights == {"gate": 1.0}
    with pytest.raises(ConfigError, match="reward.judge.base_url"):
        parse_config({"reward": {"preset": "judge_led"}})


def test_deadlines_must_nest():
    with pytest.raises(ConfigError, match=r"render.deadline_s \(60.0\) must be < reward.scorer_timeout_s \(60.0\)"):
        parse_config({"render": {"deadline_s": 60}})
    with pytest.raises(ConfigError, match=r"reward.scorer_timeout_s \(400.0\) must be < reward.group_deadline_s"):
        parse_config({"reward": {"scorer_timeout_s": 400}})
    parse_config({"render": {"deadline_s": 90}, "reward": {"scorer_timeout_s": 120, "group_deadline_s": 600}})


def test_judge_led_example_config_loads():
    cfg = load_config(ROOT / "configs/judge_led.yaml")
    assert cfg.reward.preset == "judge_led" and cfg.reward.judge.base_url
    assert cfg.reward.hpsv3.python and cfg.resources.hpsv3.num_gpus == 1


@pytest.mark.parametrize(
    ("old", "value", "new"),
    [
        ("render.resources", {"renderer": 1}, "resources.renderer.resources"),
        ("learner.num_gpus", 0.5, "resources.learner.num_gpus"),
        ("rollout.num_gpus", 0.3, "resources.rollout.num_gpus"),
        ("reward.judge.num_gpus", 1.0, "resources.judge.num_gpus"),
        ("reward.hpsv3.num_gpus", 0.5, "resources.hpsv3.num_gpus"),
    ],
)
def test_moved_placement_field_names_its_new_place(old, value, new):
    with pytest.raises(ConfigError) as err:
        load_config(ROOT / "configs/local.yaml", {old: value})
    assert f"{old}: moved to {new}" in str(err.value)
    # The new place takes it.
    cfg = load_config(ROOT / "configs/local.yaml", {new: value})
    section, field = new.split(".")[1:]  # resources.<actor>.<field>
    assert getattr(getattr(cfg.resources, section), field) == value


def test_old_resolved_config_with_default_placement_still_loads(tmp_path):
    """A run directory's config.yaml written before the move holds the old defaults; it resumes."""
    data = yaml.safe_load((ROOT / "configs/local.yaml").read_text())
    data["render"]["resources"] = {}
    data.setdefault("learner", {})["num_gpus"] = 0.0
    data.setdefault("rollout", {})["num_gpus"] = 0.0
    data["reward"].setdefault("judge", {})["num_gpus"] = 0.0
    data["reward"].setdefault("hpsv3", {})["num_gpus"] = 1.0  # the old default of HPSv3's GPUs
    cfg = parse_config(data)
    assert "num_gpus" not in cfg.reward.hpsv3.model_dump() and "num_gpus" not in cfg.reward.judge.model_dump()
    assert "resources" not in cfg.render.model_dump() and "num_gpus" not in cfg.learner.model_dump()
    with pytest.raises(ConfigError, match="render.resources: moved to resources.renderer.resources"):
        parse_config({**data, "render": {**data["render"], "resources": {"renderer": 2}}})


def test_canvas_size_other_than_the_corpus_is_refused_for_the_tiny_policy():
    """The tiny policy is warm-started on the corpus, drawn at 600 px with absolute coordinates: at
    any other size none of its sketches would pass the gate, so the config says so up front."""
    from brushrl.config import CORPUS_CANVAS_SIZE
    from brushrl.corpus import build_corpus

    assert all(f"createCanvas({CORPUS_CANVAS_SIZE}, {CORPUS_CANVAS_SIZE}, WEBGL)" in item.code
               for item in build_corpus(1, seed=0))
    with pytest.raises(ConfigError, match="render.canvas_size 512: the tiny policy"):
        parse_config({"render": {"canvas_size": 512}})
    parse_config({"render": {"canvas_size": 512}, "policy": {"model": "Qwen/Qwen3-0.6B"}})  # its own prompt + gate
    assert parse_config({}).render.canvas_size == CORPUS_CANVAS_SIZE


def test_cli_fails_loudly_when_a_command_module_cannot_be_imported(monkeypatch):
    import brushrl.cli as cli

    monkeypatch.setattr(cli, "_COMMAND_MODULES", (*cli._COMMAND_MODULES, "brushrl.no_such_stage.cli"))
    with pytest.raises(ImportError, match="brushrl.no_such_stage.cli cannot be imported"):
        cli.build_parser()
