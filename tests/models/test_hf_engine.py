"""``model.engine``: the reference engine runs none of the fast paths; the fast engine, and each of its
paths alone, gives the reference engine's answers (greedy text identical, log-likelihoods within the
parity tolerance of ``test_hf_peer``). That claim is what keeps ``evalflow/models/hf/fast/`` out of
the HF answers' cache key, which the last tests pin; a private API gone missing falls back to the
reference path with one log line.

Each path's own mechanics (what it shares, when it applies) are tested beside it (``test_hf_kv``,
``test_hf_packed_linear``, ``test_hf_shared_attention``, ``test_hf_lookup``, ...)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from evalflow.core.records import Request
from evalflow.errors import ConfigError
from evalflow.models import registry
from evalflow.models.hf import HFModel
from evalflow.models.hf.engine import REFERENCE
from tests.support.generation import FEW_SHOT, gen

TOLERANCE = 1e-5  # test_hf_peer's log-likelihood tolerance against lm-eval
QUESTIONS = [
    "Question: What is 2 + 2?\nAnswer:",
    "Question: What is the capital of France?\nAnswer:",
    "Question: What sat on the mat?\nAnswer:",
    "Question: What is 10 - 3?\nAnswer:",
]
CHOICES = [" four", " 4", " Paris", " the cat", " seven"]
# the fast paths one at a time (the others off), then all of them: the fast engine's default
ALONE = {
    "prefix_sharing": {"prefix_sharing": True, "batching": "lmeval", "draft_tokens": 0},
    "continuous": {"prefix_sharing": False, "batching": "continuous", "draft_tokens": 0},
    "draft_tokens": {"prefix_sharing": False, "batching": "continuous", "draft_tokens": 4},
    "native_attention": {
        "prefix_sharing": False,
        "batching": "continuous",
        "draft_tokens": 0,
        "native_attention": True,
    },
}
OFF = {"native_attention": False, "packed_linear": False}


def _answers(model: HFModel) -> dict[str, list]:
    scored = [Request("loglikelihood", (FEW_SHOT + q, c)) for q in QUESTIONS for c in CHOICES]
    rolling = [Request("loglikelihood_rolling", (FEW_SHOT + q,)) for q in QUESTIONS]
    generated = [gen(FEW_SHOT + q, until=["\n\n"], max_gen_toks=12) for q in QUESTIONS]
    return {
        "loglikelihood": model.loglikelihood(scored),
        "rolling": model.loglikelihood_rolling(rolling),
        "generate_until": model.generate_until(generated),
    }


@pytest.fixture(scope="module")
def reference(tiny_model_dir: Path) -> dict[str, list]:
    model = HFModel(str(tiny_model_dir), batch_size=3, engine="reference")
    assert model.paths == REFERENCE and model.fast is None and not model._keep_only_needed
    return _answers(model)


def _assert_same(got: dict[str, list], want: dict[str, list]) -> None:
    assert got["generate_until"] == want["generate_until"]
    for (lp, greedy), (ref_lp, ref_greedy) in zip(got["loglikelihood"], want["loglikelihood"], strict=True):
        assert lp == pytest.approx(ref_lp, abs=TOLERANCE) and greedy == ref_greedy
    assert got["rolling"] == pytest.approx(want["rolling"], abs=10 * TOLERANCE)


@pytest.mark.parametrize("path", [*ALONE, "packed_linear", "all"])
def test_each_fast_path_gives_the_reference_answers(tiny_model_dir: Path, reference, path: str) -> None:
    if path == "all":
        settings: dict = {}
    elif path == "packed_linear":
        settings = {
            **ALONE["prefix_sharing"],
            "prefix_sharing": False,
            "packed_linear": True,
            "native_attention": False,
        }
    else:
        settings = {**OFF, **ALONE[path]}
    model = HFModel(str(tiny_model_dir), batch_size=3, **settings)
    assert model.engine == "fast"  # and the paths apply to this model: they really ran
    assert model.fast.kv_works == (path != "packed_linear")
    assert model.fast.share_prefixes == (path in ("prefix_sharing", "all"))
    assert (model.fast.packed_linears > 0) == (path in ("packed_linear", "all") and model.paths.packed_linear)
    _assert_same(_answers(model), reference)


def test_the_reference_engine_ignores_the_fine_switches(tiny_model_dir: Path) -> None:
    model = HFModel(str(tiny_model_dir), engine="reference", prefix_sharing=True, batching="continuous", draft_tokens=4)
    assert model.paths == REFERENCE and model.batching == "lmeval" and model.fast is None


def test_an_unknown_engine_is_refused_naming_both() -> None:
    with pytest.raises(ConfigError, match="model.engine=fast.*model.engine=reference"):
        HFModel("/nowhere", engine="turbo")
    with pytest.raises(ConfigError, match="model.engine"):
        registry.model_identity({"type": "hf", "pretrained": "/nowhere", "engine": "turbo"})


def test_the_engine_is_part_of_the_answers_key(tiny_model_dir: Path) -> None:
    """The engines' floats differ in the last digits: a run asking for lm-eval's floats must not be
    served the fast engine's, so the key tells them apart (the default being ``fast``)."""
    base = {"type": "hf", "pretrained": str(tiny_model_dir)}
    fast, ref = (
        registry.model_identity({**base, "engine": "fast"}),
        registry.model_identity({**base, "engine": "reference"}),
    )
    assert fast != ref and fast == registry.model_identity(base)
    assert (
        registry.model_identity({**base, "packed_linear": False, "prefix_sharing": False}) == fast
    )  # fine switches: no


def _code_after_editing(monkeypatch: pytest.MonkeyPatch, edited: str) -> str:
    """HFModel's code hash as if ``edited`` (a path under evalflow/models/) had been changed."""
    real = registry.file_fingerprint
    monkeypatch.setattr(
        registry, "file_fingerprint", lambda p: real(p) + "-edited" if Path(p).as_posix().endswith(edited) else real(p)
    )
    return registry.model_code_hash(HFModel)


@pytest.mark.parametrize(
    "edited",
    [
        "hf/fast/packed_linear.py",
        "hf/fast/decode.py",
        "hf/fast/kv.py",
        "hf/fast/probes.py",
        "hf/vlm/vlm_passes.py",
        "hf/vlm/tiny_vlm.py",
        "hf/device.py",
    ],
)
def test_an_edit_to_the_speed_engine_or_the_vlm_room_keeps_the_hf_answers(monkeypatch, edited: str) -> None:
    before = registry.model_code_hash(HFModel)
    assert _code_after_editing(monkeypatch, edited) == before


@pytest.mark.parametrize(
    "edited", ["hf/score.py", "hf/generate.py", "hf/load.py", "hf/torch_ops.py", "lmeval_tokens.py"]
)
def test_an_edit_to_the_semantics_re_keys_the_hf_answers(monkeypatch, edited: str) -> None:
    before = registry.model_code_hash(HFModel)
    assert _code_after_editing(monkeypatch, edited) != before


@pytest.mark.parametrize(
    "module, name, paths",
    [
        ("transformers.cache_utils", "DynamicLayer", ("prefix_sharing", "continuous")),
        ("transformers.masking_utils", "sdpa_mask", ("continuous",)),
    ],
)
def test_a_missing_private_api_falls_back_to_the_reference_path(
    tiny_model_dir: Path, reference, monkeypatch, caplog, module: str, name: str, paths: tuple[str, ...]
) -> None:
    import importlib

    from evalflow.models.hf.fast import probes

    target, real = importlib.import_module(module), probes.available

    def probed_without(paths):  # the name gone while the probes look (transformers' own code uses it after)
        with pytest.MonkeyPatch.context() as gone:
            gone.delattr(target, name)
            return real(paths)

    monkeypatch.setattr(probes, "available", probed_without)
    with caplog.at_level(logging.WARNING, logger="evalflow.models.hf"):
        model = HFModel(str(tiny_model_dir), batch_size=3)
    missing = [r.getMessage() for r in caplog.records if "is missing" in r.getMessage()]
    assert len(missing) == 1 and name in missing[0]
    assert not any(getattr(model.paths, p) for p in paths)
    if "prefix_sharing" in paths:
        assert not model.fast.kv_works and not model.fast.share_prefixes and model.batching == "lmeval"
    _assert_same(_answers(model), reference)


def test_missing_onednn_ops_keep_torchs_linear_layers(tiny_model_dir: Path, monkeypatch, caplog) -> None:
    from evalflow.models.hf.fast import probes

    missing = probes.Probe(probes.PROBES[0].api, probes.PROBES[0].paths, lambda: False)
    monkeypatch.setattr(probes, "PROBES", (missing, *probes.PROBES[1:]))
    with caplog.at_level(logging.WARNING, logger="evalflow.models.hf"):
        model = HFModel(str(tiny_model_dir), batch_size=3)
    assert model.fast.packed_linears == 0 and not model.paths.packed_linear and model.paths.prefix_sharing
    assert sum("_reorder_linear_weight" in r.getMessage() for r in caplog.records) == 1
