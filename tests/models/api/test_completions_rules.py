"""openai_completions' request rules without a server: lm-eval's pair split, left truncation to
``max_length - 1`` tokens, ``ctxlen`` for scoring, longest-first order, ``batch_size`` prompts per
request, generation prompts truncated to ``max_length - 1 - max_gen_toks``, rolling windows.

A fake client answers each echo request with log-probability -1 for every prompt token, so a
continuation's score is minus its token count exactly when ``ctxlen`` is right."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from evalflow.core.records import Request
from evalflow.errors import ModelError
from evalflow.models.api.completions import OpenAICompletions
from evalflow.models.api.server_settings import parse_settings
from evalflow.models.api.tokens import ApiTokens, load_tokenizer


class FakeClient:
    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def post_all(self, path: str, bodies, on_answer, read=None) -> None:
        for i, body in enumerate(bodies):
            self.bodies.append(body)
            prompts = body["prompt"]
            choices = []
            for k, prompt in enumerate(prompts):
                n = len(prompt) + 1  # prompt tokens and the generated one
                choices.append(
                    {
                        "index": k,
                        "text": "x",
                        "logprobs": {
                            "token_logprobs": [None] + [-1.0] * (n - 1),
                            "top_logprobs": [None] + [{"t": -1.0}] * (n - 1),
                        },
                    }
                )
            answer = {"choices": choices}
            on_answer(i, answer if read is None else read(i, orjson.dumps(answer)))  # as the real client reads it


def model(tok_dir: Path, **config: Any) -> OpenAICompletions:
    m = OpenAICompletions.__new__(OpenAICompletions)  # no server: the rules only
    m.settings = parse_settings(
        "completions", {"model": "m", "base_url": "http://x/v1", "tokenizer": str(tok_dir), **config}
    )
    m.tokens = ApiTokens(load_tokenizer(str(tok_dir)), max_length=m.settings.max_length, add_bos_token=False)
    m.aligned, m.client = True, FakeClient()
    return m


PAIRS = [
    ("The quick brown fox", " jumps over the lazy dog."),
    ("A cat", " sat on the mat"),
    ("Paris is the capital of France. Berlin is the capital of", " Germany."),
]


def test_scores_are_the_continuation_tokens_only(tiny_nobos_dir: Path):
    m = model(tiny_nobos_dir, batch_size=2)
    got = m.loglikelihood([Request("loglikelihood", p) for p in PAIRS])
    conts = [m.tokens.score_input(c, x, None) for c, x in PAIRS]
    assert [g[0] for g in got] == [-(len(s.tokens) - s.ctxlen) for s in conts] and all(g[1] for g in got)
    lengths = [len(p) for b in m.client.bodies for p in b["prompt"]]
    assert lengths == sorted(lengths, reverse=True)  # longest first, as lm-eval's Collator
    assert [len(b["prompt"]) for b in m.client.bodies] == [2, 1]  # batch_size prompts per request


@pytest.mark.parametrize("add_bos", [False, True])
def test_a_chunk_tokenized_at_once_matches_pair_by_pair(tiny_nobos_dir: Path, add_bos: bool):
    """score_inputs batches a chunk's texts (a shared context once): the same tokens and ctxlen as
    score_input request by request, trailing spaces and an empty context included."""
    tokens = ApiTokens(load_tokenizer(str(tiny_nobos_dir)), max_length=8, add_bos_token=add_bos)
    pairs = [*PAIRS, ("Question: 2+2= ", "4"), ("Question: 2+2= ", "5"), ("", "alone")]
    batched = tokens.score_inputs(pairs, [None] * len(pairs))
    assert batched == [tokens.score_input(c, x, None) for c, x in pairs]
    assert any(len(s.tokens) == 7 for s in batched)  # the truncation path is exercised


def test_left_truncation_keeps_the_continuation_whole(tiny_nobos_dir: Path):
    m = model(tiny_nobos_dir, max_length=6)
    ctx, cont = PAIRS[2]
    s = m.tokens.score_input(ctx, cont, None)
    assert len(s.tokens) == 5  # max_length - 1
    n_cont = len(m.tokens.score_input(ctx, cont, None).tokens) - s.ctxlen
    assert m.loglikelihood([Request("loglikelihood", PAIRS[2])])[0][0] == -n_cont
    full = model(tiny_nobos_dir).tokens.score_input(ctx, cont, None)
    assert list(s.tokens) == list(full.tokens)[-5:] and len(full.tokens) - full.ctxlen == n_cont


def test_text_prompts_are_the_decoded_tokens(tiny_nobos_dir: Path):
    m = model(tiny_nobos_dir, tokenized_requests=False)
    m.client.post_all = lambda path, bodies, on_answer, read=None: m.client.bodies.extend(bodies)  # only record
    with pytest.raises(ModelError, match="unanswered"):
        m.loglikelihood([Request("loglikelihood", PAIRS[1])])
    assert m.client.bodies[0]["prompt"] == "A cat sat on the mat"


def test_generation_prompts_truncated_for_max_gen_toks(tiny_nobos_dir: Path):
    m = model(tiny_nobos_dir, max_length=10, max_gen_toks=4)
    m.generate_until([Request("generate_until", (PAIRS[2][0], {"until": ["\n"]}))])
    body = m.client.bodies[0]
    assert len(body["prompt"][0]) == 10 - 1 - 4 and body["max_tokens"] == 4
    assert body["stop"] == ["\n", m.tokens.eos_string]


def test_rolling_windows_cover_every_token_once(tiny_nobos_dir: Path):
    m = model(tiny_nobos_dir, max_length=8)
    text = PAIRS[2][0] + PAIRS[2][1]
    n = len(m.tokens.encode(text))
    assert m.loglikelihood_rolling([Request("loglikelihood_rolling", (text,))]) == [-float(n)]
    assert len(m.client.bodies) > 1


@pytest.fixture(scope="module")
def toy_tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The benchmark's byte-level BPE (``tests.support.latency_server.build_tokenizer``)."""
    from tests.support.latency_server import build_tokenizer

    return Path(build_tokenizer(tmp_path_factory.mktemp("toy_tok")))


TEXTS = [
    "The quick brown fox",
    "  leading and trailing  ",
    "",
    "élan café — 東京 🙂",
    "Question: 2+2=\n\nAnswer:",
    "</s> an EOS text, and <s> a BOS text",
    "tab\tand\nnewline",
    "a" * 300,
]


@pytest.mark.parametrize("add_bos", [False, True])
def test_the_rust_backend_gives_the_tokens_transformers_gives(
    tiny_nobos_dir: Path, tiny_model_dir: Path, toy_tokenizer_dir: Path, add_bos: bool
):
    """After the first call (through transformers, which sets the backend up) encode_many calls the
    Rust tokenizer directly: the same ids as ``tok(text)`` text by text, special tokens or not."""
    for folder in (tiny_nobos_dir, tiny_model_dir, toy_tokenizer_dir):
        tokens = ApiTokens(load_tokenizer(str(folder)), max_length=4096, add_bos_token=add_bos)
        first = tokens.encode_many(TEXTS[:2])
        assert tokens._backend is not None and tokens._backend is tokens.tok._tokenizer  # the direct path is on
        for special in (None, False, True):
            assert tokens.encode_many(TEXTS, special=special) == {t: tokens.encode(t, special=special) for t in TEXTS}
        assert first == {t: tokens.encode(t) for t in TEXTS[:2]}


def test_a_backend_that_truncates_is_not_called_directly(toy_tokenizer_dir: Path):
    from evalflow.models.api.tokens import rust_backend

    tok = load_tokenizer(str(toy_tokenizer_dir))
    assert rust_backend(tok) is tok._tokenizer
    tok._tokenizer.enable_truncation(4)
    assert rust_backend(tok) is None
