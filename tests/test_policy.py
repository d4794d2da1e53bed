"""Policy stage: corpus-trained tokenizer, tiny Qwen3 model, SFT warm start and its cache, and
loading a saved causal LM by path. Real ``tokenizers``/``transformers`` parts, tiny sizes."""

from __future__ import annotations

import json
import random
import re
import time

import pytest
import torch

from brushrl.config import PolicyConfig, SFTConfig, TinyModelConfig
from brushrl.corpus.build import as_reply
from brushrl.policy import build_tiny_model, load_policy, train_tokenizer, warm_start
from brushrl.policy.sft import DONE_MARKER, IGNORE, collate, encode_examples

torch.set_num_threads(1)

SYSTEM = (
    "You paint watercolours by writing a p5.js 2.x sketch that uses the p5.brush library.\n"
    "Use only brush.fill, brush.beginShape, brush.vertex, brush.endShape and brush.circle."
)
TEMPLATE = "Paint {subject} in loose watercolour."
#: Tiny sizes that train in seconds on one thread.
TINY = TinyModelConfig(
    vocab_size=600, hidden_size=64, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
    intermediate_size=128, max_position_embeddings=1024,
)


def standin_sketch(rng: random.Random) -> str:
    """A small valid p5.brush sketch in the corpus style (skeleton + filled shapes)."""
    lines = [
        "async function setup() {", "  createCanvas(600, 600, WEBGL);", "  brush.scaleBrushes(3);",
        "  angleMode(DEGREES);", "  noLoop();", "}", "", "function draw() {",
        "  translate(-width / 2, -height / 2);", '  background("#fdf8ee");', "  brush.noStroke();",
    ]
    for _ in range(rng.randint(2, 3)):
        lines.append(f'  brush.fill("{rng.choice(["#e8896b", "#d94f7a", "#f2c14e"])}", {rng.randint(170, 230)});')
        lines.append(f"  brush.beginShape({rng.choice(['0.4', '0.5'])});")
        lines += [f"  brush.vertex({rng.randint(150, 450)}, {rng.randint(150, 450)});" for _ in range(4)]
        lines.append("  brush.endShape(true);")
    lines.append(f"  brush.circle(300, 300, {rng.randint(15, 30)}, 0.3);")
    lines.append("}")
    return "\n".join(lines)


def standin_corpus(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """``n`` (subject, code) pairs, a stand-in for ``brushrl.corpus``."""
    rng = random.Random(seed)
    subjects = ["a peach hibiscus", "a coral poppy", "a violet iris"]
    return [(subjects[i % len(subjects)], standin_sketch(rng)) for i in range(n)]


def tiny_policy_cfg(cache_dir, **sft) -> PolicyConfig:
    sft_cfg = SFTConfig(cache_dir=str(cache_dir), **{"epochs": 25.0, "lr": 5e-3, "batch_size": 4, **sft})
    return PolicyConfig(tiny=TINY, sft=sft_cfg)


def reply_loss(path, corpus) -> float:
    """Mean cross-entropy (nats/token) of the saved model on the corpus replies."""
    model, tok = load_policy(PolicyConfig(model=str(path)))
    batch = collate(encode_examples(tok, corpus, SYSTEM, TEMPLATE), tok.pad_token_id)
    with torch.no_grad():
        return model(**batch).loss.item()


# ---------------------------------------------------------------- tokenizer
def test_tokenizer_chat_template_and_special_tokens():
    corpus = standin_corpus(6)
    tok = train_tokenizer([SYSTEM] + [as_reply(c) for _, c in corpus], vocab_size=500)
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    assert tok.eos_token_id != tok.pad_token_id
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Paint a rose."}]
    text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert text == (
        f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\nPaint a rose.<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert ids.count(tok.convert_tokens_to_ids("<|im_start|>")) == 3
    assert ids.count(tok.eos_token_id) == 2
    # Byte-level: any text round-trips, including characters never seen in training.
    for sample in (as_reply(corpus[0][1]), "brush.wash(\"été\") // ✓ 🌺"):
        assert tok.decode(tok(sample, add_special_tokens=False)["input_ids"]) == sample


def test_tokenizer_numbers_whole_and_each_colour_one_token():
    corpus = standin_corpus(30)
    texts = [as_reply(c) for _, c in corpus]
    tok = train_tokenizer(texts, vocab_size=2000)
    colours = {c for t in texts for c in re.findall(r"#[0-9a-f]{6}", t)}
    assert len(tok) <= 2000 + len(colours)
    # Every colour seen in training is exactly one token, wherever it stands.
    for colour in sorted(colours)[:20]:
        text = f'brush.fill("{colour}", 200);'
        pieces = tok.convert_ids_to_tokens(tok(text, add_special_tokens=False)["input_ids"])
        assert colour in pieces and "200" in pieces, pieces
        assert tok.decode(tok(text, add_special_tokens=False)["input_ids"]) == text
    # A number never merges with the code around it; an unseen colour still encodes (byte pieces).
    text = 'brush.fill("#F2c1A4", 1.25);'
    ids = tok(text, add_special_tokens=False, return_offsets_mapping=True)
    ends = {end for _, end in ids["offset_mapping"]}
    assert text.index("1.25") in ends and text.index("1.25") + 4 in ends
    assert tok.decode(ids["input_ids"]) == text
    # No BPE token mixes digits with other characters: colour tokens are the only such pieces.
    for piece in tok.get_vocab():
        if any(ch in "0123456789" for ch in piece) and piece not in colours:
            assert set(piece) <= set("0123456789."), piece


def test_tokenizer_rejects_too_small_vocab():
    with pytest.raises(ValueError):
        train_tokenizer(["abc"], vocab_size=100)


# ---------------------------------------------------------------- model
def test_build_tiny_model_default_size():
    tok = train_tokenizer([as_reply(c) for _, c in standin_corpus(10)], vocab_size=2048)
    model = build_tiny_model(TinyModelConfig(), tok)
    n = model.num_parameters()
    assert 2_000_000 < n < 10_000_000, n
    assert model.config.vocab_size == len(tok)
    assert model.config.head_dim == 64
    assert model.generation_config.eos_token_id == tok.eos_token_id
    ids = torch.tensor([tok("brush.vertex(300, 300);")["input_ids"]])
    assert model(input_ids=ids).logits.shape == (1, ids.shape[1], len(tok))


def test_build_tiny_model_rejects_bad_heads():
    tok = train_tokenizer(["abc abc"], vocab_size=300)
    with pytest.raises(ValueError):
        build_tiny_model(TinyModelConfig(hidden_size=250, num_attention_heads=4), tok)


# ---------------------------------------------------------------- SFT
def test_examples_train_only_on_reply_tokens():
    corpus = standin_corpus(3)
    tok = train_tokenizer([SYSTEM] + [as_reply(c) for _, c in corpus], vocab_size=500)
    examples = encode_examples(tok, corpus, SYSTEM, TEMPLATE)
    for (subject, code), ex in zip(corpus, examples):
        prompt = tok.apply_chat_template(
            [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TEMPLATE.format(subject=subject)}],
            add_generation_prompt=True, tokenize=False,
        )
        p = len(tok(prompt, add_special_tokens=False)["input_ids"])
        assert ex.labels[:p] == [IGNORE] * p
        assert ex.labels[p:] == ex.input_ids[p:]
        assert ex.labels[-1] == tok.eos_token_id
        assert tok.decode(ex.input_ids[p:], skip_special_tokens=True) == as_reply(code)


def test_warm_start_learns_and_caches(tmp_path):
    corpus = standin_corpus(8)
    untrained = warm_start(tiny_policy_cfg(tmp_path, enabled=False), corpus, SYSTEM, TEMPLATE, threads=1)
    t0 = time.perf_counter()
    trained = warm_start(tiny_policy_cfg(tmp_path), corpus, SYSTEM, TEMPLATE, threads=1)
    first_s = time.perf_counter() - t0
    assert trained != untrained and trained.parent == tmp_path
    summary = json.loads((trained / DONE_MARKER).read_text())
    assert summary["examples"] == 8 and summary["steps"] == 50 and summary["final_loss"] > 0

    # The warm start learnt the corpus: reply loss far below the untrained model's (~ln V).
    assert reply_loss(trained, corpus) < 0.6 * reply_loss(untrained, corpus)

    # Cache hit: same inputs -> same folder, no training (nothing in it is rewritten).
    stamps = {p: p.stat().st_mtime_ns for p in trained.rglob("*")}
    t0 = time.perf_counter()
    again = warm_start(tiny_policy_cfg(tmp_path), corpus, SYSTEM, TEMPLATE, threads=1)
    hit_s = time.perf_counter() - t0
    assert again == trained and {p: p.stat().st_mtime_ns for p in trained.rglob("*")} == stamps
    assert hit_s < first_s / 2  # loose: a loaded machine slows both
    # Any input change is a different entry; no temporary folder is left behind.
    other = warm_start(tiny_policy_cfg(tmp_path, enabled=False), corpus, SYSTEM, "Paint {subject}.", threads=1)
    assert other not in (trained, untrained)
    entries = [p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock")]  # the keys' lock files stay
    assert sorted(entries) == sorted(p.name for p in (trained, untrained, other))


def test_a_warm_start_being_trained_elsewhere_is_waited_for_not_trained_again(tmp_path, caplog):
    """While another process holds a key's lock (it is training that entry), ``warm_start`` waits
    for it and returns the entry it finished, without training: the lock is seen blocked in
    /proc/locks (an event, not a sleep), the entry then written as the other process would."""
    import fcntl
    import threading

    from brushrl.policy.sft import cache_key

    corpus = standin_corpus(4)
    cfg = tiny_policy_cfg(tmp_path)
    final = tmp_path / cache_key(cfg, corpus, SYSTEM, TEMPLATE, None)
    got: list = []
    with open(tmp_path / f".{final.name}.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        waiter = threading.Thread(target=lambda: got.append(warm_start(cfg, corpus, SYSTEM, TEMPLATE, threads=1)))
        with caplog.at_level("INFO", logger="brushrl.policy.sft"):
            waiter.start()
            deadline = time.monotonic() + 120
            while not any(" -> FLOCK " in line for line in open("/proc/locks")):  # the waiter is blocked on it
                assert waiter.is_alive() and time.monotonic() < deadline, "warm_start did not wait for the lock"
                time.sleep(0.01)
            final.mkdir()
            (final / DONE_MARKER).write_text(json.dumps({"trained_by": "the other process"}))
            fcntl.flock(held, fcntl.LOCK_UN)
            waiter.join(timeout=120)
    assert got == [final]
    assert json.loads((final / DONE_MARKER).read_text()) == {"trained_by": "the other process"}
    assert "trained by another process while this one waited" in caplog.text
    assert "training it now" not in caplog.text


def test_warm_start_rejects_empty_corpus(tmp_path):
    with pytest.raises(ValueError):
        warm_start(tiny_policy_cfg(tmp_path), [], SYSTEM, TEMPLATE)


# ---------------------------------------------------------------- loading by path
def test_load_policy_from_local_path(tmp_path):
    tok = train_tokenizer([SYSTEM] + [as_reply(c) for _, c in standin_corpus(4)], vocab_size=400)
    torch.manual_seed(0)
    model = build_tiny_model(TINY, tok)
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)

    loaded, loaded_tok = load_policy(PolicyConfig(model=str(tmp_path)))
    assert type(loaded).__name__ == "Qwen3ForCausalLM" and not loaded.training
    ids = torch.tensor([loaded_tok("brush.vertex(1, 2);", add_special_tokens=False)["input_ids"]])
    with torch.no_grad():
        assert torch.equal(loaded(input_ids=ids).logits, model(input_ids=ids).logits)
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "hi"}]
    assert loaded_tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False).endswith(
        "<|im_start|>assistant\n"
    )
    assert loaded_tok.eos_token == "<|im_end|>"

    half, _ = load_policy(PolicyConfig(model=str(tmp_path), dtype="bfloat16"))
    assert next(half.parameters()).dtype == torch.bfloat16


def test_load_policy_missing_path_raises(tmp_path):
    with pytest.raises(OSError):
        load_policy(PolicyConfig(model=str(tmp_path / "nowhere")))


# ---------------------------------------------------------------- measuring tool
def test_check_tool_runs_end_to_end(tmp_path, capsys):
    """``python -m brushrl.rollout.check`` on the real corpus, a 1-layer model and two short samples."""
    from brushrl.rollout.check import main

    summary = main([
        "--groups", "1", "--n", "2", "--threads", "1", "--set",
        "policy.tiny.hidden_size=64", "policy.tiny.num_hidden_layers=1", "policy.tiny.num_attention_heads=2",
        "policy.tiny.num_key_value_heads=1", "policy.tiny.intermediate_size=128", "policy.sft.variations=1",
        "policy.sft.epochs=0.1", f"policy.sft.cache_dir={tmp_path}", "rollout.max_new_tokens=24",
    ])
    assert json.loads(capsys.readouterr().out) == summary
    assert summary["samples"] == 2 and sum(summary["verdicts"].values()) == 2
    assert 0 < summary["tokens_per_completion"] <= 24 and summary["sft_examples"] > 10
    assert 0.0 <= summary["static_pass_rate"] <= 1.0


def test_sft_seed_lets_run_seeds_share_one_warm_start(monkeypatch):
    """``policy.sft.seed`` fixes the corpus variations the warm start trains on (None: ``run.seed``),
    so runs of several seeds (``scripts/demo_seeds.py``) can start from the same base."""
    import brushrl.policy.sft as sft_mod
    from brushrl.config import load_config

    seen = []
    monkeypatch.setattr(sft_mod, "warm_start", lambda policy, corpus, *a, **k: seen.append(corpus) or "cached")

    def corpus(**overrides):
        cfg = load_config("configs/local.yaml", {"policy.sft.max_examples": 40, **overrides})
        assert sft_mod.warm_start_policy(cfg, SYSTEM).policy.model == "cached"
        return seen[-1]

    assert corpus(**{"run.seed": 1}) != corpus(**{"run.seed": 2})  # each seed its own variations
    assert corpus(**{"run.seed": 1, "policy.sft.seed": 0}) == corpus(**{"run.seed": 2, "policy.sft.seed": 0}) \
        == corpus(**{"run.seed": 0})
    # The key holds the corpus drawn, not the field: a run with sft.seed 0 finds the entry a seed-0 run cached.
    from brushrl.policy.sft import cache_key

    cfg = load_config("configs/local.yaml", {})
    assert cache_key(cfg.policy, seen[-1], SYSTEM, TEMPLATE) == cache_key(
        cfg.policy.model_copy(update={"sft": cfg.policy.sft.model_copy(update={"seed": 0})}), seen[-1], SYSTEM, TEMPLATE)


def test_subject_words_are_whole_tokens_in_the_prompt_and_the_reply():
    """Issue 35: BPE merged a prompt's colour word with its neighbours differently in each prompt
    ("red " vs "re" + "d"), so no token meant "red". With ``words`` each is one token, the same in
    the user prompt and in the reply's subject comment; an unknown word still encodes."""
    from brushrl.corpus.build import build_corpus
    from brushrl.corpus.colours import COLOUR_WORDS
    from brushrl.policy.sft import tokenizer_texts
    from brushrl.policy.tokenizer import subject_words

    items = build_corpus(2)
    corpus = [(i.subject, i.code) for i in items]
    words = subject_words([s for s, _ in corpus] + list(COLOUR_WORDS))
    assert "a" not in words and {"red", "tulip", "hibiscus", "orange"} <= set(words)
    tok = train_tokenizer(tokenizer_texts(corpus, SYSTEM, TEMPLATE), 1500, words=words)
    for subject in ("a red poppy", "a red tulip", "a pink lotus", "a blue tulip", "an orange marigold"):
        colour, species = subject.split()[-2:]
        for text in (TEMPLATE.format(subject=subject), f"  // {subject}\n  const wash = "):
            pieces = tok.convert_ids_to_tokens(tok(text, add_special_tokens=False)["input_ids"])
            decoded = [tok.convert_tokens_to_string([p]) for p in pieces]
            assert colour in decoded and species in decoded, (text, decoded)
    odd = "Paint a chartreuse chrysanthemum in loose watercolour."
    assert tok.decode(tok(odd, add_special_tokens=False)["input_ids"]) == odd


def test_steer_weight_weighs_the_header_and_is_the_plain_loss_at_one():
    """``policy.sft.steer_weight`` weighs the reply's header (subject comment + petal constants) in
    the SFT loss; at 1 the weighted loss is exactly the model's own causal-LM loss."""
    from brushrl.corpus.build import build_corpus
    from brushrl.policy.sft import collate, encode_examples, header_weights, sft_loss

    items = build_corpus(1)[:4]
    corpus = [(i.subject, i.code) for i in items]
    tok = train_tokenizer([as_reply(c) for _, c in corpus] + [s for s, _ in corpus], vocab_size=600)
    reply = as_reply(corpus[0][1])
    w = header_weights(tok, reply, 10.0)
    pieces = tok.convert_ids_to_tokens(tok(reply, add_special_tokens=False)["input_ids"])
    heavy = tok.convert_tokens_to_string([p for p, x in zip(pieces, w) if x == 10.0])
    assert corpus[0][0] in heavy and "const wash" in heavy and "brush.fill(" not in heavy.split("const")[1]
    assert 10 < sum(x == 10.0 for x in w) < 60 and len(w) > 300
    model = build_tiny_model(TinyModelConfig(hidden_size=64, num_hidden_layers=1, num_attention_heads=2,
                                             num_key_value_heads=1, intermediate_size=128), tok)
    plain = collate(encode_examples(tok, corpus, SYSTEM, TEMPLATE), tok.pad_token_id)
    ones = collate(encode_examples(tok, corpus, SYSTEM, TEMPLATE, steer_weight=1.0), tok.pad_token_id)
    steered = collate(encode_examples(tok, corpus, SYSTEM, TEMPLATE, steer_weight=10.0), tok.pad_token_id)
    assert "weights" not in plain and "weights" not in ones and "weights" in steered
    with torch.no_grad():
        base = model(**plain).loss
        forced = {**plain, "weights": torch.ones_like(plain["input_ids"], dtype=torch.float32)}
        torch.testing.assert_close(sft_loss(model, forced), base, rtol=1e-5, atol=1e-5)
        assert not torch.isclose(sft_loss(model, steered), base)


def test_sft_threads_follow_the_environment_override(monkeypatch):
    """``BRUSHRL_SFT_THREADS`` sets the SFT's torch threads (the suite's xdist workers use 1); unset,
    every core this process may run on; a value that is not a positive integer is refused by name."""
    from brushrl.policy.sft import sft_threads

    monkeypatch.delenv("BRUSHRL_SFT_THREADS", raising=False)
    import os

    assert sft_threads() == len(os.sched_getaffinity(0))
    monkeypatch.setenv("BRUSHRL_SFT_THREADS", "3")
    assert sft_threads() == 3
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv("BRUSHRL_SFT_THREADS", bad)
        with pytest.raises(ValueError, match="BRUSHRL_SFT_THREADS"):
            sft_threads()
