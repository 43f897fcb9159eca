"""``openai_completions``' ``tokenizer_backend`` (tiktoken, remote, auto, none) against lm-eval
0.4.13's own ``LocalCompletionsAPI``: both clients are pointed at the same loopback server
(``tests.support.tokenizer_server``) with the same requests, and must send the same request bodies
(token ids after truncation, ``ctxlen``-dependent scores, stop sequences with the EOS text) and
get the same answers.

tiktoken cannot fetch OpenAI's BPE files without internet, so a stand-in encoding (all bytes plus
a few merges, ``<|endoftext|>`` as its EOT token) replaces ``tiktoken.encoding_for_model`` for
both clients."""

from __future__ import annotations

import json
from typing import Any

import pytest

from evalflow.core.records import Request
from evalflow.errors import ModelError
from evalflow.models.registry import build_model
from tests.support.tokenizer_server import INFO, TokenizerServer

completions = pytest.importorskip("lm_eval.models.openai_completions")
pytest.importorskip("tenacity")
from lm_eval.api.instance import Instance  # noqa: E402  # after the skip: lm-eval is an optional extra

MAX_LENGTH = 16  # small, so that contexts, rolling texts and generation prompts are truncated
PAIRS = [
    ("The theory", " then"),
    ("", "the end"),
    ("Question: the three answers are ", "these"),
    ("Then the thin thread of the other thing that the theatre threw there", " threads"),
]
ROLLING = ["the three thin things then the other three", "short"]
GENERATIONS = [
    ("Tell the thing then", {"until": ["\n"], "max_gen_toks": 4}),
    ("Another, longer context that the truncation leaves the tail of", {"until": ["."], "max_gen_toks": 5}),
    ("Tell", {"until": ["\n"], "max_gen_toks": 4}),
]


def peer_run(url: str, **args: Any) -> tuple[list[Any], list[Any], list[Any]]:
    """lm-eval's class on the three request types."""
    lm = completions.LocalCompletionsAPI(model="m", base_url=url + "/completions", max_length=MAX_LENGTH, **args)

    def instances(rtype: str, items: list[Any]) -> list[Any]:
        return [Instance(rtype, {}, item, i) for i, item in enumerate(items)]

    return (
        [tuple(x) for x in lm.loglikelihood(instances("loglikelihood", PAIRS))],
        lm.loglikelihood_rolling(instances("loglikelihood_rolling", [(t,) for t in ROLLING])),
        lm.generate_until(instances("generate_until", GENERATIONS)),
    )


def our_run(url: str, **config: Any) -> tuple[list[Any], list[Any], list[Any]]:
    """evalflow's model on the same requests."""
    m = build_model(
        {
            "type": "openai_completions",
            "model": "m",
            "base_url": url,
            "max_length": MAX_LENGTH,
            "check_logprobs": False,  # lm-eval checks nothing; its probe requests would differ
            **config,
        }
    )
    return (
        [tuple(x) for x in m.loglikelihood([Request("loglikelihood", p) for p in PAIRS])],
        m.loglikelihood_rolling([Request("loglikelihood_rolling", (t,)) for t in ROLLING]),
        [g.text for g in m.generate_until([Request("generate_until", g) for g in GENERATIONS])],
    )


def both(args: dict[str, Any], **server: Any) -> tuple[Any, Any, TokenizerServer, TokenizerServer]:
    """lm-eval's and evalflow's answers, each from its own server of the same script."""
    with TokenizerServer("m", **server) as theirs_srv, TokenizerServer("m", **server) as ours_srv:
        theirs = peer_run(theirs_srv.url, **args)
        ours = our_run(ours_srv.url, **args)
    return theirs, ours, theirs_srv, ours_srv


def same_bodies(a: TokenizerServer, b: TokenizerServer) -> None:
    """The same completions bodies (as a multiset: rolling windows are ordered differently)."""
    assert sorted(map(json.dumps, a.completions())) == sorted(map(json.dumps, b.completions()))
    assert len(a.completions()) > len(PAIRS)


@pytest.fixture
def stand_in_tiktoken(monkeypatch: pytest.MonkeyPatch) -> Any:
    tiktoken = pytest.importorskip("tiktoken")
    merges = [b"th", b"he", b"the", b" t", b" the", b"in", b"er", b"re"]
    ranks = {bytes([b]): b for b in range(256)} | {m: 256 + k for k, m in enumerate(merges)}
    encoding = tiktoken.Encoding(
        "stand-in",
        pat_str=r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""",
        mergeable_ranks=ranks,
        special_tokens={"<|endoftext|>": 256 + len(merges)},
    )
    asked: list[str] = []

    def encoding_for_model(model: str) -> Any:
        asked.append(model)
        return encoding

    monkeypatch.setattr(tiktoken, "encoding_for_model", encoding_for_model)
    return asked


@pytest.mark.parametrize("tokenized_requests", [True, False])
def test_tiktoken_sends_and_scores_as_lm_eval(stand_in_tiktoken: list[str], tokenized_requests: bool):
    theirs, ours, theirs_srv, ours_srv = both(
        {"tokenizer_backend": "tiktoken", "tokenized_requests": tokenized_requests}
    )
    assert ours == theirs
    same_bodies(theirs_srv, ours_srv)
    assert stand_in_tiktoken == ["m", "m"]  # the encoding of the served model's name, by both
    stops = [b["stop"] for b in ours_srv.completions() if not b.get("echo")]
    assert stops and all("<|endoftext|>" in s for s in stops)  # the EOT text is a stop sequence
    if tokenized_requests:  # the longest pair was left-truncated to max_length - 1 tokens
        assert max(len(b["prompt"][0]) for b in ours_srv.completions() if b.get("echo")) == MAX_LENGTH - 1


@pytest.mark.parametrize("tokenized_requests", [True, False])
def test_remote_tokenizer_sends_and_scores_as_lm_eval(tokenized_requests: bool):
    theirs, ours, theirs_srv, ours_srv = both(
        {"tokenizer_backend": "remote", "tokenized_requests": tokenized_requests}, tokenizer_endpoints=True
    )
    assert ours == theirs
    same_bodies(theirs_srv, ours_srv)
    assert "/tokenizer_info" in ours_srv.gets and any(p == "/tokenize" for p, _ in ours_srv.posts)
    if not tokenized_requests:  # scored prompts are the server's decoded tokens, as lm-eval's
        assert any(p == "/detokenize" for p, _ in ours_srv.posts)


@pytest.mark.parametrize(
    "endpoints, info, uses",
    [
        (True, INFO, "remote"),
        (False, INFO, "huggingface"),  # no /tokenizer_info: lm-eval falls back to huggingface
        (True, {"bos_token": "<s>"}, "huggingface"),  # an answer without eos_token does not count
    ],
)
def test_auto_picks_the_backend_lm_eval_picks(endpoints: bool, info: dict[str, Any], uses: str, monkeypatch):
    from lm_eval import utils as lm_utils

    from evalflow.models.api import tokenizers

    loaded: list[str] = []
    monkeypatch.setattr(
        "evalflow.models.api.tokens.load_tokenizer", lambda name, **kw: loaded.append(name) or "hf-tokenizer"
    )
    with TokenizerServer("m", tokenizer_endpoints=endpoints, tokenizer_info=info) as srv:
        theirs = lm_utils.check_remote_tokenizer_support(srv.url + "/completions")
        settings = build_settings(srv.url, "auto")
        got = tokenizers.client_tokenizer(settings)
    assert theirs == (uses == "remote")
    assert isinstance(got, tokenizers.RemoteTokenizer) if uses == "remote" else loaded == ["m"]


def build_settings(url: str, backend: str) -> Any:
    from evalflow.models.api.server_settings import parse_settings

    return parse_settings("completions", {"model": "m", "base_url": url, "tokenizer_backend": backend})


@pytest.mark.parametrize("spelling", [None, "None", "none"])
def test_no_tokenizer_generates_from_text_and_refuses_loglikelihoods_before_a_request(spelling: Any):
    with TokenizerServer("m") as theirs_srv, TokenizerServer("m") as ours_srv:
        lm = completions.LocalCompletionsAPI(
            model="m", base_url=theirs_srv.url + "/completions", tokenizer_backend=spelling
        )
        theirs = lm.generate_until([Instance("generate_until", {}, g, i) for i, g in enumerate(GENERATIONS)])
        with pytest.raises(AssertionError) as peer_refusal:
            lm.loglikelihood([Instance("loglikelihood", {}, p, 0) for p in PAIRS[:1]])
        m = build_model(
            {"type": "openai_completions", "model": "m", "base_url": ours_srv.url, "tokenizer_backend": spelling}
        )
        ours = [g.text for g in m.generate_until([Request("generate_until", g) for g in GENERATIONS])]
        generated = len(ours_srv.completions())
        for rtype, args in (("loglikelihood", PAIRS[0]), ("loglikelihood_rolling", (ROLLING[0],))):
            with pytest.raises(ModelError) as refusal:
                getattr(m, rtype)([Request(rtype, args)])
            assert str(peer_refusal.value) in str(refusal.value)
        assert len(ours_srv.completions()) == generated  # refused before any request
    assert ours == theirs
    same_bodies_of = [json.dumps(b) for b in ours_srv.completions()]
    assert same_bodies_of == [json.dumps(b) for b in theirs_srv.completions()]
    assert all(isinstance(b["prompt"], str) for b in ours_srv.completions())  # text prompts
