"""Pairwise judge: protocol (both orders, group seed, mean over resolved), the OpenAI-compatible
client against a real local HTTP server (errors, timeouts, malformed JSON, closed connections), and
the in-process transformers backend with a tiny VLM built here from a config."""

from __future__ import annotations

import base64
import io
import json
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from brushrl.config import JudgeConfig
from brushrl.pool import ReferencePool
from brushrl.reward.judge import (
    VERDICT_SCHEMA,
    OpenAIJudgeBackend,
    PairwiseJudge,
    TransformersJudgeBackend,
    parse_verdict,
)
from conftest import JsonHandler, StandInServer

ROOT = Path(__file__).resolve().parents[1]
POOL = ROOT / "pools/starter"


def _png(colour, size=64) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (size, size), colour).save(buf, "PNG")
    return buf.getvalue()


def _darkness(data_url: str) -> float:
    png = base64.b64decode(data_url.split(",", 1)[1])
    return 255 - float(np.asarray(Image.open(io.BytesIO(png)).convert("L")).mean())


class ChatServer(StandInServer):
    """A real HTTP/1.1 server speaking ``POST /v1/chat/completions``; ``mode`` picks its behaviour.

    Modes: ``judge`` (the darker image wins: more paint), ``always_a``, ``http_500_then_ok`` (every
    request's first try fails), ``http_400``, ``slow`` (sleeps past the client timeout),
    ``malformed`` (content is not JSON), ``bad_winner``, ``close_after`` (answers, then closes the
    kept-alive connection), ``drop_first`` (first try: closes the connection without an answer).
    """

    def __init__(self, mode: str):
        self.mode, self.requests, self.payloads, self.ports = mode, 0, [], set()
        self.seen: set[str] = set()
        self.lock = threading.Lock()
        server = self

        class Handler(JsonHandler, BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                assert self.path == "/v1/chat/completions", self.path
                key = json.dumps(body["messages"])[-200:] + str(len(json.dumps(body)))
                with server.lock:
                    server.requests += 1
                    server.payloads.append(body)
                    server.ports.add(self.client_address[1])
                    first = key not in server.seen
                    server.seen.add(key)
                mode = server.mode
                if mode == "drop_first" and first:
                    self.close_connection = True
                    return
                if mode == "http_500_then_ok" and first:
                    return self._send(500, {"error": "overloaded"})
                if mode == "http_400":
                    return self._send(400, {"error": "bad request"})
                if mode == "slow":
                    time.sleep(1.5)
                content = self._answer(body, mode)
                self._send(200, {"choices": [{"message": {"role": "assistant", "content": content}}]})
                if mode == "close_after":
                    self.close_connection = True

            def _answer(self, body, mode):
                if mode == "malformed":
                    return "A is better, because reasons"
                if mode == "bad_winner":
                    return json.dumps({"winner": "C", "reason": "x"})
                if mode == "always_a":
                    return json.dumps({"winner": "A", "reason": "first"})
                parts = body["messages"][0]["content"]
                a, b = (_darkness(p["image_url"]["url"]) for p in parts if p["type"] == "image_url")
                return json.dumps({"winner": "A" if a > b else "B", "reason": "more paint"})

        self._serve(Handler)


@pytest.fixture()
def server(request):
    srv = ChatServer(request.param)
    yield srv
    srv.close()


def _judge(url, **kw) -> tuple[PairwiseJudge, OpenAIJudgeBackend]:
    cfg = JudgeConfig(base_url=url, model="judge-under-test", timeout_s=kw.pop("timeout_s", 5.0),
                      backoff_s=0.0, image_side=32, **{"max_concurrency": 4, **kw})
    backend = OpenAIJudgeBackend(cfg)
    return PairwiseJudge(ReferencePool(POOL), backend, cfg), backend


@pytest.mark.parametrize("server", ["judge"], indirect=True)
def test_client_request_shape_and_scores(server):
    judge, backend = _judge(server.url, refs_per_tier=2)
    black, blank = _png("#000000"), _png("#ffffff")
    out = judge.score_many([black, blank], seed=7)
    assert out[0].score == 1.0 and out[0].resolved == 4  # 2 tiers x 2 refs, each asked twice
    assert out[1].score == 0.0 and out[1].resolved == 4
    assert server.requests == 16
    body = server.payloads[0]
    assert body["model"] == "judge-under-test" and body["temperature"] == 0.0
    assert body["response_format"]["json_schema"]["schema"] == VERDICT_SCHEMA
    assert body["response_format"]["json_schema"]["strict"] is True
    images = [p for p in body["messages"][0]["content"] if p["type"] == "image_url"]
    assert len(images) == 2 and all(p["image_url"]["url"].startswith("data:image/png;base64,") for p in images)
    # both orders were asked: the painting appears as image A in half of the requests
    firsts = [_darkness(p["messages"][0]["content"][1]["image_url"]["url"]) for p in server.payloads]
    assert sum(d > 250 for d in firsts) == 4 and sum(d < 5 for d in firsts) == 4
    backend.close()


@pytest.mark.parametrize("server", ["always_a"], indirect=True)
def test_position_bias_cancels_to_a_split(server):
    judge, backend = _judge(server.url, refs_per_tier=1)
    out = judge.score_many([_png("#000000"), _png("#ffffff")], seed=1)
    assert [o.score for o in out] == [0.5, 0.5]
    backend.close()


def test_group_seed_fixes_references():
    cfg = JudgeConfig(base_url="http://127.0.0.1:9/v1", refs_per_tier=2)
    judge = PairwiseJudge(ReferencePool(POOL), OpenAIJudgeBackend(cfg), cfg)
    assert judge.references(3) == judge.references(3)
    tiers = [e.tier for e in ReferencePool(POOL).entries if e.id in judge.references(3)]
    assert sorted(tiers) == ["good", "good", "love", "love"]
    assert len({tuple(judge.references(s)) for s in range(10)}) > 1


@pytest.mark.parametrize("server", ["http_500_then_ok"], indirect=True)
def test_server_errors_are_retried(server):
    judge, backend = _judge(server.url, refs_per_tier=1, attempts=2)
    out = judge.score_many([_png("#000000")], seed=0)
    assert out[0].score == 1.0 and out[0].resolved == 2
    assert server.requests == 8  # 4 ordered pairs, each failed once then answered
    assert backend.calls["http_500"] == 4 and backend.calls["ok"] == 4
    backend.close()


@pytest.mark.parametrize("server", ["http_400"], indirect=True)
def test_client_errors_are_not_retried_and_give_none(server):
    judge, backend = _judge(server.url, refs_per_tier=1, attempts=3)
    out = judge.score_many([_png("#000000")], seed=0)
    assert out[0].score is None and out[0].resolved == 0
    assert out[0].dropped["http_400"] == 4 and server.requests == 4
    backend.close()


@pytest.mark.parametrize("server", ["slow"], indirect=True)
def test_timeouts_give_none_after_bounded_retries(server):
    judge, backend = _judge(server.url, refs_per_tier=1, attempts=2, timeout_s=0.3)
    t0 = time.perf_counter()
    out = judge.score_many([_png("#000000")], seed=0)
    assert out[0].score is None and out[0].dropped["timeout"] == 4
    assert backend.calls["timeout"] == 8
    assert time.perf_counter() - t0 < 5
    backend.close()


@pytest.mark.parametrize("server", ["malformed", "bad_winner"], indirect=True)
def test_malformed_answers_are_dropped_not_retried(server):
    judge, backend = _judge(server.url, refs_per_tier=1, attempts=3)
    out = judge.score_many([_png("#000000")], seed=0)
    assert out[0].score is None and out[0].dropped["malformed"] == 4
    assert server.requests == 4
    backend.close()


@pytest.mark.parametrize("server", ["close_after"], indirect=True)
def test_connections_closed_by_the_server_are_not_reused(server):
    judge, backend = _judge(server.url, refs_per_tier=2, max_concurrency=1)
    a, b = _png("#000000"), _png("#ffffff")
    for _ in range(3):  # an idle pooled connection closed by the far end is discarded, not reused
        assert backend.compare(a, b).winner == "A"
        time.sleep(1.0)  # let the server finish closing (the machine may be loaded)
    assert backend.calls["connection"] == 0 and len(server.ports) == 3
    for seed in range(3):  # back to back, a close can race the next request: retried on a fresh one
        out = judge.score_many([a, b], seed=seed)
        assert [o.score for o in out] == [1.0, 0.0]
    assert backend.calls["ok"] == 3 + 48 and len(server.ports) == server.requests
    backend.close()


@pytest.mark.parametrize("server", ["drop_first"], indirect=True)
def test_connection_dropped_mid_request_is_retried(server):
    judge, backend = _judge(server.url, refs_per_tier=1, attempts=2)
    out = judge.score_many([_png("#000000")], seed=0)
    assert out[0].score == 1.0
    assert backend.calls["connection"] == 4 and backend.calls["ok"] == 4
    backend.close()


def test_unreachable_endpoint_gives_none_and_bad_images_are_isolated():
    judge, backend = _judge("http://127.0.0.1:9/v1", refs_per_tier=1, attempts=1)
    out = judge.score_many([_png("#000000"), b"not a png"], seed=0)
    assert out[0].score is None and out[0].dropped["connection"] == 4
    assert out[1].score is None and out[1].dropped["bad_image"] == 1
    backend.close()


@pytest.mark.parametrize("server", ["judge"], indirect=True)
def test_curriculum_shifts_references_toward_love_and_never_back(server):
    stages = [{"min_score": 0.5, "refs": {"good": 1, "love": 3}}, {"min_score": 0.9, "refs": {"love": 4}}]
    judge, backend = _judge(server.url, refs_per_tier=2, curriculum=stages, curriculum_window=2)
    tiers = {e.id: e.tier for e in ReferencePool(POOL).entries}
    black, white = _png("#000000"), _png("#ffffff")  # the fake judge prefers more paint: 1.0 / 0.0

    def group(png, seed):
        refs = sorted(tiers[r] for r in judge.references(seed))
        (out,) = judge.score_many([png], seed=seed)
        return refs, out

    refs, out = group(white, 1)  # base mix; running mean 0.0
    assert refs == ["good", "good", "love", "love"] and out.stage == 0 and out.score == 0.0
    refs, out = group(black, 2)  # judged in the base mix, then the mean (0 + 1) / 2 reaches 0.5
    assert refs == ["good", "good", "love", "love"] and out.stage == 0 and judge.curriculum.stage == 1
    refs, out = group(black, 3)  # stage 1 mix; mean (1 + 1) / 2 reaches 0.9
    assert refs == ["good", "love", "love", "love"] and out.stage == 1 and out.resolved == 4
    assert judge.curriculum.stage == 2
    for seed in (4, 5, 6):  # harder references, worse scores: the stage does not move back
        refs, out = group(white, seed)
        assert refs == ["love"] * 4 and out.stage == 2
    assert judge.curriculum.running_mean() == 0.0 and judge.curriculum.stage == 2
    backend.close()
    # A resumed run's judge (a new actor) is brought back to the checkpointed stage, never below.
    again, backend = _judge(server.url, refs_per_tier=2, curriculum=stages, curriculum_window=2)
    assert again.curriculum.resume(2) == 2 and sorted(tiers[r] for r in again.references(7)) == ["love"] * 4
    assert again.curriculum.resume(1) == 2
    with pytest.raises(ValueError, match="curriculum stage 3 is not in 0..2"):
        again.curriculum.resume(3)
    backend.close()


def test_curriculum_config_is_checked(tmp_path):
    from pydantic import ValidationError

    from brushrl.pool.store import new_version

    love_only = new_version(POOL, tmp_path / "love_only")  # a draft copy; its good tier rejected
    for e in ReferencePool(POOL).tier("good"):
        love_only.rate(e.id, "reject", "test")
    cfg = JudgeConfig(base_url="http://127.0.0.1:9/v1", tiers=["love"],
                      curriculum=[{"min_score": 0.5, "refs": {"good": 2}}])
    with pytest.raises(ValueError, match=r"curriculum\[0\].*no reference in tiers \['good'\]"):
        PairwiseJudge(ReferencePool(love_only.root), OpenAIJudgeBackend(cfg), cfg)

    with pytest.raises(ValidationError, match="curriculum"):
        JudgeConfig(curriculum=[{"min_score": 0.7, "refs": {"love": 4}}, {"min_score": 0.5, "refs": {"love": 2}}])
    with pytest.raises(ValidationError, match="tiers must be love/good"):
        JudgeConfig(curriculum=[{"min_score": 0.5, "refs": {"reject": 2}}])
    with pytest.raises(ValidationError, match="tiers must be love/good"):
        JudgeConfig(curriculum=[{"min_score": 0.5, "refs": {"love": 0}}])


def test_parse_verdict():
    assert parse_verdict('{"winner": "B", "reason": "soft"}').winner == "B"
    assert parse_verdict('```json\n{"winner": "A", "reason": ""}\n```').winner == "A"
    for bad in (None, "", "[]", '{"winner": "a"}', "{"):
        assert parse_verdict(bad).cause == "malformed"


# --- in-process backend -------------------------------------------------------------------------

CHAT_TEMPLATE = (
    "{%- for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' }}"
    "{%- if m['content'] is string %}{{ m['content'] }}{%- else %}{%- for c in m['content'] %}"
    "{%- if c['type'] == 'image' %}<image>{%- else %}{{ c['text'] }}{%- endif %}{%- endfor %}{%- endif %}"
    "{{ '<|im_end|>\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{%- endif %}"
)


@pytest.fixture(scope="module")
def tiny_vlm(tmp_path_factory) -> Path:
    """A tiny random LLaVA (CLIP vision tower + Qwen2 text model) saved like a hub checkpoint.

    (Qwen2-VL's processor needs torchvision for its video processor in transformers 5, and the
    PyPI torchvision wheel needs CUDA torch; LLaVA's processor does not.)
    """
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import (
        CLIPImageProcessorPil,
        CLIPVisionConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
        PreTrainedTokenizerFast,
        Qwen2Config,
    )

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<image>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(
        ['{"winner": "A", "reason": "soft washes"}', JudgeConfig().prompt] * 4,
        trainers.BpeTrainer(vocab_size=400, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()),
    )
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                        extra_special_tokens={"image_token": "<image>"})
    processor = LlavaProcessor(
        image_processor=CLIPImageProcessorPil(size={"shortest_edge": 56}, crop_size={"height": 56, "width": 56}),
        tokenizer=tokenizer, chat_template=CHAT_TEMPLATE, patch_size=14,
        vision_feature_select_strategy="default", num_additional_image_tokens=1,
    )
    cfg = LlavaConfig(
        vision_config=CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                       num_attention_heads=2, image_size=56, patch_size=14, projection_dim=32),
        text_config=Qwen2Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                num_attention_heads=4, num_key_value_heads=2),
        image_token_id=tokenizer.convert_tokens_to_ids("<image>"),
        vision_feature_layer=-1, vision_feature_select_strategy="default",
    )
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("tiny_vlm")
    LlavaForConditionalGeneration(cfg).save_pretrained(path)
    processor.save_pretrained(path)
    return path


def test_transformers_backend_real_model(tiny_vlm):
    import torch

    cfg = JudgeConfig(backend="transformers", model=str(tiny_vlm), refs_per_tier=2, image_side=56, batch_size=3)
    backend = TransformersJudgeBackend.from_pretrained(cfg)
    judge = PairwiseJudge(ReferencePool(POOL), backend, cfg)
    paintings = [_png("#000000"), _png("#d08070"), _png("#ffffff")]
    first = judge.score_many(paintings, seed=5)
    assert all(o.resolved == 4 and o.score in {i / 8 for i in range(9)} for o in first)
    assert [o.score for o in judge.score_many(paintings, seed=5)] == [o.score for o in first]  # deterministic

    # a model that always answers A is position-biased: both orders cancel to 0.5 everywhere
    lm_head = backend.model.get_output_embeddings()
    bias_a = torch.zeros(lm_head.weight.shape[0])
    bias_a[backend.choice_ids[0]] = 100.0
    handle = lm_head.register_forward_hook(lambda _m, _i, out: out + bias_a)
    try:
        assert [o.score for o in judge.score_many(paintings, seed=5)] == [0.5, 0.5, 0.5]
    finally:
        handle.remove()
