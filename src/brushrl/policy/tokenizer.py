"""A byte-level BPE tokenizer trained on our own sketch corpus, with a Qwen-style chat format.

The tiny policy cannot download a tokenizer, so it gets one trained here with the ``tokenizers``
library. Two choices make it suit memorised p5.brush code:

* Every hex colour of the training text (``#e8896b``) becomes one token of its own, added after
  BPE training, so a colour can neither be cut into pieces nor mixed with the code around it.
  Earlier versions let BPE merge colours freely, cut them into digit pairs or into single hex
  digits; each time the pieces were the same strings as (parts of) numbers, and sampled sketches
  put numbers into colours and hex digits into coordinates, the commonest syntax errors at
  temperature 1 (measured with ``python -m brushrl.rollout.check``: 6 of 10 syntax errors and most
  unbalanced brackets in 24 samples came from broken colours with single-digit pieces). A colour
  token appears in training only where a colour belongs, so the model learns to put it nowhere
  else. The corpus keeps the number of distinct colours bounded (``brushrl.corpus.palettes``).
* Pre-tokenisation isolates numbers (``312``, ``0.25``), so that a frequent value becomes one
  token. Everything else may merge across spaces and punctuation, so a recurring line prefix such
  as ``");\\n  brush.vertex("`` becomes one token. Completions get shorter and generation faster.
* The byte-level alphabet is always part of the vocabulary, so any text (an unseen prompt, a
  hallucinated identifier) still encodes, one byte per token at worst.

The chat format mirrors Qwen's ChatML (``<|im_start|>role\\n...<|im_end|>\\n``) so that the same
prompt code serves the tiny model and a real Qwen checkpoint.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

#: Document separator and padding token (Qwen's name for it).
ENDOFTEXT = "<|endoftext|>"
#: Start of a chat turn; followed by the role name and a newline.
IM_START = "<|im_start|>"
#: End of a chat turn; the policy's end-of-sequence token.
IM_END = "<|im_end|>"
SPECIAL_TOKENS: tuple[str, ...] = (ENDOFTEXT, IM_START, IM_END)
#: Pieces that pre-tokenisation isolates: a decimal number.
NUMBER = r"\d+(?:\.\d+)?"
#: A hex colour; each distinct one in the training text becomes an added token.
COLOUR = re.compile(r"#[0-9a-fA-F]{6}")

#: ChatML as in Qwen2/Qwen3 (without tool calls or reasoning blocks).
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def subject_words(subjects: Iterable[str]) -> list[str]:
    """The words of prompt subjects that become whole tokens (``train_tokenizer(words=...)``): every
    lower-case word of three letters or more ("yellow", "hibiscus"; not "a", "an", "of"), sorted."""
    return sorted({w for s in subjects for w in re.findall(r"[a-z]+", s.lower()) if len(w) >= 3})


def train_tokenizer(texts: list[str], vocab_size: int, words: Iterable[str] = ()) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE tokenizer on ``texts`` and wrap it for ``transformers``.

    Args:
        texts: training text (corpus replies, the system prompt, user prompts). Order does not
            matter; repeated texts weigh more in the merge statistics.
        vocab_size: target BPE vocabulary size including the 256 byte symbols and the three special
            tokens; the result can be smaller when the corpus has fewer useful merges. One token
            per distinct hex colour in ``texts`` is added on top.
        words: whole words (a prompt's colour and species words, ``subject_words``) that become one
            token each wherever they stand as a word: in the user prompt and in the reply's subject
            comment alike. BPE alone merged them with their neighbours, differently in each prompt
            ("red " in "a red poppy", "re" + "d" in "a red tulip", " hibiscus in loose
            watercolour." as one token), so no token meant "red" and the warm start could not learn
            what the colour word asks (docs/reward.md, "A warm start that follows its prompt").

    Returns:
        A fast tokenizer with ``eos_token = "<|im_end|>"``, ``pad_token = "<|endoftext|>"``, no BOS,
        and a ChatML ``chat_template``, so that
        ``tok.apply_chat_template([{"role": "system", ...}, {"role": "user", ...}],
        add_generation_prompt=True)`` returns the prompt ids that end with ``<|im_start|>assistant\\n``.

    Raises:
        ValueError: ``vocab_size`` too small for the byte alphabet plus special tokens, or no text.
    """
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    if vocab_size < len(alphabet) + len(SPECIAL_TOKENS):
        raise ValueError(f"vocab_size {vocab_size} < {len(alphabet) + len(SPECIAL_TOKENS)} (bytes + specials)")
    if not any(texts):
        raise ValueError("train_tokenizer needs at least one non-empty text")

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(NUMBER), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=alphabet,
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    colours = sorted({c for text in texts for c in COLOUR.findall(text)})
    tok.add_tokens([AddedToken(c, single_word=False, normalized=False) for c in colours])
    tok.add_tokens([AddedToken(w, single_word=True, normalized=False) for w in sorted(set(words))])

    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=IM_END,
        pad_token=ENDOFTEXT,
        unk_token=None,
        bos_token=None,
        additional_special_tokens=[IM_START],
        clean_up_tokenization_spaces=False,
        model_max_length=1 << 20,
    )
    wrapped.chat_template = CHAT_TEMPLATE
    return wrapped
