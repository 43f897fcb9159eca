"""A GGUF file's tokenizer, converted by transformers once and kept as an ordinary tokenizer folder.

transformers builds a tokenizer from a GGUF file's metadata (10-30 s for SmolLM2 on two cores) at
every load. The result is deterministic for one file and one transformers release, so the first
load saves it beside the GGUF weight memos (:func:`evalflow.cache.store.weights_dir`) under a key of
both: a folder written by another transformers release is never read (5.x writes
``tokenizer_config.json`` fields 4.x misreads), it is converted again under its own key.
Written to a temporary folder and renamed into place, so a half-written folder is never used.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from evalflow.cache.fingerprint import file_fingerprint, fingerprint
from evalflow.cache.store import weights_dir

MEMO_VERSION = 1


def transformers_release() -> str:
    """The installed transformers release (package metadata: no import), part of every key of
    something transformers converted."""
    from importlib import metadata

    return metadata.version("transformers")


def tokenizer_memo_folder(gguf_path: Path) -> Path:
    """Where this GGUF file's tokenizer, as this transformers release converts it, is kept."""
    key = fingerprint(("gguf-tokenizer", MEMO_VERSION, file_fingerprint(gguf_path), transformers_release()))
    return weights_dir() / f"tokenizer-{key}"


def gguf_tokenizer(gguf_path: Path) -> Any:
    """The transformers tokenizer of a GGUF file: from its memo folder, else converted and memoized."""
    from transformers import AutoTokenizer

    memo = tokenizer_memo_folder(gguf_path)
    if (memo / "tokenizer_config.json").is_file():
        return AutoTokenizer.from_pretrained(str(memo))
    tok = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
    tmp = memo.with_name(f"{memo.name}.tmp-{os.getpid()}")
    try:
        tok.save_pretrained(str(tmp))
        tmp.rename(memo)
    except OSError:  # another process put it there first (its folder is as good), or the disk is read-only
        pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return tok
