"""A GGUF model's dequantized weights and converted tokenizer, kept on disk so the next load is fast.

transformers loads a GGUF file by parsing it and dequantizing every tensor (SmolLM2-135M: 15 to
50 s on two cores, tokenizer included), and does so at every run. The result is deterministic, so
the first load saves it as an ordinary model folder (``config.json``, ``model.safetensors``,
tokenizer files) under ``<cache>/gguf-weights/<key>`` and later loads read that folder in about a
second. The key holds what decides the result: the GGUF file's content hash, the dtype, the
tokenizer's ``add_bos_token`` and the transformers version. The answers cache is unaffected: a
model's identity stays the GGUF file's hash.

The memo lives in one place per user, not in each response cache (:func:`evalflow.cache.store.weights_dir`:
``$EVALFLOW_WEIGHTS_DIR``, else ``~/.cache/evalflow/gguf-weights``), so a fresh ``cache_dir`` or
``$EVALFLOW_CACHE`` (a clean CI job) neither converts the file again nor stores another copy.

The folder is written next to its final place and renamed into it, with ``memo.json`` (holding the
weights file's hash) written last; a load checks that hash, so a damaged or half-written memo is
never used: it is deleted and the GGUF file loaded again. Costs disk (the fp32 weights: 540 MB for
SmolLM2); ``model.memo_gguf=false`` turns it off, ``python -m evalflow cache clear`` removes it.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evalflow.cache.fingerprint import file_fingerprint, fingerprint
from evalflow.cache.store import weights_dir

log = logging.getLogger(__name__)

MEMO_VERSION = 1
MARKER = "memo.json"
WEIGHTS = "model.safetensors"


def memo_folder(gguf_path: Path, dtype: str, add_bos_token: bool | None) -> Path:
    """Where the converted model of this GGUF file, dtype and tokenizer setting is kept."""
    import transformers

    key = fingerprint(
        ("gguf-memo", MEMO_VERSION, file_fingerprint(gguf_path), str(dtype), add_bos_token, transformers.__version__)
    )
    return weights_dir() / key


def load_memo(folder: Path, load_folder: Callable[[str], tuple[Any, Any]]) -> tuple[Any, Any] | None:
    """(tokenizer, model) from a complete, undamaged memo folder, else None (a bad one is removed)."""
    marker = folder / MARKER
    if not marker.is_file():
        return None
    try:
        expected = json.loads(marker.read_text(encoding="utf-8"))["weights"]
        if file_fingerprint(folder / WEIGHTS) != expected:
            raise ValueError(f"{WEIGHTS} does not match its recorded hash")
        loaded = load_folder(str(folder))
        os.utime(marker)  # last use: `cache gc max_size_gb=` removes the least recently used first
        return loaded
    except Exception as e:  # damaged, truncated, or written by an incompatible version
        log.warning("gguf memo %s is unusable (%s); loading the GGUF file again", folder, e)
        shutil.rmtree(folder, ignore_errors=True)
        return None


def write_memo(folder: Path, tokenizer: Any, model: Any) -> None:
    """Save the loaded tokenizer and weights as a model folder; any failure only costs the memo."""
    from safetensors.torch import save_model

    tmp = folder.with_name(f"{folder.name}.tmp-{os.getpid()}")
    try:
        tmp.mkdir(parents=True, exist_ok=True)
        config = model.config.to_dict()
        config.pop("quantization_config", None)  # the weights are plain tensors now
        (tmp / "config.json").write_text(json.dumps(config, indent=2, default=str), encoding="utf-8")
        save_model(model, str(tmp / WEIGHTS))  # tied weights stored once
        tokenizer.save_pretrained(str(tmp))
        (tmp / MARKER).write_text(json.dumps({"weights": file_fingerprint(tmp / WEIGHTS)}), encoding="utf-8")
        tmp.rename(folder)  # fails if another process got there first: its memo is as good
    except Exception as e:
        log.warning("could not keep the dequantized GGUF model in %s (%s); the next load converts it again", folder, e)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
