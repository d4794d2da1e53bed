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

With ``rollout.revision.show_image`` the critique's user turn also carries the painting
(:func:`next_context_with_image`, a vision-language policy's processor): the chat template renders
the image item as its placeholder and the processor expands it into the image's tokens, so the
context still extends the previous turn token for token, and its pixel inputs
(``brushrl.vision``) are the previous turn's images followed by this painting.
"""

from __future__ import annotations

from brushrl import vision
from brushrl.prompts import chat_messages, revision_prompt
from brushrl.types import Completion

#: Stands in for the previous reply while rendering the chat template (never sent to a model).
REPLY_MARK = "\u2063BRUSHRL_PREVIOUS_REPLY\u2063"


def critique_turn_text(tokenizer, system_prompt: str, user_prompt: str, critique: str, ended: bool,
                       image: bool = False) -> str:
    """The chat-template text between the previous reply and the next one.

    Args:
        tokenizer: has ``apply_chat_template`` and ``eos_token``.
        system_prompt, user_prompt: the trajectory's first turn.
        critique: the critique text (wrapped by ``brushrl.prompts.revision_prompt``).
        ended: the previous reply ended with the end-of-turn token (else it was cut at
            ``max_new_tokens`` and the end-of-turn token is part of the returned text).
        image: the user turn's content is ``[{"type": "image"}, {"type": "text", ...}]`` (the
            painting before the critique), which a vision-language chat template renders as its
            image placeholder (Idefics3: ``<image>``); False: the text only, as before.

    Returns:
        e.g. ``"\\n<|im_start|>user\\nHere is a critique ...<|im_end|>\\n<|im_start|>assistant\\n"``.

    Raises:
        ValueError: the chat template drops or rewrites the previous reply (the text cannot be cut).
    """
    content = revision_prompt(critique)
    if image:
        content = [{"type": "image"}, {"type": "text", "text": content}]
    messages = [*chat_messages(system_prompt, user_prompt), {"role": "assistant", "content": REPLY_MARK},
                {"role": "user", "content": content}]
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


def next_context_with_image(processor, system_prompt: str, previous: Completion, critique: str,
                            png: bytes | None) -> tuple[list[int], dict | None]:
    """The next turn's prompt ids and vision inputs when the critique turn shows the painting.

    The critique turn's text (:func:`critique_turn_text` with ``image``) goes through the
    vision-language ``processor`` with the painting, which expands the image placeholder into the
    image's tokens (Idefics3: ``<fake_token_around_image><global-img>`` + ``image_seq_len`` x
    ``<image>`` + ``<fake_token_around_image>``) and returns its pixel inputs. With ``png`` None
    (the turn has no painting: its sketch failed before or during rendering) the turn is text only,
    exactly :func:`next_context`, and the vision inputs are the previous turn's.

    Args:
        processor: a ``transformers`` vision-language processor (``processor.tokenizer`` has the
            chat template; ``processor(text=[...], images=[[image]], add_special_tokens=False,
            return_tensors="pt")``).
        system_prompt: the trajectory's system prompt.
        previous: the previous turn (its ``vision``: the images already in its context, or None).
        critique: the critique text.
        png: the previous turn's painting, PNG bytes (``Sample.render.png``), or None.

    Returns:
        ``(prompt_ids, vision)``: ``previous.prompt_ids + previous.completion_ids`` + the critique
        turn's ids; the context's vision inputs (``brushrl.vision``: the previous turn's images,
        then this painting), None when the context has no image.

    Raises:
        ValueError: the chat template cannot be cut (see :func:`critique_turn_text`), or the
            processor returned no pixel inputs for the painting.
    """
    if png is None:
        return next_context(processor.tokenizer, system_prompt, previous, critique), previous.vision
    text = critique_turn_text(processor.tokenizer, system_prompt, previous.prompt, critique,
                              not previous.truncated, image=True)
    out = processor(text=[text], images=[[vision.png_image(png)]], add_special_tokens=False, return_tensors="pt")
    painting = vision.from_processor(out)
    if not painting:
        raise ValueError(f"{type(processor).__name__} returned no pixel inputs for the painting")
    ids = [*previous.prompt_ids, *previous.completion_ids, *out["input_ids"][0].tolist()]
    return ids, vision.concat([previous.vision, painting])
