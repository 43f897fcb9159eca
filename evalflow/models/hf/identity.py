"""What an HF model's cached responses are keyed by, computed without torch or transformers.

A fully cached run only needs this, so it reads file bytes (memoized per process) and, for hub
ids, the commit a revision points to in the local Hugging Face cache, never the network.

- local folder: the contents of its weight, config, tokenizer and code files (a moved folder keeps
  its cache, an edited one does not);
- ``gguf_file``: the contents of that one file (the tokenizer is embedded in it);
- hub id: the id, the revision, and the commit hash when the local HF cache knows it.
"""

from __future__ import annotations

import os
import re
from importlib import metadata
from pathlib import Path
from typing import Any

from evalflow.cache.fingerprint import file_fingerprint, fingerprint
from evalflow.errors import ModelError

IDENTITY_VERSION = 1  # bump when HFModel's scoring rules change, so old cached answers are not reused

# Files of a model folder that decide its outputs. README, images, .git, training logs do not.
# .jinja: a chat template saved beside the tokenizer (transformers >= 4.43), which a chat-messages VLM renders with
MODEL_FILE_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".json", ".model", ".txt", ".py", ".tiktoken", ".jinja")

_COMMIT = re.compile(r"^[0-9a-f]{40}$")


def looks_like_path(name: str) -> bool:
    """A name that can only be a filesystem path, never a hub id like ``org/model``."""
    return name.startswith(("/", ".", "~")) or name.count("/") > 1


def folder_fingerprint(folder: Path) -> str:
    """Fingerprint of the files (top level) of a model folder that decide its outputs."""
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.name.endswith(MODEL_FILE_SUFFIXES))
    if not files:
        raise ModelError(
            f"model folder '{folder}' holds no weight, config or tokenizer files (looked for "
            f"{', '.join(MODEL_FILE_SUFFIXES)}). Point model.pretrained at the folder that "
            "save_pretrained wrote, or set model.gguf_file for a GGUF file."
        )
    return fingerprint([(p.name, file_fingerprint(p)) for p in files])


def hub_cache_dir() -> Path:
    """Where huggingface_hub keeps downloads, by its own environment rules."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]) / "hub"
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(xdg) / "huggingface" / "hub"


def hub_commit(repo_id: str, revision: str | None) -> str | None:
    """The commit ``revision`` of a hub model resolves to in the local cache, or None if unknown."""
    rev = revision or "main"
    if _COMMIT.match(rev):
        return rev
    ref = hub_cache_dir() / ("models--" + repo_id.replace("/", "--")) / "refs" / rev
    try:
        text = ref.read_text().strip()
    except OSError:
        return None
    return text if _COMMIT.match(text) else None


def weights_identity(
    pretrained: str, revision: str | None, gguf_file: str | None, subfolder: str = ""
) -> dict[str, Any]:
    """The part of the identity that says which weights (and embedded tokenizer) are used; with
    ``subfolder`` (lm-eval's: config, tokenizer and weights all read from it) that folder's files."""
    folder = Path(os.path.expanduser(pretrained))
    if folder.is_dir() and subfolder:
        inner = folder / subfolder
        if not inner.is_dir():
            raise ModelError(
                f"model.subfolder '{subfolder}' is not a folder in model.pretrained '{pretrained}'; "
                "subfolder names the folder inside it that holds the model's files: fix either key."
            )
        return {"folder": folder_fingerprint(inner)}
    if folder.is_dir():
        if gguf_file:
            path = folder / gguf_file
            if not path.is_file():
                raise ModelError(
                    f"model.gguf_file '{gguf_file}' is not a file in model.pretrained '{pretrained}'. "
                    "gguf_file is the file's name inside that folder; fix either key."
                )
            return {"gguf": file_fingerprint(path)}
        return {"folder": folder_fingerprint(folder)}
    if looks_like_path(pretrained) or folder.exists():
        raise ModelError(
            f"model.pretrained '{pretrained}' is not a folder. Give the folder save_pretrained "
            "wrote (with model.gguf_file for a GGUF file inside it) or a Hugging Face hub id."
        )
    return {
        "hub_id": pretrained,
        "revision": revision or "main",
        "commit": hub_commit(pretrained, revision),
        "gguf_file": gguf_file,
        "subfolder": subfolder,
    }


def adapter_identity(key: str, source: str | None, revision: str | None) -> dict[str, Any] | None:
    """A PEFT adapter or delta weights (``model.peft``, ``model.delta``): a local folder's files
    (adapter_config.json, adapter_model.safetensors, ...), or a hub id and the commit it resolves to."""
    if source is None:
        return None
    folder = Path(os.path.expanduser(source))
    if folder.is_dir():
        return {"folder": folder_fingerprint(folder)}
    if looks_like_path(source) or folder.exists():
        raise ModelError(
            f"{key} '{source}' is not a folder. Give the folder save_pretrained wrote for it, or a Hugging Face hub id."
        )
    return {"hub_id": source, "revision": revision or "main", "commit": hub_commit(source, revision)}


def tokenizer_identity(tokenizer: str | None, revision: str | None) -> Any:
    """A separate tokenizer: its folder's contents, or its hub id and commit."""
    if tokenizer is None:
        return None
    folder = Path(os.path.expanduser(tokenizer))
    if folder.is_dir():
        return {"folder": folder_fingerprint(folder)}
    return {"hub_id": tokenizer, "commit": hub_commit(tokenizer, revision)}


def library_versions() -> dict[str, str | None]:
    """Installed torch/transformers/tokenizers versions (read from metadata, not imported).

    A new release can change tokenization or kernels, hence outputs; answers computed by another
    version are not reused.
    """
    out: dict[str, str | None] = {}
    for name in ("torch", "transformers", "tokenizers"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out
