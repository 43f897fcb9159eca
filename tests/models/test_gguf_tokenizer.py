"""A GGUF file's converted tokenizer is memoized per file and per transformers release: a folder
written by another release is never read (the cause of 17 failures when the suite ran on
transformers 4.56 after 5.24 had filled the memo)."""

from __future__ import annotations

import json

import pytest
import transformers

from evalflow.models import gguf_tokenizer as memo_module


class RecordingTokenizers:
    """Stands in for ``AutoTokenizer``: records each load, and saves a folder a later load can read."""

    def __init__(self) -> None:
        self.loads: list[tuple[str, str | None]] = []

    def from_pretrained(self, where: str, gguf_file: str | None = None):
        self.loads.append((where, gguf_file))

        class Tok:
            def save_pretrained(self, folder: str) -> None:
                from pathlib import Path

                Path(folder).mkdir(parents=True)
                (Path(folder) / "tokenizer_config.json").write_text(json.dumps({}))

        return Tok()


@pytest.fixture()
def tokenizers(monkeypatch, tmp_path):
    monkeypatch.setenv("EVALFLOW_WEIGHTS_DIR", str(tmp_path / "weights"))
    fake = RecordingTokenizers()
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", fake.from_pretrained)
    return fake


def conversions(fake: RecordingTokenizers) -> int:
    return sum(1 for _, gguf in fake.loads if gguf is not None)


def test_the_second_load_reads_the_memo_and_another_release_converts_again(tokenizers, monkeypatch, tmp_path):
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF model bytes")
    monkeypatch.setattr(memo_module, "transformers_release", lambda: "5.24.0")
    memo_module.gguf_tokenizer(gguf)
    memo_module.gguf_tokenizer(gguf)
    assert conversions(tokenizers) == 1
    first = memo_module.tokenizer_memo_folder(gguf)
    assert sorted(p.name for p in first.parent.iterdir()) == [first.name]  # no temporary folder left

    monkeypatch.setattr(memo_module, "transformers_release", lambda: "4.56.0")
    assert memo_module.tokenizer_memo_folder(gguf) != first
    memo_module.gguf_tokenizer(gguf)
    assert conversions(tokenizers) == 2  # 5.24's folder was not read by 4.56


def test_another_file_has_its_own_memo(tokenizers, tmp_path):
    a, b = tmp_path / "a.gguf", tmp_path / "b.gguf"
    a.write_bytes(b"one model")
    b.write_bytes(b"another model")
    assert memo_module.tokenizer_memo_folder(a) != memo_module.tokenizer_memo_folder(b)
