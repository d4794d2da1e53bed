"""Scorers run concurrently as real Ray actors; failures and timeouts become None counted by cause;
a scorer that keeps failing is restarted; the judge actor scores through a local chat server."""

from __future__ import annotations

import io
import os
import time
from pathlib import Path

import pytest
import ray
from PIL import Image

from brushrl.config import JudgeConfig
from brushrl.reward.actor import JudgeActor, PoolScorerActor
from brushrl.reward.base import ScoreOut
from brushrl.reward.scorers import ScorerSet
from brushrl.config import PoolScorerConfig
from brushrl.ray_setup import start_local_ray

ROOT = Path(__file__).resolve().parents[1]


def _png(colour) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (64, 64), colour).save(buf, "PNG")
    return buf.getvalue()


class SleepScorer:
    def __init__(self, delay: float):
        self.delay = delay

    def score_group(self, pngs, prompt, seed):
        time.sleep(self.delay)
        return [ScoreOut(0.5, {"delay": self.delay}) for _ in pngs]


class BrokenScorer:
    def score_group(self, pngs, prompt, seed):
        raise RuntimeError("model fell over")

    def pid(self):
        return os.getpid()


class ShortScorer:
    def score_group(self, pngs, prompt, seed):
        return [ScoreOut(0.5)]  # one result whatever the group size: a broken invariant


@pytest.fixture(scope="module")
def local_ray():
    start_local_ray(num_cpus=6, runtime_env={"env_vars": {"PYTHONPATH": f"{ROOT / 'src'}:{ROOT / 'tests'}"}})
    yield
    ray.shutdown()


def _actor(cls, *args):
    return ray.remote(num_cpus=0.5, max_restarts=-1)(cls).remote(*args)


def test_scorers_run_concurrently_and_timeouts_are_none(local_ray):
    actors = {"a": _actor(SleepScorer, 3.0), "b": _actor(SleepScorer, 3.0), "slow": _actor(SleepScorer, 60.0)}
    ray.get([a.__ray_ready__.remote() for a in actors.values()])
    scorers = ScorerSet(actors, timeout_s=8.0)
    t0 = time.monotonic()
    (out,) = scorers.score([([_png("red"), _png("blue")], "p", 0)])
    wall = time.monotonic() - t0
    assert 7.5 < wall < 15, wall  # a and b overlap (3 s each); slow is abandoned at the timeout
    assert [o.value for o in out["a"]] == [0.5, 0.5] and out["b"][1].raw == {"delay": 3.0}
    assert [o.cause for o in out["slow"]] == ["scorer_timeout", "scorer_timeout"]
    assert scorers.wall_s["a"] < 7.5 and scorers.wall_s["slow"] >= 8  # a: not abandoned at the 8 s timeout


def test_failures_are_none_by_cause_and_a_failing_scorer_is_restarted(local_ray):
    broken, short = _actor(BrokenScorer), _actor(ShortScorer)
    pid = ray.get(broken.pid.remote())
    scorers = ScorerSet({"broken": broken, "short": short}, timeout_s=60.0, max_failures=2)
    (out,) = scorers.score([([_png("red"), _png("blue")], "p", 0)])
    assert [o.cause for o in out["broken"]] == ["scorer_error:RuntimeError"] * 2
    assert [o.cause for o in out["short"]] == ["scorer_error:ValueError"] * 2
    assert scorers.restarts["broken"] == 0
    scorers.score([([_png("red")], "p", 1)])
    assert scorers.restarts["broken"] == 1 and scorers.failures["broken"] == 0
    deadline = time.monotonic() + 180
    new_pid = pid
    while new_pid == pid:  # ray.kill is asynchronous; calls during the restart fail or wait
        assert time.monotonic() < deadline, "the scorer was not restarted"
        try:
            new_pid = ray.get(broken.pid.remote(), timeout=60)
        except (ray.exceptions.ActorUnavailableError, ray.exceptions.GetTimeoutError):
            pass
        time.sleep(0.5)


def test_pool_and_judge_actors_through_the_scorer_set(local_ray):
    from test_judge import ChatServer

    server = ChatServer("judge")
    try:
        judge_cfg = JudgeConfig(base_url=server.url, refs_per_tier=1, image_side=32, backoff_s=0)
        actors = {
            "pool_similarity": _actor(PoolScorerActor, PoolScorerConfig(path=str(ROOT / "pools/starter"))),
            "judge": _actor(JudgeActor, judge_cfg, str(ROOT / "pools/starter")),
        }
        scorers = ScorerSet(actors, timeout_s=120.0)
        out = scorers.score([([_png("#000000"), b"junk"], "p", 3), ([_png("#ffffff")], "p", 4)])
        assert out[0]["judge"][0].value == 1.0 and out[0]["judge"][0].raw["resolved"] == 2
        assert out[0]["judge"][1].value is None and out[0]["judge"][1].cause == "bad_image"
        assert out[0]["judge"][1].raw["dropped:bad_image"] == 1 and out[0]["judge"][0].raw["dropped"] == 0
        assert out[1]["judge"][0].value == 0.0
        assert out[0]["pool_similarity"][1].cause == "bad_image"
        assert 0 <= out[0]["pool_similarity"][0].value <= 1
    finally:
        server.close()


class LoadingScorer(SleepScorer):
    """A scorer whose load never ends (a model that does not come up)."""

    def __init__(self):
        super().__init__(0.0)
        time.sleep(3600)


class FailingLoadScorer(SleepScorer):
    def __init__(self):
        raise OSError("checkpoint not found")


def test_the_run_waits_for_reward_actors_to_load_and_names_one_that_does_not(local_ray):
    """``RewardActors.wait_loaded`` (before step 1): loaded actors pass; one still loading at the
    timeout, or whose constructor raised, stops the run, named, instead of scoring None at step 1."""
    from brushrl.reward.actor import RewardActors

    lines, loaded = [], _actor(SleepScorer, 0.0)
    RewardActors(scorers={"a": loaded}, critic=_actor(SleepScorer, 0.0)).wait_loaded(600, lines.append)
    assert len(lines) == 1 and "reward actors loaded (a, critic)" in lines[0]
    loading = _actor(LoadingScorer)
    with pytest.raises(TimeoutError, match=r"\['hpsv3'\] not loaded within reward.startup_timeout_s \(2 s\)"):
        RewardActors(scorers={"a": loaded, "hpsv3": loading}).wait_loaded(2, lines.append)
    ray.kill(loading)
    failing = ray.remote(num_cpus=0.5)(FailingLoadScorer).remote()
    with pytest.raises(ray.exceptions.RayActorError, match="checkpoint not found"):
        RewardActors(scorers={"judge": failing}).wait_loaded(600, lines.append)
