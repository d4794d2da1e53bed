"""Rollout stage: a real warm-started tiny Qwen3 behind ``TransformersEngine`` (PEFT LoRA) and the
same engine as a real local Ray actor."""

from __future__ import annotations

import pytest
import ray
import torch
from peft import get_peft_model_state_dict
from safetensors.torch import save_file

from brushrl.config import BrushRLConfig, LoraConfig, PolicyConfig, RayConfig, RolloutConfig
from brushrl.ray_setup import init_ray
from brushrl.policy import warm_start
from brushrl.rollout import RolloutEngine, TransformersEngine, make_rollout_actor
from test_policy import SYSTEM, TEMPLATE, standin_corpus, tiny_policy_cfg

torch.set_num_threads(1)

PROMPT = TEMPLATE.format(subject="a coral poppy")
#: Sampling with a temperature and top-k/top-p cut-offs, so that processed scores and raw logits
#: give different log-probs and the teacher-forcing check can tell them apart.
SAMPLING = RolloutConfig(max_new_tokens=400, temperature=0.7, top_k=20, top_p=0.95)


@pytest.fixture(scope="module")
def policy_cfg(tmp_path_factory) -> PolicyConfig:
    """The tiny policy warm-started on the stand-in corpus, addressed by its cache folder."""
    path = warm_start(
        tiny_policy_cfg(tmp_path_factory.mktemp("sft")), standin_corpus(8), SYSTEM, TEMPLATE, threads=1
    )
    return PolicyConfig(model=str(path))


@pytest.fixture(scope="module")
def engine(policy_cfg) -> TransformersEngine:
    return TransformersEngine(policy_cfg, SAMPLING, SYSTEM, LoraConfig(r=4, alpha=8))


def teacher_forced_logprobs(engine: TransformersEngine, prompt_ids: list[int], completion_ids: list[int]) -> torch.Tensor:
    """log p(completion token | prefix) from one forward pass over prompt + completion, [T] float32."""
    ids = torch.tensor([prompt_ids + completion_ids])
    with torch.no_grad():
        logits = engine.model(input_ids=ids).logits[0, len(prompt_ids) - 1 : -1].float()
    return torch.log_softmax(logits, -1).gather(1, torch.tensor(completion_ids)[:, None]).squeeze(1)


def random_adapter(engine: TransformersEngine, scale: float, seed: int) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return {k: scale * torch.randn(v.shape, generator=gen) for k, v in get_peft_model_state_dict(engine.model).items()}


def test_engine_is_a_rollout_engine(engine):
    assert isinstance(engine, RolloutEngine)
    assert engine.policy_version() == 0


def test_completions_are_consistent_records(engine):
    groups = engine.generate([PROMPT, "Paint a violet iris in loose watercolour."], n=3, seed=0)
    assert [len(g) for g in groups] == [3, 3]
    eos = engine.tokenizer.eos_token_id
    for prompt, group in zip([PROMPT, "Paint a violet iris in loose watercolour."], groups):
        assert len({c.gen_s for c in group}) == 1 and group[0].gen_s > 0
        for c in group:
            assert c.prompt == prompt and c.policy_version == 0
            assert c.prompt_ids == engine.prompt_ids(prompt)
            assert engine.tokenizer.decode(c.prompt_ids).endswith("<|im_start|>assistant\n")
            assert 0 < len(c.completion_ids) == len(c.logprobs) <= SAMPLING.max_new_tokens
            assert all(lp <= 0.0 for lp in c.logprobs)
            assert eos not in c.completion_ids[:-1]  # stops at the first <|im_end|>, no padding
            assert c.truncated == (c.completion_ids[-1] != eos)
            assert c.text == engine.tokenizer.decode(c.completion_ids, skip_special_tokens=True)
    # The warm-started policy mostly finishes its sketch within 400 tokens.
    assert sum(not c.truncated for g in groups for c in g) >= 3


def test_truncation_at_max_new_tokens(engine):
    short = TransformersEngine.__new__(TransformersEngine)
    short.__dict__.update(engine.__dict__, rollout_cfg=SAMPLING.model_copy(update={"max_new_tokens": 16}))
    (group,) = short.generate([PROMPT], n=2, seed=1)
    assert all(c.truncated and len(c.completion_ids) == 16 == len(c.logprobs) for c in group)


def test_logprobs_are_raw_logit_logprobs(engine):
    """Behaviour log-probs equal a teacher-forced recomputation at temperature 1 (raw logits),
    although sampling used temperature 0.7, top-k 20 and top-p 0.95."""
    (group,) = engine.generate([PROMPT], n=2, seed=2)
    for c in group:
        expected = teacher_forced_logprobs(engine, c.prompt_ids, c.completion_ids)
        torch.testing.assert_close(torch.tensor(c.logprobs), expected, atol=1e-4, rtol=0)


def test_seeded_generation_is_reproducible(engine):
    a = engine.generate([PROMPT], n=2, seed=7)[0]
    b = engine.generate([PROMPT], n=2, seed=7)[0]
    c = engine.generate([PROMPT], n=2, seed=8)[0]
    assert [x.completion_ids for x in a] == [x.completion_ids for x in b]
    assert [x.completion_ids for x in a] != [x.completion_ids for x in c]


def test_load_adapter_swaps_weights_and_bumps_version(engine, tmp_path):
    (group,) = engine.generate([PROMPT], n=1, seed=3)
    c = group[0]
    before = teacher_forced_logprobs(engine, c.prompt_ids, c.completion_ids)
    torch.testing.assert_close(torch.tensor(c.logprobs), before, atol=1e-4, rtol=0)  # B = 0: base policy

    state = random_adapter(engine, scale=0.3, seed=0)
    engine.load_adapter(state, version=3)
    assert engine.policy_version() == 3
    after = teacher_forced_logprobs(engine, c.prompt_ids, c.completion_ids)
    assert (after - before).abs().max() > 0.1
    (new_group,) = engine.generate([PROMPT], n=1, seed=3)
    assert new_group[0].policy_version == 3
    assert new_group[0].completion_ids != c.completion_ids

    # From a saved adapter folder: the same weights, a new version.
    save_file({k: v.contiguous() for k, v in random_adapter(engine, 0.3, seed=1).items()},
              str(tmp_path / "adapter_model.safetensors"))
    engine.load_adapter(str(tmp_path), version=4)
    assert engine.policy_version() == 4
    loaded = get_peft_model_state_dict(engine.model)
    expected = random_adapter(engine, 0.3, seed=1)
    assert all(torch.equal(loaded[k], expected[k]) for k in expected)

    # Zero adapter: back to the warm-started policy exactly.
    engine.load_adapter({k: torch.zeros_like(v) for k, v in state.items()}, version=5)
    torch.testing.assert_close(teacher_forced_logprobs(engine, c.prompt_ids, c.completion_ids), before)


def test_load_adapter_rejects_foreign_keys(engine):
    state = random_adapter(engine, 0.1, seed=0)
    state.pop(next(iter(state)))
    with pytest.raises(ValueError, match="adapter keys differ"):
        engine.load_adapter(state, version=9)
    assert engine.policy_version() != 9


@pytest.fixture
def local_ray():
    init_ray(RayConfig(num_cpus=2))
    yield
    ray.shutdown()


def test_ray_actor_generates_a_group(policy_cfg, engine, local_ray):
    cfg = BrushRLConfig(
        policy=policy_cfg,
        rollout=RolloutConfig(max_new_tokens=64, group_size=2),
        learner={"lora": {"r": 4, "alpha": 8}},
    )
    actor = make_rollout_actor(cfg, SYSTEM)
    ray.get(actor.__ray_ready__.remote(), timeout=600)  # a fresh worker imports torch and loads the model
    (group,) = ray.get(actor.generate.remote([PROMPT], cfg.rollout.group_size, 0), timeout=120)
    assert len(group) == 2
    assert all(c.policy_version == 0 and len(c.completion_ids) == len(c.logprobs) > 0 for c in group)
    threads = ray.get(actor.__ray_call__.remote(lambda self: torch.get_num_threads()))
    assert threads == policy_cfg.torch_threads
    ray.get(actor.load_adapter.remote(random_adapter(engine, 0.2, seed=0), 1))  # same LoRA shape
    assert ray.get(actor.policy_version.remote()) == 1
    (group,) = ray.get(actor.generate.remote([PROMPT], 2, 0))
    assert all(c.policy_version == 1 for c in group)
