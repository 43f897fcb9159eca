"""The request rules of lm-eval 0.4.13's ``VLLM`` (``lm_eval/models/vllm_causallms.py``), as pure
functions: no vllm, no torch, no tokenizer (they take token lists and encode callables).

They differ from HFLM's (:mod:`evalflow.models.lmeval_tokens`) in four places, each lm-eval's:

- a scored sequence keeps its last ``max_length - 1`` tokens (vLLM must have room to generate one
  token), where HFLM feeds ``max_length``;
- log-likelihoods are read from ``prompt_logprobs`` (one dict per prompt position, the first None)
  rather than computed from logits, and "greedy" is the arg-max of each position's dict;
  evalflow reads a one-token continuation (a multiple-choice letter) from its context's next-token
  distribution instead (:func:`next_token_groups`): the same log-probability, one prompt per distinct
  context rather than one per choice, and no log-softmax over every prompt position;
- rolling windows are ``max_length - 2`` tokens long;
- a generation context is truncated to ``max_length - max_gen_toks`` on ``truncation_side`` (left,
  right or middle), and the sampling kwargs get HF's decoding defaults.

>>> scored_input([1, 2, 3], [4, 5], max_length=4)
([3, 4, 5], 1)
>>> truncate_context([1, 2, 3, 4, 5], max_gen_toks=2, max_length=5, side="middle")
([1, 4, 5], 2)
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evalflow.core.records import Finish, Generation
from evalflow.errors import ConfigError, ModelError
from evalflow.models.lmeval_tokens import normalize_gen_kwargs, stop_sequences, strip_at_stops

Tokens = list[int]
Logprobs = list[dict[int, float] | None]  # per prompt position, as vLLM returns them (engine.logprobs)
TRUNCATION_SIDES = ("left", "right", "middle")


def special_tokens_kwargs(add_special_tokens: bool | None, add_bos_token: bool | None) -> dict[str, bool]:
    """lm-eval's ``_add_special_kwargs``: an explicit ``add_special_tokens`` wins, then ``add_bos_token``."""
    if add_special_tokens is not None:
        return {"add_special_tokens": add_special_tokens}
    if add_bos_token is not None:
        return {"add_special_tokens": add_bos_token}
    return {}


def encode_kwargs(
    text: str, prefix_text: str | None, add_special_tokens: bool | None, add_bos_token: bool | None
) -> dict[str, bool]:
    """The tokenizer kwargs ``VLLM.tok_encode`` encodes ``text`` with: special tokens off when the
    text already starts with the prefix token's text (a chat template's BOS), so BOS is never doubled."""
    kwargs = special_tokens_kwargs(add_special_tokens, add_bos_token)
    if prefix_text is not None and text.startswith(prefix_text):
        kwargs["add_special_tokens"] = False
    return kwargs


def scored_input(ctx: Sequence[int], cont: Sequence[int], max_length: int) -> tuple[Tokens, int]:
    """The prompt that scores one (context, continuation) pair and how many of its tokens are context.

    The last ``max_length - 1`` tokens of ``ctx + cont``; the context part shrinks by what was cut.
    """
    keep = max_length - 1
    whole = list(ctx) + list(cont)
    return whole[-keep:], len(ctx) - max(0, len(ctx) + len(cont) - keep)


def continuation_logprob(
    tokens: Sequence[int], prompt_logprobs: Sequence[Mapping[int, float] | None], ctxlen: int
) -> tuple[float, bool]:
    """lm-eval's ``_parse_logprobs``: the summed log-probability of ``tokens[ctxlen:]`` and whether
    each was the arg-max of its position (positions without a dict count as greedy)."""
    scored: list[tuple[int, Mapping[int, float]]] = []
    for position, (token, logprobs) in enumerate(zip(tokens[ctxlen:], prompt_logprobs[ctxlen:], strict=True), ctxlen):
        if logprobs is None or token not in logprobs:
            raise ModelError(
                f"vLLM returned no log-probability for prompt token {token} at position {position}; "
                "it must be run with prompt_logprobs (evalflow asks for them: this is a bug or an unsupported vLLM)."
            )
        scored.append((token, logprobs))
    total = sum(logprobs[token] for token, logprobs in scored)
    greedy = all(max(logprobs, key=logprobs.__getitem__) == token for token, logprobs in scored)
    return float(total), greedy


MAX_NAMED_TOKENS = 128  # vLLM's MAX_LOGPROB_TOKEN_IDS: the most tokens one request may name


def next_token_groups(
    inputs: Sequence[tuple[Sequence[int], int]], every_position: bool = False, max_named: int = MAX_NAMED_TOKENS
) -> tuple[list[Tokens], list[list[int]], dict[int, list[int]]]:
    """Scored inputs as next-token questions, grouped by the tokens before the asked one: the
    distinct prefixes, each one's distinct asked tokens, and per input the groups of its
    continuation's positions, in order.

    By default only inputs whose continuation is one token are asked (the rest are scored from
    prompt log-probabilities); ``every_position`` asks every continuation token, each after its
    own prefix (LoRA runs: vLLM's prompt log-probabilities are wrong or crash with an adapter).

    The log-probability of token t after prefix c is the same number whether vLLM reads it from the
    prompt ``c + [t]``'s last position or from the next-token distribution after ``c``; the second
    needs one prompt for all of c's choices (four for an mmlu question) and, with no prompt
    log-probabilities asked, lets vLLM's prefix cache reuse the few-shot prefix shared by a task's prompts.
    A prefix asked for more than ``max_named`` distinct tokens gets a group per ``max_named``.

    >>> next_token_groups([([5, 6, 7], 2), ([5, 6, 8], 2), ([5, 9, 9], 1)])
    ([[5, 6]], [[7, 8]], {0: [0], 1: [0]})
    >>> next_token_groups([([5, 6, 7], 2), ([5, 9, 9], 1)], every_position=True)
    ([[5, 6], [5], [5, 9]], [[7], [9], [9]], {0: [0], 1: [1, 2]})
    """
    prefixes: list[Tokens] = []
    asked: list[list[int]] = []
    group_of: dict[tuple[int, ...], dict[int, int]] = {}  # prefix -> asked token -> its group
    filling: dict[tuple[int, ...], int] = {}  # prefix -> the group new tokens of it go to
    owner: dict[int, list[int]] = {}
    for i, (tokens, ctxlen) in enumerate(inputs):
        if ctxlen < 1 or (len(tokens) - ctxlen != 1 and not every_position):
            continue
        owner[i] = []
        for position in range(ctxlen, len(tokens)):
            key, token = tuple(tokens[:position]), tokens[position]
            seen = group_of.setdefault(key, {})
            if token not in seen:
                group = filling.get(key)
                if group is None or len(asked[group]) >= max_named:
                    group = filling[key] = len(prefixes)
                    prefixes.append(list(key))
                    asked.append([])
                asked[group].append(token)
                seen[token] = group
            owner[i].append(seen[token])
    return prefixes, asked, owner


def next_token_answer(tokens: Sequence[int], found: Sequence[Logprobs]) -> tuple[float, bool]:
    """The (log-probability, greedy) of continuation ``tokens`` from the next-token dict after each
    one's prefix (each dict holds the asked tokens and the arg-max)."""
    scores = [continuation_logprob([token], logprobs, 0) for token, logprobs in zip(tokens, found, strict=True)]
    return float(sum(logprob for logprob, _ in scores)), all(greedy for _, greedy in scores)


def longest_first(prompts: Sequence[Sequence[int]]) -> list[int]:
    """The order lm-eval's ``Collator`` hands prompts to vLLM: longest first, ties by their tokens
    (the same order gives the same engine batches, hence the same float summation order)."""
    return sorted(range(len(prompts)), key=lambda i: (-len(prompts[i]), tuple(prompts[i])))


def restore_order(order: Sequence[int], answers: Sequence[Any]) -> list[Any]:
    """``answers`` given in ``order`` back in the original positions."""
    out: list[Any] = [None] * len(order)
    for position, answer in zip(order, answers, strict=True):
        out[position] = answer
    return out


def truncate_tokens(tokens: Sequence[int], length: int, side: str) -> Tokens:
    """lm-eval's ``truncate_tokens``: keep ``length`` tokens from the left, the right, or both ends."""
    tokens = list(tokens)
    if side == "left":
        return tokens[-length:]
    if side == "right":
        return tokens[:length]
    left = length // 2
    return tokens[:left] + tokens[len(tokens) - (length - left) :]


def truncate_context(tokens: Sequence[int], max_gen_toks: int, max_length: int, side: str) -> tuple[Tokens, int]:
    """lm-eval's ``maybe_truncate`` as ``VLLM`` calls it: a context longer than ``max_length -
    max_gen_toks`` is cut on ``side``; the token budget is never shrunk."""
    if len(tokens) + max_gen_toks <= max_length:
        return list(tokens), max_gen_toks
    room = max_length - max_gen_toks
    if room <= 0:
        raise ModelError(
            f"max_gen_toks {max_gen_toks} leaves no room for a context in the model's max_length {max_length}; "
            "lower generation_kwargs.max_gen_toks or raise model.max_model_len."
        )
    return truncate_tokens(tokens, room, side), max_gen_toks


def sampling_kwargs(
    gen_kwargs: Mapping[str, Any], eos: str | None, default_max_gen_toks: int
) -> tuple[dict[str, Any], list[str], int]:
    """lm-eval's ``VLLM.modify_gen_kwargs``: (``SamplingParams`` kwargs, stop sequences with EOS,
    max_gen_toks), with HF's decoding defaults (special tokens kept, no spaces between them)."""
    kwargs = normalize_gen_kwargs(gen_kwargs, default_max_gen_toks)
    until = stop_sequences(kwargs.pop("until", None), eos)
    max_gen_toks = int(kwargs.pop("max_gen_toks", default_max_gen_toks))
    kwargs.pop("do_sample", None)
    return {"skip_special_tokens": False, "spaces_between_special_tokens": False, **kwargs}, until, max_gen_toks


def is_sampled(kwargs: Mapping[str, Any]) -> bool:
    """Whether vLLM samples with these ``SamplingParams`` kwargs (temperature > 0, its default 1.0)."""
    return float(kwargs.get("temperature", 1.0)) > 0.0


def eos_text(decode: Callable[[int], str], eos_token_id: int | None, eos_token: str | None) -> str | None:
    """The EOS stop sequence: the decoded EOS id, else the tokenizer's ``eos_token`` when that decodes
    to "" (ChatGLM), as lm-eval's ``generate_until``."""
    text = decode(eos_token_id) if eos_token_id is not None else None
    return text if text else eos_token


def engine_stops(until: Sequence[str], eos: str | None, think_end_token: str | None) -> list[str]:
    """The stop sequences vLLM itself stops at: ``until``, or with a thinking marker only the EOS
    text among them. lm-eval's ``VLLM`` (0.4.13) then cuts the task's stop sequences after the
    thinking part (``postprocess_generated_text``), because they often occur inside it; evalflow's
    filters stage makes that cut, on the raw generation :func:`answer` keeps."""
    return [s for s in until if s == eos] if think_end_token else list(until)


@dataclass(frozen=True)
class Completion:
    """vLLM's first completion of one prompt: its text, ``finish_reason`` and ``stop_reason``, and
    the tokens of the prompt (as the engine saw it) and of the completion (EOS or stop tokens included)."""

    text: str
    finish_reason: str | None
    stop_reason: int | str | None
    prompt_tokens: int
    completion_tokens: int


def stop_reason(done: Completion, eos: str | None, eos_ids: Collection[int], stop_token_ids: Collection[int]) -> str:
    """evalflow's stop reason for vLLM's: ``length`` for ``length``; for ``stop``, ``eos`` when no
    stop sequence ended it (``stop_reason`` None), or the one that did is the EOS text (lm-eval
    adds it to the stops) or an EOS id (the model's generation config's join ``stop_token_ids``),
    else ``stop``; ``error`` for any other (an aborted request)."""
    if done.finish_reason == "length":
        return "length"
    if done.finish_reason != "stop":
        return "error"
    reason = done.stop_reason
    if reason is None or (isinstance(reason, str) and reason == eos):
        return "eos"
    if isinstance(reason, str):
        return "stop"
    return "stop" if reason in stop_token_ids and reason not in eos_ids else "eos"


def answer(
    done: Completion,
    until: Sequence[str],
    think_end_token: str | None,
    eos: str | None,
    eos_ids: Collection[int],
    stop_token_ids: Collection[int],
) -> Generation:
    """One generation's answer and how it ended: the text cut at the first of ``until`` (lm-eval's
    post-hoc cut of what vLLM's stop check missed); with a thinking marker the raw text, which
    vLLM stopped at EOS only (:func:`engine_stops`)."""
    text = done.text if think_end_token else strip_at_stops(done.text, list(until))
    reason = stop_reason(done, eos, eos_ids, stop_token_ids)
    return Generation(text, Finish(reason, done.prompt_tokens, done.completion_tokens))


def parse_truncation_side(side: object) -> str:
    """``left``, ``right`` or ``middle``, refused otherwise."""
    if side not in TRUNCATION_SIDES:
        raise ConfigError(
            f"model.truncation_side {side!r} is not one of {', '.join(TRUNCATION_SIDES)}: it says which end of a "
            "generation context too long for max_model_len is cut (lm-eval's default: left)."
        )
    return str(side)
