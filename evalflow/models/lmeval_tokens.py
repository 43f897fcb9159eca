"""Token-level rules of lm-eval 0.4.13's HFLM, as pure functions (no torch, no transformers).

Each function mirrors one piece of ``lm_eval/models/huggingface.py``, ``lm_eval/api/model.py``
(``TemplateLM``), ``lm_eval/models/utils.py`` or ``lm_eval/utils.py`` so the numbers evalflow
reports are the numbers lm-eval reports: how a (context, continuation) pair becomes tokens, what
the model sees when the pair is longer than the window, how a long text is cut into rolling
windows, and how generation kwargs and stop sequences are normalized.

>>> split_trailing_space("Question: 2+2= ", "4")
('Question: 2+2=', ' 4')
>>> model_input([1, 2, 3], [4, 5], max_length=3)
([2, 3, 4], 2)
>>> rolling_windows([10, 11, 12, 13, 14], prefix_token=0, max_length=3)
[([0], [10, 11, 12]), ([11, 12], [13, 14])]
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from evalflow.errors import ModelError

TOKENIZER_INFINITY = 1000000000000000019884624838656  # HF's "no limit" model_max_length (int(1e30))
DEFAULT_MAX_LENGTH = 2048  # lm-eval's fallback when neither config nor tokenizer gives a length
SEQLEN_CONFIG_ATTRS = ("n_positions", "max_position_embeddings", "n_ctx")

Tokens = list[int]


def prefix_token(tokenizer: Any, custom: int | None) -> int:
    """HFLM.prefix_token_id: ``prefix_token_id`` as given, else BOS, else EOS."""
    if custom is not None:
        return int(custom)
    bos = tokenizer.bos_token_id
    return int(bos if bos is not None else tokenizer.eos_token_id)


def tok_encode(
    tokenizer: Any, string: str, add_bos_token: bool | None, prefix: int, add_special_tokens: bool | None = None
) -> Tokens:
    """HFLM.tok_encode: special tokens as ``add_special_tokens``, else ``add_bos_token``, else the
    tokenizer decide; none where the text already starts with the ``prefix`` token's text."""
    kwargs: dict[str, Any] = {}
    if add_special_tokens is not None:
        kwargs["add_special_tokens"] = add_special_tokens
    elif add_bos_token is not None:
        kwargs["add_special_tokens"] = add_bos_token
    if add_special_tokens is None and string.startswith(tokenizer.decode(prefix)):
        kwargs["add_special_tokens"] = False
    return list(tokenizer.encode(string, **kwargs))


def split_trailing_space(context: str, continuation: str) -> tuple[str, str]:
    """Move the context's trailing whitespace into the continuation (lm-eval ``_encode_pair``).

    BPE tokenizers attach a space to the word after it, so ``"A:" + " 4"`` tokenizes like the
    whole text ``"A: 4"`` while ``"A: " + "4"`` would not.
    """
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces > 0:
        return context[:-n_spaces], context[-n_spaces:] + continuation
    return context, continuation


def encode_pair(
    encode: Callable[[str], Tokens],
    encode_plain: Callable[[str], Tokens],
    prefix_token_id: int,
    context: str,
    continuation: str,
) -> tuple[Tokens, Tokens]:
    """Context and continuation tokens of a loglikelihood request, as lm-eval's ``loglikelihood``.

    ``encode`` is HFLM's ``tok_encode`` (special tokens as the tokenizer/``add_bos_token`` decide),
    ``encode_plain`` encodes without special tokens. The whole string is encoded and split at the
    length of the encoded context, so the continuation's first token is the one the model would
    really see. An empty context is replaced by the prefix token (BOS, else EOS).
    """
    if context == "":
        cont = encode_plain(continuation)
        if not cont:
            raise ModelError(
                "a loglikelihood request has an empty context and an empty continuation; there is "
                "nothing to score. Check the task's doc_to_text/doc_to_choice for empty strings."
            )
        if cont[0] != prefix_token_id:
            return [prefix_token_id], cont
        return cont[:1], cont[1:]
    context, continuation = split_trailing_space(context, continuation)
    whole = encode(context + continuation)
    ctx = encode(context)
    return ctx, whole[len(ctx) :]


def model_input(ctx: Sequence[int], cont: Sequence[int], max_length: int) -> tuple[Tokens, int]:
    """What the causal model is fed for one pair, and how many final positions score it.

    The input is ``(ctx + cont)[:-1]``, left-truncated to ``max_length`` tokens (lm-eval keeps the
    last ``max_length + 1`` tokens, then drops the last): logits at position i predict token i+1.
    """
    whole = list(ctx) + list(cont)
    return whole[-(max_length + 1) :][:-1], len(cont)


def check_pair(ctx: Sequence[int], cont: Sequence[int], max_length: int, request: Any) -> None:
    """Refuse pairs lm-eval asserts against, with a message that names the request."""
    if not cont:
        raise ModelError(
            f"the continuation of loglikelihood request {request!r} encodes to no tokens, so it "
            "has no probability to score. Make the task's choices non-empty strings."
        )
    if not ctx:
        raise ModelError(f"the context of loglikelihood request {request!r} encodes to no tokens.")
    if len(cont) > max_length:
        raise ModelError(
            f"the continuation of loglikelihood request {request!r} is {len(cont)} tokens, longer "
            f"than the model's max_length {max_length}; raise model.max_length or shorten it."
        )


def rolling_windows(tokens: Sequence[int], prefix_token: int, max_length: int) -> list[tuple[Tokens, Tokens]]:
    """Disjoint (context, continuation) windows that score every token of ``tokens`` exactly once.

    lm-eval's ``get_rolling_token_windows(context_len=1)`` followed by ``make_disjoint_window``:
    the first window predicts up to ``max_length`` tokens after the prefix token; each later one
    predicts the next ``max_length`` tokens conditioned on the tokens before them.
    """
    token_list = list(tokens)
    windows: list[tuple[Tokens, Tokens]] = []
    if not token_list:
        return windows
    first = min(max_length, len(token_list))
    windows.append(([prefix_token] + token_list[: first - 1], token_list[:first]))
    predicted = first
    while predicted < len(token_list):
        pred_len = min(len(token_list) - predicted, max_length)
        end = predicted + pred_len
        # end > max_length here (the first window took max_length tokens), so the start is >= 0
        windows.append((token_list[end - max_length - 1 : end - 1], token_list[end - pred_len : end]))
        predicted += pred_len
    return [(ctx[: len(ctx) - (len(cont) - 1)], cont) for ctx, cont in windows]


def resolve_max_length(config: Any, tokenizer: Any, default: int = DEFAULT_MAX_LENGTH) -> int:
    """The model's context window as lm-eval decides when ``max_length`` is not given.

    A nested ``text_config`` first, then ``n_positions``, ``max_position_embeddings``, ``n_ctx``
    of the config, then the tokenizer's ``model_max_length`` unless it is HF's "infinity", then
    2048.
    """
    cfg = getattr(config, "text_config", None) or config
    for attr in SEQLEN_CONFIG_ATTRS:
        value = getattr(cfg, attr, None)
        if value is not None:
            return int(value)
    model_max_length = getattr(tokenizer, "model_max_length", None)
    if model_max_length is not None and model_max_length != TOKENIZER_INFINITY:
        return int(model_max_length)
    return default


def _plain(value: Any) -> Any:
    """Tuples (how records store lists) back to lists, recursively, as lm-eval's YAML gives them."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value


def normalize_gen_kwargs(gen_kwargs: Mapping[str, Any], default_max_gen_toks: int) -> dict[str, Any]:
    """lm-eval's ``normalize_gen_kwargs``: one ``max_gen_toks``, consistent do_sample/temperature.

    ``max_gen_toks`` wins over ``max_new_tokens``, ``max_tokens``, ``max_completion_tokens``;
    ``do_sample`` unset means sampling iff temperature > 0; ``do_sample=False`` forces
    temperature 0.
    """
    kwargs = copy.deepcopy(_plain(dict(gen_kwargs)))
    until = kwargs.get("until", [])
    if not isinstance(until, list):
        until = [until]
    aliases = ("max_gen_toks", "max_new_tokens", "max_tokens", "max_completion_tokens")
    provided = [kwargs.pop(a) for a in aliases if a in kwargs]
    provided = [v for v in provided if v is not None]
    max_gen_toks = int(provided[0]) if provided else int(default_max_gen_toks)
    do_sample = kwargs.get("do_sample")
    temperature = float(kwargs.get("temperature", 0.0))
    if do_sample is None:
        kwargs["do_sample"] = temperature > 0.0
    elif do_sample is False:
        kwargs["temperature"] = 0.0
    kwargs["until"] = until
    kwargs["max_gen_toks"] = max_gen_toks
    return kwargs


def stop_sequences(until: Any, eos: str | None) -> list[str]:
    """``until`` as a list of strings with the decoded EOS token appended (``handle_stop_sequences``)."""
    if isinstance(until, str):
        until = [until]
    elif until is None:
        until = []
    elif not isinstance(until, list):
        raise ModelError(
            f"generation_kwargs 'until' must be a string or a list of strings, got {until!r}; fix "
            "the task's generation_kwargs."
        )
    until = list(until)
    if eos is not None and eos not in until:
        until.append(eos)
    return until


def strip_at_stops(text: str, stops: Sequence[str]) -> str:
    """Cut ``text`` at the first occurrence of any non-empty stop sequence (``postprocess_generated_text``)."""
    for term in stops:
        if len(term) > 0:
            text = text.split(term)[0]
    return text


def hf_generate_kwargs(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The sampling kwargs HFLM's ``_model_generate`` hands to ``model.generate``.

    Temperature defaults to 0; temperature 0 with no ``do_sample`` means greedy; greedy drops the
    temperature so transformers does not warn about it.
    """
    out = dict(kwargs)
    out["temperature"] = out.get("temperature", 0.0)
    do_sample = out.get("do_sample")
    temp = out.get("temperature")
    if temp == 0.0 and do_sample is None:
        out["do_sample"] = do_sample = False
    if do_sample is False and temp == 0.0:
        out.pop("temperature", None)
    return out
