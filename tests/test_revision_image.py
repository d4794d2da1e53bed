"""The painting as an image in the next user turn (``rollout.revision.show_image``) for a
vision-language policy: the rollout engine's revision turn, the learner's log-probs and loss with
the images, and the config's refusals.

Real parts: a tiny random Idefics3 (``scripts/make_tiny_judge_vlm.py``: SigLIP-style vision tower,
pixel-shuffle connector, Llama text model; PIL image processor, 16 image tokens per image) loaded
as a brushrl policy, PEFT LoRA on it as the rollout engine and the learner wrap it, TRL's GRPO loss.
No timing assertions (a loaded 2-core box).
"""

from __future__ import annotations

import copy
import importlib.util
import io
import math
from pathlib import Path

import pytest
import torch
from PIL import Image

from brushrl.config import ConfigError, LearnerConfig, LoraConfig, PolicyConfig, RolloutConfig, parse_config
from brushrl.learner import TrainSample
from brushrl.learner.batch import collate
from brushrl.learner.grpo import GRPOLearner
from brushrl.prompts import SYSTEM_PROMPT
from brushrl.types import Completion, Critique, GateVerdict, Sample, Trajectory
from test_revision import _grads as revision_grads

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parents[1]
PROMPT = "Paint a coral poppy in loose watercolour."
IMAGE_TOKENS = 16  # (112 / 14)^2 / 2^2: make_tiny_judge_vlm's image_seq_len


def _png(colour, size=600) -> bytes:
    buf = io.BytesIO()
    img = Image.new("RGBA", (size, size), (255, 255, 255, 255))
    img.paste(Image.new("RGBA", (size // 2, size // 3), colour), (size // 4, size // 3))
    img.save(buf, "PNG")
    return buf.getvalue()


@pytest.fixture(scope="module")
def tiny_vlm(tmp_path_factory) -> Path:
    spec = importlib.util.spec_from_file_location("make_tiny_judge_vlm", ROOT / "scripts/make_tiny_judge_vlm.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.build(tmp_path_factory.mktemp("tiny_vlm_policy"))


def _rollout_cfg(**kw) -> RolloutConfig:
    return RolloutConfig(max_new_tokens=kw.pop("max_new_tokens", 16), turns=3, revision={"show_image": True}, **kw)


@pytest.fixture(scope="module")
def engine(tiny_vlm):
    from brushrl.rollout.transformers_engine import TransformersEngine

    return TransformersEngine(PolicyConfig(model=str(tiny_vlm)), _rollout_cfg(), SYSTEM_PROMPT,
                              LoraConfig(r=4, alpha=8))


@pytest.fixture(scope="module")
def turns(engine):
    """Two members: turn 1, turn 2 shown a painting (member 0) or none (member 1: no render),
    turn 3 of member 0 shown a second painting."""
    with torch.no_grad():  # a non-zero adapter, so that the LoRA weights shape every log-prob below
        gen = torch.Generator().manual_seed(7)
        for name, p in engine.model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.05)
    first = engine.generate([PROMPT], 2, seed=0)[0]
    second = engine.revise([(first[0], Critique("The top of the canvas is empty.", image=_png("#d08070"))),
                            (first[1], Critique("The sketch did not run."))], seed=1)
    third = engine.revise([(second[0], Critique("Paint more petals.", image=_png("#3060c0")))], seed=2)[0]
    return first, second, third


def _model_logprobs(model, c: Completion) -> torch.Tensor:
    """Log-probs of ``c.completion_ids`` by one unpadded forward on the whole sequence, with its images."""
    ids = torch.tensor([c.prompt_ids + c.completion_ids])
    extra = {k: v.unsqueeze(0) for k, v in (c.vision or {}).items()}
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=torch.ones_like(ids), **extra).logits.float()
    logps = logits.log_softmax(-1)[0, len(c.prompt_ids) - 1 : -1]
    return logps.gather(-1, torch.tensor(c.completion_ids)[:, None])[:, 0]


def test_the_revision_turn_shows_the_painting_and_extends_the_previous_turn(engine, turns):
    first, second, third = turns
    tok = engine.tokenizer
    image_id, fake_id = tok.convert_tokens_to_ids("<image>"), tok.convert_tokens_to_ids("<fake_token_around_image>")
    for prev, new in ((first[0], second[0]), (first[1], second[1]), (second[0], third)):
        seen = prev.prompt_ids + prev.completion_ids
        assert new.prompt_ids[: len(seen)] == seen and new.prompt == PROMPT and new.policy_version == 0
        assert "Here is a critique" in tok.decode(new.prompt_ids[len(seen):])
    # member 0: the painting's placeholder expanded into its image tokens in the critique turn
    delta = second[0].prompt_ids[len(first[0].prompt_ids) + len(first[0].completion_ids):]
    assert delta.count(image_id) == IMAGE_TOKENS and delta.count(fake_id) == 2
    assert first[0].vision is None and second[0].vision["pixel_values"].shape == (1, 3, 112, 112)
    assert second[0].vision["pixel_attention_mask"].shape == (1, 112, 112)
    # member 1 had no painting: a text turn, exactly the text-only context
    from brushrl.conversation import next_context

    assert second[1].vision is None and image_id not in second[1].prompt_ids
    assert second[1].prompt_ids == next_context(tok, SYSTEM_PROMPT, first[1], "The sketch did not run.")
    # turn 3: both paintings, in order
    assert third.prompt_ids.count(image_id) == 2 * IMAGE_TOKENS
    assert third.vision["pixel_values"].shape == (2, 3, 112, 112)
    assert torch.equal(third.vision["pixel_values"][0], second[0].vision["pixel_values"][0])


def test_behaviour_logprobs_are_the_models_on_the_whole_sequence_with_its_images(engine, turns):
    first, second, third = turns
    for c in (*first, *second, third):
        assert len(c.logprobs) == len(c.completion_ids)
        assert torch.allclose(torch.tensor(c.logprobs), _model_logprobs(engine.model, c), atol=2e-4)
    # and the image is an input of them: another painting, other log-probs of the same tokens
    other = copy.copy(second[0])
    other.vision = engine_vision(engine, _png("#20a040"))
    assert (_model_logprobs(engine.model, other) - torch.tensor(second[0].logprobs)).abs().max() > 1e-4


def engine_vision(engine, png: bytes) -> dict:
    from brushrl import vision

    out = engine.processor(text=["<image>"], images=[[vision.png_image(png)]], return_tensors="pt")
    return vision.from_processor(out)


# ------------------------------------------------------------------------------------ learner
def _sample(c: Completion, turn: int, reward=None) -> Sample:
    return Sample(c, "", 0, 0, 1, GateVerdict("pass"), reward=reward, turn=turn, member=0)


@pytest.fixture(scope="module")
def learner(tiny_vlm, engine):
    """The learner on the same checkpoint, its LoRA weights the engine's (the adapter the engine
    sampled with), as a weight sync would leave them."""
    from brushrl.policy import load_pretrained

    model, tokenizer = load_pretrained(str(tiny_vlm))
    from peft import get_peft_model_state_dict, set_peft_model_state_dict

    learner = GRPOLearner(model, tokenizer, LearnerConfig(lr=1e-3, warmup_steps=0, lora={"r": 4, "alpha": 8}), 4,
                          group_size=2)
    with torch.no_grad():
        set_peft_model_state_dict(learner.model, get_peft_model_state_dict(engine.model))
    return learner


def _grads(learner, samples, advantages):
    """``test_revision._grads`` (TRL's loss and the LoRA gradients), then back to eval mode: the
    tests here compare log-probs afterwards."""
    out = revision_grads(learner, samples, advantages)
    learner.model.eval()
    return out


def test_the_learner_recomputes_the_behaviour_logprobs_with_the_images(learner, engine, turns):
    first, second, third = turns
    traj = Trajectory(0, [_sample(first[0], 1), _sample(second[0], 2), _sample(third, 3)], 1.0)
    whole = TrainSample.from_trajectory(traj)
    assert torch.equal(whole.vision["pixel_values"], third.vision["pixel_values"])
    mine = torch.tensor(learner.completion_logprobs(whole.prompt_ids, whole.completion_ids, whole.vision))
    mask = torch.tensor(whole.loss_mask, dtype=torch.bool)
    assert torch.allclose(mine[mask], torch.tensor(whole.logprobs)[mask], atol=2e-4)
    # another second painting: turn 1 unchanged (it comes before the image), turns 2 and 3 change
    other = dict(whole.vision)
    other["pixel_values"] = whole.vision["pixel_values"].clone()
    other["pixel_values"][0] = engine_vision(engine, _png("#20a040"))["pixel_values"][0]
    moved = torch.tensor(learner.completion_logprobs(whole.prompt_ids, whole.completion_ids, other))
    n1 = len(first[0].completion_ids)
    assert torch.equal(moved[:n1], mine[:n1])
    turn2 = slice(len(whole.completion_ids) - len(third.completion_ids) - len(second[0].completion_ids),
                  len(whole.completion_ids) - len(third.completion_ids))
    assert (moved[turn2] - mine[turn2]).abs().max() > 1e-4


def test_a_two_turn_image_trajectory_trains_and_its_image_tokens_carry_no_loss(learner, engine, turns):
    first, second, _ = turns
    tok = engine.tokenizer
    image_id = tok.convert_tokens_to_ids("<image>")
    good = TrainSample.from_trajectory(Trajectory(0, [_sample(first[0], 1), _sample(second[0], 2)], 1.0))
    plain = TrainSample.from_trajectory(Trajectory(1, [_sample(first[1], 1), _sample(second[1], 2)], 0.0))
    assert plain.vision is None and good.vision["pixel_values"].shape == (1, 3, 112, 112)
    # every image token lies in the critique turn: loss mask 0
    assert all(m == 0 for t, m in zip(good.completion_ids, good.loss_mask) if t == image_id)
    assert good.completion_ids.count(image_id) == IMAGE_TOKENS
    batch = collate([good, plain], [1.0, -1.0], learner.pad_token_id)
    assert batch["pixel_values"].shape == (2, 1, 3, 112, 112) and batch["num_images"] == [1, 0]
    assert float(batch["pixel_values"][1].abs().sum()) == 0.0  # the text-only row's slot: an all-zero image

    loss, grads = _grads(learner, [good, plain], [1.0, -1.0])
    lora = {n: g for n, g in grads.items() if "lora_" in n}
    assert math.isfinite(loss) and lora and any(float(g.abs().sum()) > 0 for g in lora.values())
    # the loss's forward takes the image: another painting, other gradients
    shown_other = copy.deepcopy(good)
    shown_other.vision = engine_vision(engine, _png("#20a040"))
    _, grads_other = _grads(learner, [shown_other, plain], [1.0, -1.0])
    assert max(float((grads_other[n] - g).abs().max()) for n, g in lora.items()) > 1e-6
    # behaviour log-probs on the critique/image positions are unused: noise there changes nothing
    noisy = copy.deepcopy(good)
    noisy.logprobs = [lp if m else lp - 3.0 for lp, m in zip(noisy.logprobs, noisy.loss_mask)]
    loss_noisy, grads_noisy = _grads(learner, [noisy, plain], [1.0, -1.0])
    assert loss_noisy == pytest.approx(loss, abs=1e-6)
    assert all(torch.allclose(grads_noisy[n], g, atol=1e-7) for n, g in grads.items())
    # ... while without the mask they would carry loss
    unmasked = copy.deepcopy(noisy)
    unmasked.loss_mask = None
    loss_unmasked, _ = _grads(learner, [unmasked, plain], [1.0, -1.0])
    assert abs(loss_unmasked - loss) > 1e-4

    # one optimizer step through GRPOLearner.step on the group of image trajectories
    group = [Trajectory(0, [_sample(first[0], 1), _sample(second[0], 2)], 1.0),
             Trajectory(1, [_sample(first[1], 1), _sample(second[1], 2)], 0.0)]
    metrics = learner.step([group])
    assert metrics["skipped"] == 0.0 and math.isfinite(metrics["loss"]) and metrics["grad_norm"] > 0
    assert metrics["n_tokens"] == sum(len(s.completion.completion_ids) for t in group for s in t.turns)


# ------------------------------------------------------------------------------------ config
def test_config_refuses_show_image_with_the_tiny_text_policy_and_with_vllm():
    with pytest.raises(ConfigError, match="rollout.revision.show_image.*tiny policy is a text-only"):
        parse_config({"rollout": {"turns": 2, "revision": {"show_image": True}}})
    with pytest.raises(ConfigError, match="rollout.revision.show_image.*rollout.backend 'transformers'"):
        parse_config({"policy": {"model": "/models/smolvlm"},
                      "rollout": {"backend": "vllm", "adapter_dir": "/tmp/a", "turns": 2,
                                  "revision": {"show_image": True}}})
    cfg = parse_config({"policy": {"model": "/models/smolvlm"},
                        "rollout": {"turns": 2, "revision": {"show_image": True}}})
    assert cfg.rollout.revision.show_image
    assert parse_config({}).rollout.revision.show_image is False


def test_a_text_only_policy_cannot_be_shown_images(tiny_vlm, tmp_path):
    """The engine's processor loader refuses a checkpoint without an image processor (a text-only
    policy's folder: a tokenizer, no processor)."""
    from transformers import AutoTokenizer

    from brushrl.policy.model import load_processor

    import json

    AutoTokenizer.from_pretrained(tiny_vlm).save_pretrained(tmp_path)
    cfg_path = tmp_path / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg.pop("processor_class", None)  # a text model's tokenizer names no processor
    cfg_path.write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match="needs a vision-language policy"):
        load_processor(str(tmp_path))
    assert load_processor(str(tiny_vlm)).image_processor is not None


# ------------------------------------------------------------------------------------ producer
def test_the_producer_sends_the_painting_with_the_critique_only_when_asked():
    """``GroupProducer._shown``: with show_image the engine's request carries the turn's PNG (a copy
    of the critique: the sample's own keeps none); a turn without a render, or show_image off,
    sends exactly the sample's critique."""
    from types import SimpleNamespace

    from brushrl.orchestrator.producer import GroupProducer
    from brushrl.types import RenderResult

    png = _png("#d08070")
    c = Completion(PROMPT, "", [1, 2], [3], [0.0], 0)
    rendered = Sample(c, "", 0, 0, 1, GateVerdict("pass"), render=RenderResult("ok", png),
                      critique=Critique("Paint more."))
    unrendered = Sample(c, "", 0, 0, 1, GateVerdict("syntax_error"), critique=Critique("It did not parse."))
    on = SimpleNamespace(cfg=parse_config({"policy": {"model": "/models/smolvlm"},
                                           "rollout": {"turns": 2, "revision": {"show_image": True}}}))
    shown = GroupProducer._shown(on, rendered)
    assert shown.image == png and shown.text == "Paint more." and rendered.critique.image is None
    assert GroupProducer._shown(on, unrendered) == unrendered.critique
    assert GroupProducer._shown(on, unrendered).image is None
    off = SimpleNamespace(cfg=parse_config({"rollout": {"turns": 2}}))
    assert GroupProducer._shown(off, rendered) is rendered.critique


def test_vision_inputs_concatenate_per_context_and_stack_per_batch():
    """``brushrl.vision``: a context's images in order, a batch zero-padded on the image and pixel
    axes (Idefics3 drops an all-zero image; a padded pixel has mask 0)."""
    from brushrl import vision

    a = {"pixel_values": torch.ones(1, 3, 4, 4), "pixel_attention_mask": torch.ones(1, 4, 4, dtype=torch.long)}
    b = {"pixel_values": torch.full((1, 3, 4, 2), 2.0), "pixel_attention_mask": torch.ones(1, 4, 2, dtype=torch.long)}
    both = vision.concat([None, a, b])
    assert both["pixel_values"].shape == (2, 3, 4, 4) and vision.num_images(both) == 2
    assert both["pixel_attention_mask"][1].sum() == 8 and float(both["pixel_values"][1, :, :, 2:].abs().sum()) == 0
    assert vision.concat([None, None]) is None and vision.stack([None, None]) is None
    batch = vision.stack([a, None, both])
    assert batch["pixel_values"].shape == (3, 2, 3, 4, 4) and batch["pixel_attention_mask"].dtype == torch.long
    assert float(batch["pixel_values"][0, 1].abs().sum()) == 0 and float(batch["pixel_values"][1].abs().sum()) == 0
    with pytest.raises(ValueError, match="different keys"):
        vision.stack([a, {"pixel_values": torch.ones(1, 3, 4, 4)}])
