"""The next turn of a multi-turn revision, in tokens: the previous context, the policy's reply as it
was sampled, then the critique's user turn and the assistant header.

Token in, token out (as verl's and SkyRL's multi-turn rollouts keep them): a turn's context is never
re-tokenised from text. ``next_context`` appends to ``prompt_ids + completion_ids`` of the previous
turn only the tokens the chat template puts between the end of that reply and the start of the
next one (:func:`critique_turn_ids`), so

* every turn of a trajectory extends the previous one exactly (the learner trains the whole
  trajectory as one sequence, ``brushrl.learner.samples.TrainSample.from_trajectory``);
* a vLLM engine finds the previous turn's blocks in its prefix cache (automatic prefix caching
  hashes token blocks: an unchanged prefix under the same adapter is a hit).
"""

from __future__ import annotations

from brushrl.prompts import chat_messages, revision_prompt
from brushrl.types import Completion

#: Stands in for the previous reply while rendering the chat template (never sent to a model).
REPLY_MARK = "\u2063BRUSHRL_PREVIOUS_REPLY\u2063"


def critique_turn_text(tokenizer, system_prompt: str, user_prompt: str, critique: str, ended: bool) -> str:
    """The chat-template text between the previous reply and the next one.

    Args:
        tokenizer: has ``apply_chat_template`` and ``eos_token``.
        system_prompt, user_prompt: the trajectory's first turn.
        critique: the critique text (wrapped by ``brushrl.prompts.revision_prompt``).
        ended: the previous reply ended with the end-of-turn token (else it was cut at
            ``max_new_tokens`` and the end-of-turn token is part of the returned text).

    Returns:
        e.g. ``"\\n<|im_start|>user\\nHere is a critique ...<|im_end|>\\n<|im_start|>assistant\\n"``.

    Raises:
        ValueError: the chat template drops or rewrites the previous reply (the text cannot be cut).
    """
    messages = [*chat_messages(system_prompt, user_prompt), {"role": "assistant", "content": REPLY_MARK},
                {"role": "user", "content": revision_prompt(critique)}]
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    if text.count(REPLY_MARK) != 1:
        raise ValueError("the chat template does not render an earlier assistant turn verbatim")
    after = text[text.index(REPLY_MARK) + len(REPLY_MARK):]
    eos = tokenizer.eos_token or ""
    if ended and eos and after.startswith(eos):
        after = after[len(eos):]
    return after


def critique_turn_ids(tokenizer, system_prompt: str, previous: Completion, critique: str) -> list[int]:
    """Token ids of :func:`critique_turn_text` after ``previous`` (``previous.truncated`` says
    whether it ended with the end-of-turn token)."""
    text = critique_turn_text(tokenizer, system_prompt, previous.prompt, critique, not previous.truncated)
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def next_context(tokenizer, system_prompt: str, previous: Completion, critique: str) -> list[int]:
    """The next turn's prompt ids: ``previous.prompt_ids + previous.completion_ids`` + the critique turn."""
    return [*previous.prompt_ids, *previous.completion_ids,
            *critique_turn_ids(tokenizer, system_prompt, previous, critique)]
