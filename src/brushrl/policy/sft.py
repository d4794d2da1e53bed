"""Warm start: supervised fine-tuning of the tiny policy on the sketch corpus, cached on disk.

A randomly initialised model never writes a sketch, so GRPO would see only zero rewards. Before
RL we train the tokenizer and the tiny model on (chat prompt -> fenced sketch) pairs, with the loss
on the reply tokens only, until sampling at temperature 1 mostly reproduces the corpus style.

The result is cached under ``<cfg.sft.cache_dir>/<key>/`` where ``key`` hashes everything that
determines it (model and SFT config, corpus, system prompt, prompt template, this module's
``FORMAT_VERSION``). The folder is written under a temporary name and renamed into place after its
``done`` marker, so a reader never sees a half-written entry.

brushrl ships the entry of the CPU demo's config (``configs/local.yaml``) in
``brushrl/policy/warm_starts/<key>/`` (``SHIPPED_DIR``, ~2.5 MB; built by ``make warm-start``,
``python -m brushrl.policy.ship``): a cache miss whose key is shipped copies it into the cache
instead of training (the demo's 24 epochs took 61 s on an H200, ``policy.sft.device: auto``; 8 epochs
took 811 s on a quiet 2-core machine, so 24 take ~40 min there).
Any change to what the key hashes (corpus, tokenizer or model config, prompts, this recipe) misses
the shipped entry and trains, saying so; ``tests/test_warm_start_shipped.py`` checks that the
shipped entry is still the demo config's key.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import math
import os
import random
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from transformers import PreTrainedTokenizerFast, get_cosine_schedule_with_warmup

from brushrl.config import BrushRLConfig, PolicyConfig
from brushrl.conversation import critique_turn_text
from brushrl.corpus.build import as_reply, build_corpus
from brushrl.corpus.colours import COLOUR_WORDS
from brushrl.policy.model import build_tiny_model
from brushrl.policy.revision import RevisionExample, RevisionExamples
from brushrl.policy.tokenizer import subject_words, train_tokenizer
from brushrl.prompts import chat_messages, revision_prompt, user_prompt

log = logging.getLogger(__name__)

#: Bump when the training recipe changes in a way the config does not capture (invalidates caches).
FORMAT_VERSION = 7
#: Name of the marker file of a complete cache entry.
DONE_MARKER = "done"
#: Warm starts shipped with the package, one folder per cache key (module docstring).
SHIPPED_DIR = Path(__file__).resolve().parent / "warm_starts"
#: Ignore index of ``torch.nn.functional.cross_entropy`` (prompt and padding positions).
IGNORE = -100
#: Batches are padded to a multiple of this many tokens. Under bf16 autocast every new batch shape
#: grew the process by ~40 MB (measured: 1.2 -> 2.2 GB in 40 steps of varying length, 5.5 GB in a
#: long run) and a few fixed widths keep it flat (1.18 GB after 60 steps).
PAD_MULTIPLE = 64
#: Share of optimizer steps spent in linear LR warm-up before the cosine decay.
WARMUP_FRACTION = 0.05


def cache_key(
    cfg: PolicyConfig, corpus: list[tuple[str, str]], system_prompt: str, prompt_template: str,
    revision_key: dict | None = None,
) -> str:
    """Hex SHA-256 (first 16 characters) of everything that determines a warm start.

    ``cfg.sft.cache_dir`` is left out so that a cache folder can be moved, ``cfg.sft.seed`` because
    the corpus it drew is in the key. Without revision examples (``revision_examples: 0``) neither
    that field nor ``revision_key`` enters the hash, so the key is the one it was before revision
    examples existed.
    """
    exclude = {"cache_dir", "seed", "device"} | (set() if cfg.sft.revision_examples else {"revision_examples"})
    payload = {
        "format": FORMAT_VERSION,
        "tiny": cfg.tiny.model_dump(mode="json"),
        "sft": cfg.sft.model_dump(mode="json", exclude=exclude),
        "corpus": corpus,
        "system_prompt": system_prompt,
        "prompt_template": prompt_template,
    }
    if cfg.sft.revision_examples and revision_key is not None:
        payload["revision"] = revision_key
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def tokenizer_texts(corpus: list[tuple[str, str]], system_prompt: str, prompt_template: str,
                    revisions: list[RevisionExample] = ()) -> list[str]:
    """The tokenizer's training texts: each chat turn of each SFT example (role line + content),
    without the special tokens. The system prompt thus weighs as often as the model reads it and
    BPE compresses it to a few dozen long tokens (measured: 289 -> 46 tokens for a 1.2 kB prompt),
    which makes both SFT and rollout prefill cheaper. Revision examples add their critique turns
    (so critique words become tokens) and their replies."""
    texts = []
    for subject, code in corpus:
        texts += [f"system\n{system_prompt}", f"user\n{user_prompt(subject, prompt_template)}"]
        texts.append(f"assistant\n{as_reply(code)}")
    for r in revisions:
        texts += [f"assistant\n{r.damaged_reply}", f"user\n{revision_prompt(r.critique)}"]
    return texts


@dataclass
class SFTExample:
    """One tokenised training pair: ``input_ids`` = prompt + reply + ``<|im_end|>``; ``labels``
    equal ``input_ids`` on reply tokens and ``IGNORE`` on prompt tokens; ``weights`` (None: all 1)
    the loss weight of each position (``steer_weight`` on the reply's header)."""

    input_ids: list[int]
    labels: list[int]
    weights: list[float] | None = None


#: The header every corpus painting opens with (``brushrl.corpus.build.with_header``): the subject
#: comment and the petal colour constants.
HEADER = re.compile(r"\n  // [^\n]*\n  const [^\n]*;\n")


def header_weights(tokenizer: PreTrainedTokenizerFast, reply: str, steer_weight: float) -> list[float]:
    """Per token of ``tokenizer(reply)``: ``steer_weight`` for a token overlapping the reply's
    header (``HEADER``), 1 elsewhere (all 1 for a reply without one)."""
    enc = tokenizer(reply, add_special_tokens=False, return_offsets_mapping=True)
    m = HEADER.search(reply)
    if m is None or steer_weight == 1.0:
        return [1.0] * len(enc["input_ids"])
    return [steer_weight if a < m.end() and b > m.start() else 1.0 for a, b in enc["offset_mapping"]]


def encode_examples(
    tokenizer: PreTrainedTokenizerFast,
    corpus: list[tuple[str, str]],
    system_prompt: str,
    prompt_template: str,
    steer_weight: float = 1.0,
) -> list[SFTExample]:
    """Tokenise (subject, code) pairs into SFT examples.

    The prompt is the chat template with the generation prompt (ending ``<|im_start|>assistant\\n``),
    exactly what the rollout engine feeds the model; the reply is encoded on its own and followed by
    the EOS id, so the model learns to stop. With ``steer_weight`` > 1 the reply's header tokens
    weigh that much in the loss (``header_weights``).
    """
    examples = []
    for subject, code in corpus:
        prompt = tokenizer.apply_chat_template(
            chat_messages(system_prompt, user_prompt(subject, prompt_template)),
            add_generation_prompt=True,
            tokenize=False,
        )
        prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        reply_ids = tokenizer(as_reply(code), add_special_tokens=False)["input_ids"]
        reply_ids.append(tokenizer.eos_token_id)
        weights = None
        if steer_weight != 1.0:
            weights = [1.0] * len(prompt_ids) + header_weights(tokenizer, as_reply(code), steer_weight) + [1.0]
        examples.append(SFTExample(prompt_ids + reply_ids, [IGNORE] * len(prompt_ids) + reply_ids, weights))
    return examples


def encode_revision_examples(
    tokenizer: PreTrainedTokenizerFast, revisions: list[RevisionExample], system_prompt: str, prompt_template: str,
) -> list[SFTExample]:
    """Tokenise revision conversations (``brushrl.policy.revision``) token by token as the rollout
    engine builds a revision turn (``brushrl.conversation``): prompt, damaged reply + EOS, the
    critique turn, then the repaired reply + EOS, which alone carries labels."""
    examples = []
    for r in revisions:
        user = user_prompt(r.subject, prompt_template)
        prompt = tokenizer.apply_chat_template(chat_messages(system_prompt, user), add_generation_prompt=True,
                                               tokenize=False)
        context = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        context += tokenizer(r.damaged_reply, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        context += tokenizer(critique_turn_text(tokenizer, system_prompt, user, r.critique, ended=True),
                             add_special_tokens=False)["input_ids"]
        answer = tokenizer(r.repaired_reply, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        examples.append(SFTExample(context + answer, [IGNORE] * len(context) + answer))
    return examples


def make_batches(examples: list[SFTExample], batch_size: int, rng: random.Random) -> list[list[SFTExample]]:
    """Shuffled batches of similar-length examples (little padding): sort by length, cut into
    ``batch_size`` runs, shuffle the runs."""
    ordered = sorted(examples, key=lambda e: len(e.input_ids))
    batches = [ordered[i : i + batch_size] for i in range(0, len(ordered), batch_size)]
    rng.shuffle(batches)
    return batches


def collate(batch: list[SFTExample], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-pad a batch: ``input_ids``/``labels``/``attention_mask`` int64 tensors of shape [B, L],
    L the longest example rounded up to a multiple of ``PAD_MULTIPLE``; ``weights`` float32 [B, L]
    too when any example has weights."""
    width = -(-max(len(e.input_ids) for e in batch) // PAD_MULTIPLE) * PAD_MULTIPLE
    ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    labels = torch.full((len(batch), width), IGNORE, dtype=torch.long)
    mask = torch.zeros((len(batch), width), dtype=torch.long)
    weights = torch.ones((len(batch), width)) if any(e.weights for e in batch) else None
    for row, e in enumerate(batch):
        n = len(e.input_ids)
        ids[row, :n] = torch.tensor(e.input_ids)
        labels[row, :n] = torch.tensor(e.labels)
        mask[row, :n] = 1
        if weights is not None and e.weights:
            weights[row, :n] = torch.tensor(e.weights)
    out = {"input_ids": ids, "labels": labels, "attention_mask": mask}
    return out if weights is None else {**out, "weights": weights}


def sft_loss(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Mean next-token cross-entropy over the batch's labelled positions (nats/token), weighted by
    ``batch["weights"]`` when present (``sum w CE / sum w``; without weights exactly the model's own
    causal-LM loss)."""
    if "weights" not in batch:
        return model(**batch).loss
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits[:, :-1]
    labels, weights = batch["labels"][:, 1:], batch["weights"][:, 1:]
    ce = torch.nn.functional.cross_entropy(logits.float().transpose(1, 2), labels, ignore_index=IGNORE, reduction="none")
    w = weights * (labels != IGNORE)
    return (ce * w).sum() / w.sum()


def bf16_autocast_supported() -> bool:
    """Whether this CPU has native bf16 matmuls (AVX512-BF16 or AMX), where autocast pays off.

    Measured on the 2-core AMD EPYC dev machine (hidden 256, 4 layers, batch 8 x 800 tokens, one
    thread): 0.9-1.5 s per step with bf16 autocast vs 2.0-3.4 s in float32.
    """
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def _progress() -> Progress:
    return Progress(
        TextColumn("[bold]SFT warm start"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("loss {task.fields[loss]:.3f}"),
        TextColumn("{task.fields[tok_s]:,.0f} tok/s"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=False,
    )


def train_sft(model: torch.nn.Module, examples: list[SFTExample], cfg: PolicyConfig, pad_id: int) -> list[float]:
    """Fit ``model`` to ``examples`` with AdamW and a warm-up + cosine LR schedule.

    ``cfg.sft.epochs`` may be fractional (the last epoch is cut short). Gradients are clipped to
    norm 1. The loss is the mean token cross-entropy over reply tokens (nats/token). Forward and
    backward run under bf16 autocast where the CPU supports it natively (weights stay float32).

    Returns:
        The training loss of every optimizer step.
    """
    sft = cfg.sft
    rng = random.Random(0)
    steps_per_epoch = math.ceil(len(examples) / sft.batch_size)
    total = max(1, round(steps_per_epoch * sft.epochs))
    optimizer = torch.optim.AdamW(model.parameters(), lr=sft.lr, weight_decay=0.0, betas=(0.9, 0.95))
    scheduler = get_cosine_schedule_with_warmup(optimizer, max(1, int(WARMUP_FRACTION * total)), total)
    device = torch.device("cuda" if sft.device == "cuda" or (sft.device == "auto" and torch.cuda.is_available()) else "cpu")
    model.to(device)
    model.train()
    losses: list[float] = []
    tokens, t0 = 0, time.perf_counter()
    batches: list[list[SFTExample]] = []
    use_bf16 = device.type == "cuda" or bf16_autocast_supported()
    with _progress() as bar:
        task = bar.add_task("sft", total=total, loss=float("nan"), tok_s=0.0)
        for _ in range(total):
            if not batches:
                batches = make_batches(examples, sft.batch_size, rng)
            batch = {k: v.to(device) for k, v in collate(batches.pop(), pad_id).items()}
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=use_bf16):
                loss = sft_loss(model, batch)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            losses.append(loss.item())
            tokens += int(batch["attention_mask"].sum())
            tok_s = tokens / (time.perf_counter() - t0)
            bar.update(task, advance=1, loss=losses[-1], tok_s=tok_s)
            if len(losses) % max(1, total // 10) == 0:  # for logs without a live terminal
                log.info("SFT step %d/%d: loss %.3f, %.0f tokens/s", len(losses), total, losses[-1], tok_s)
    model.to("cpu").eval()
    return losses


def sft_threads() -> int:
    """Torch threads for SFT: every core this process may run on.

    The warm start runs in the driver before any actor starts, so on a machine of its own the cores
    are otherwise idle. Measured on the 2-core dev machine (hidden 256, 4 layers, batch 8 x 512
    tokens, bf16 autocast): 2 threads 9.9-10.4 k tokens/s vs 4.8-5.8 k for 1 thread when quiet;
    1.6-1.7 k tokens/s for 1 thread of the 3.7 M-parameter default. While other processes keep the
    cores busy, 2 threads were 3-4x slower than 1 (pass ``threads=1`` then). An earlier version chose
    ``cores - load average``; right after ``make setup`` (pip) that picked 1 thread on a quiet machine.

    ``BRUSHRL_SFT_THREADS`` (a positive integer) overrides it: the test suite sets 1 in each of its
    xdist workers, which share the cores (2 threads per worker under CI's load: 900 tokens/s, 1
    thread with two busy loops beside it: 6.5 k vs 2.8 k for 2 threads).

    Raises:
        ValueError: ``BRUSHRL_SFT_THREADS`` is set and not a positive integer.
    """
    override = os.environ.get("BRUSHRL_SFT_THREADS")
    if override:
        if not override.isdigit() or int(override) < 1:
            raise ValueError(f"BRUSHRL_SFT_THREADS={override!r}: expected a positive integer (torch threads for SFT)")
        return int(override)
    return len(os.sched_getaffinity(0))


def warm_start(
    cfg: PolicyConfig,
    corpus: list[tuple[str, str]],
    system_prompt: str,
    prompt_template: str,
    threads: int | None = None,
    revisions: RevisionExamples | None = None,
) -> Path:
    """Train (or find cached) the tokenizer and warm-started tiny policy.

    Callers that want one key at once (two processes, two test workers) train it once: one holds
    the key's lock file (``.KEY.lock`` in the cache folder) while it trains, the others wait on it
    and return the entry it wrote.

    Args:
        cfg: ``cfg.tiny`` sizes the model, ``cfg.sft`` the training (``enabled=False`` saves the
            untrained model, still with a corpus-trained tokenizer).
        corpus: ``(subject, code)`` pairs; the reply is ``as_reply(code)``.
        system_prompt: the system message of every prompt.
        prompt_template: the user message, ``{subject}`` replaced by each pair's subject.
        threads: torch intra-op threads while training (None: ``sft_threads()``); restored after.
        revisions: the revision examples' builder (``cfg.sft.revision_examples`` > 0); built, with
            its renders, only when the cache has no entry for its key.

    Returns:
        The cache folder, loadable with ``from_pretrained`` (model + tokenizer) and holding
        ``done`` (JSON: revision examples, final loss = mean of the last 10% of step losses, seconds,
        steps, examples, mean reply tokens, parameters).

    Raises:
        ValueError: empty corpus.
    """
    if not corpus:
        raise ValueError("warm_start needs a non-empty corpus")
    corpus = [(str(s), str(c)) for s, c in corpus]
    root = Path(cfg.sft.cache_dir).expanduser()
    revisions = revisions if cfg.sft.revision_examples else None
    final = root / cache_key(cfg, corpus, system_prompt, prompt_template, revisions.key() if revisions else None)
    if (final / DONE_MARKER).exists():
        log.info("SFT cache hit: %s", final)
        return final
    shipped = SHIPPED_DIR / final.name
    if (shipped / DONE_MARKER).exists():
        _install(shipped, final)
        log.info("SFT warm start shipped with brushrl (key %s), copied to %s", final.name, final)
        return final
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f".{final.name}.lock", "w") as lock:
        # One process trains a key; another that wants it meanwhile (two test workers, two CLIs on
        # one machine) waits here and then finds it cached, instead of training the same model
        # beside it on the same cores. A process that dies holding it releases it (flock(2)).
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (final / DONE_MARKER).exists():
            log.info("SFT cache hit (trained by another process while this one waited): %s", final)
            return final
        return _train_entry(cfg, corpus, system_prompt, prompt_template, threads, revisions, final)


def _train_entry(cfg: PolicyConfig, corpus: list[tuple[str, str]], system_prompt: str, prompt_template: str,
                 threads: int | None, revisions: RevisionExamples | None, final: Path) -> Path:
    """Train the cache entry ``final`` (:func:`warm_start`'s arguments; the caller holds its lock)
    and rename it into place; returns ``final``."""
    root = final.parent
    log.warning("SFT warm start: no cached or shipped entry for key %s (shipped: %s); training it now "
                "(the demo's 24 epochs: ~1 min on a GPU, ~40 min on 2 quiet cores)", final.name,
                ", ".join(sorted(p.name for p in SHIPPED_DIR.glob("*") if p.is_dir())) or "none")

    t0 = time.perf_counter()
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(threads or sft_threads())
    try:
        built = revisions.build(str(root / "renders")) if revisions else []
        if revisions:
            log.info("SFT warm start: %d revision examples (%s)", len(built),
                     ", ".join(f"{d} {sum(r.damage == d for r in built)}" for d in sorted({r.damage for r in built})))
        torch.manual_seed(0)
        tokenizer = train_tokenizer(tokenizer_texts(corpus, system_prompt, prompt_template, built), cfg.tiny.vocab_size,
                                    words=subject_words([s for s, _ in corpus] + list(COLOUR_WORDS)))
        model = build_tiny_model(cfg.tiny, tokenizer)
        examples = encode_examples(tokenizer, corpus, system_prompt, prompt_template, cfg.sft.steer_weight)
        examples += encode_revision_examples(tokenizer, built, system_prompt, prompt_template)
        longest = max(len(e.input_ids) for e in examples)
        if longest > cfg.tiny.max_position_embeddings:
            log.warning("longest SFT example %d tokens > max_position_embeddings", longest)
        losses = train_sft(model, examples, cfg, tokenizer.pad_token_id) if cfg.sft.enabled else []
    finally:
        torch.set_num_threads(previous_threads)
    seconds = time.perf_counter() - t0
    tail = losses[-max(1, len(losses) // 10) :]  # final loss: mean over the last 10% of steps
    final_loss = sum(tail) / len(tail) if tail else float("nan")
    reply_tokens = sum(sum(1 for t in e.labels if t != IGNORE) for e in examples) / len(examples)
    log.info(
        "SFT warm start: final loss %.4f, %.1f s, %d examples, %.0f reply tokens/example, %d params",
        final_loss, seconds, len(examples), reply_tokens, model.num_parameters(),
    )

    tmp = root / f".tmp-{final.name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    summary = {
        "revision_examples": len(built),
        "final_loss": final_loss,
        "seconds": seconds,
        "steps": len(losses),
        "examples": len(examples),
        "reply_tokens_mean": reply_tokens,
        "parameters": model.num_parameters(),
    }
    (tmp / DONE_MARKER).write_text(json.dumps(summary))
    try:
        os.rename(tmp, final)
    except OSError:  # another process finished the same entry first: keep theirs
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def _install(src: Path, final: Path) -> None:
    """Copy a complete entry ``src`` to the cache folder ``final`` through a temporary name (a reader
    never sees half of it; a concurrent installer's copy wins)."""
    tmp = final.parent / f".tmp-{final.name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    final.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(src, tmp)
    try:
        os.rename(tmp, final)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)


def warm_start_policy(cfg: BrushRLConfig, system_prompt: str, threads: int | None = None) -> BrushRLConfig:
    """The run's policy, warm-started when it is the tiny one: for ``policy.model: tiny`` build (or
    reuse from the cache) :func:`warm_start` on brushrl's own corpus
    (``build_corpus(policy.sft.variations, seed=policy.sft.seed, None: run.seed)``, its first ``policy.sft.max_examples``)
    with ``system_prompt`` and ``prompts.template``, and return a copy of ``cfg`` whose
    ``policy.model`` is the cache folder. Any other model: ``cfg`` unchanged.

    The one place a run's warm start is decided (``brushrl train``, ``brushrl pool build --policy``,
    ``python -m brushrl.rollout.check``), so all of them train and load the same cache entry. With
    ``policy.sft.revision_examples`` > 0 the corpus gains revision examples drawn from the same items
    (``brushrl.policy.revision``).
    """
    if cfg.policy.model != "tiny":
        return cfg
    sft = cfg.policy.sft
    items = build_corpus(sft.variations, seed=cfg.run.seed if sft.seed is None else sft.seed)[: sft.max_examples]
    revisions = RevisionExamples(cfg, items) if sft.revision_examples else None
    path = warm_start(cfg.policy, [(item.subject, item.code) for item in items], system_prompt,
                      cfg.prompts.template, threads=threads, revisions=revisions)
    return cfg.model_copy(update={"policy": cfg.policy.model_copy(update={"model": str(path)})})
