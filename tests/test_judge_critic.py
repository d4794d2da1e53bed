"""The judge critic (``reward.critic.kind: judge``) against a real local HTTP server speaking the
OpenAI chat API: its own request (the critique question, the painting, one reference of the
subject), its JSON answer as the critique, failures as ``Critique(cause=...)`` (the trajectory's
reward is then None), and gate failures worded by the CPU critic without a request."""

from __future__ import annotations

import base64
import json
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from brushrl.config import CriticConfig, JudgeConfig, PromptsConfig
from brushrl.pool import ReferencePool
from brushrl.reward.critic import CpuCritic
from brushrl.reward.judge import OpenAIJudgeBackend, resize_png
from brushrl.reward.judge_critic import JudgeCritic, parse_critique
from brushrl.types import Completion, GateVerdict, RenderResult, Sample
from conftest import JsonHandler, StandInServer

ROOT = Path(__file__).resolve().parents[1]
POOL = ReferencePool(ROOT / "pools/starter")
PROMPT = "Paint a peach hibiscus in loose watercolour."


class CritiqueServer(StandInServer):
    """``POST /v1/chat/completions``: answers ``{"critique": ..., "done": false}`` naming how many
    images it was sent (``ok``), text that is not JSON (``malformed``) or HTTP 400 (``http_400``)."""

    def __init__(self, mode: str):
        self.mode, self.payloads = mode, []
        server = self

        class Handler(JsonHandler, BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.payloads.append(body)
                if server.mode == "http_400":
                    return self._send(400, {"error": "bad request"})
                images = [p for p in body["messages"][0]["content"] if p["type"] == "image_url"]
                content = ("no JSON here" if server.mode == "malformed" else
                           json.dumps({"critique": f"Saw {len(images)} images: add a darker centre.", "done": False}))
                self._send(200, {"choices": [{"message": {"role": "assistant", "content": content}}]})

        self._serve(Handler)


@pytest.fixture()
def server(request):
    srv = CritiqueServer(request.param)
    yield srv
    srv.close()


def _critic(url: str) -> JudgeCritic:
    judge = JudgeConfig(base_url=url, model="judge-under-test", timeout_s=5.0, backoff_s=0.0, attempts=2,
                        image_side=64, tiers=["love", "good"])
    cfg = CriticConfig(kind="judge")
    cpu = CpuCritic([e for e in POOL.entries if e.tier in ("love", "good")], cfg, PromptsConfig().template, 600)
    return JudgeCritic(OpenAIJudgeBackend(judge), POOL, judge, cfg, cpu)


def _painted(png: bytes) -> Sample:
    c = Completion(PROMPT, "", [1], [2], [-0.1], 0)
    return Sample(c, "brush.fill('#000000', 80);", 0, 0, 1, GateVerdict("pass", stage="runtime"),
                  render=RenderResult("ok", png=png))


def _failed() -> Sample:
    c = Completion(PROMPT, "", [1], [2], [-0.1], 0)
    return Sample(c, "", 0, 0, 1, GateVerdict("syntax_error", "line 3: unexpected token", "static"), reward=0.0)


@pytest.mark.parametrize("server", ["ok"], indirect=True)
def test_the_judge_critiques_a_painting_against_a_reference_of_its_subject(server):
    critic = _critic(server.url)
    painting = next(e for e in POOL.entries if e.prompt == "a coral poppy").path.read_bytes()
    out = critic.critique([_painted(painting), _failed()], PROMPT, seed=7)
    assert out[0].ok and out[0].text == "Saw 2 images: add a darker centre." and not out[0].done
    assert out[1].ok and "syntax_error" in out[1].text  # the CPU critic's words; no request for it
    (payload,) = server.payloads
    text, a, b = payload["messages"][0]["content"]
    assert PROMPT in text["text"] and payload["response_format"]["json_schema"]["name"] == "critique"
    reference = critic.reference("a peach hibiscus", 7)
    assert reference.prompt == "a peach hibiscus" and critic.reference("a peach hibiscus", 7) == reference
    assert base64.b64decode(a["image_url"]["url"].split(",", 1)[1]) == resize_png(painting, 64)
    assert base64.b64decode(b["image_url"]["url"].split(",", 1)[1]) == resize_png(reference.path.read_bytes(), 64)
    assert out[0].seconds > 0 and out[0].seconds == out[1].seconds


@pytest.mark.parametrize("server, cause", [("malformed", "malformed"), ("http_400", "http_400")],
                         indirect=["server"])
def test_judge_failures_are_causes_not_critiques(server, cause):
    painting = next(e for e in POOL.entries if e.prompt == "a coral poppy").path.read_bytes()
    (out,) = _critic(server.url).critique([_painted(painting)], PROMPT, seed=0)
    assert not out.ok and out.cause == cause and out.text == ""


def test_an_unreachable_judge_is_a_connection_cause():
    (out,) = _critic("http://127.0.0.1:9/v1").critique([_painted(POOL.entries[0].path.read_bytes())], PROMPT, 0)
    assert out.cause == "connection"


def test_parse_critique():
    assert parse_critique('{"critique": " Paint more petals. ", "done": true}').text == "Paint more petals."
    assert parse_critique('```json\n{"critique": "x", "done": false}\n```').text == "x"
    assert parse_critique('{"critique": "", "done": true}').cause == "malformed"
    assert parse_critique(None).cause == "malformed" and parse_critique("[1]").cause == "malformed"
