"""lm-eval's decontamination path: a task's per-document query, and its n-gram overlap with
training data.

A task with ``should_decontaminate: true`` names, per document, the text to look for in a model's
training data: ``doc_to_decontamination_query`` (a field name, a template, or a ``!function``; by
default the document's ``doc_to_text``), as lm-eval 0.4.13's ``ConfigurableTask`` resolves it.
Overlap is lm-eval's ``decontamination/decontaminate.py: get_train_overlap``: a document is
contaminated when any word n-gram of its normalized query (ASCII letters lower-cased, ASCII
punctuation deleted: lm-eval's ``Janitor``) occurs in the training set's n-grams. Those come as
lm-eval's ``scripts/clean_training_data`` writes them: a folder with ``info.json``
(``{"ngram_size": 13}``) and ``*.sorted.zst`` files of ``"<ngram> <document id>"`` lines (plain
``*.sorted`` text files are read too). Reading ``.zst`` needs the ``decontamination`` extra.

    query = decontamination_query(task, doc, doc_id=0)
    dirty = overlapping_docs({0: query, 1: other}, "pile_13grams/")   # {0}

One deviation: for a *template* query lm-eval applies ``ast.literal_eval`` to the rendered text,
which fails on ordinary text (``"Question: {{question}}"``, used by 19 of its tasks); here such
text is the query itself, and only a rendered Python literal is evaluated.
"""

from __future__ import annotations

import ast
import json
import string
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from evalflow.errors import ConfigError, TaskError
from evalflow.taskspec.format.spec import FunctionRef, TaskConfig
from evalflow.taskspec.prompts.templates import apply_template, call_function, doc_to_text

_NORMALIZE = str.maketrans(
    string.ascii_lowercase + string.ascii_uppercase, string.ascii_lowercase * 2, string.punctuation
)


def decontamination_query(task: TaskConfig, doc: Mapping[str, Any], *, doc_id: int | None = None) -> Any:
    """The document's decontamination query (None when the task does not decontaminate)."""
    if not task.should_decontaminate:
        return None
    spec = task.doc_to_decontamination_query
    if spec is None:
        return doc_to_text(task, doc, doc_id=doc_id)
    if isinstance(spec, str) and spec in doc:
        return doc[spec]
    if callable(spec) or isinstance(spec, FunctionRef):
        return call_function(spec)(doc)
    if not isinstance(spec, str):
        raise TaskError(
            f"task '{task.task}' ({task.source}): doc_to_decontamination_query is {spec!r}; use a "
            "field name, a Jinja template or a !function reference"
        )
    text = apply_template(spec, doc, task=task, what="doc_to_decontamination_query", doc_id=doc_id)
    try:
        return ast.literal_eval(text)
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        return text


def normalize(text: str) -> str:
    """lm-eval's ``Janitor.normalize_string``: ASCII letters lower-cased, ASCII punctuation deleted."""
    return text.translate(_NORMALIZE)


def word_ngrams(text: str, n: int) -> Iterator[str]:
    """lm-eval's ``word_ngrams``: every run of ``n`` whitespace-separated words, joined by spaces."""
    words = text.split()
    return (" ".join(words[i : i + n]) for i in range(len(words) - n + 1))


def ngram_size(folder: str | Path) -> int:
    info = Path(folder) / "info.json"
    try:
        size = json.loads(info.read_text(encoding="utf-8"))["ngram_size"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(
            f"decontamination n-grams folder {folder}: cannot read info.json with an "
            f"'ngram_size' ({type(exc).__name__}: {exc}); it is written by lm-eval's "
            "scripts/clean_training_data"
        ) from None
    if not isinstance(size, int) or size < 1:
        raise ConfigError(f"{info}: ngram_size must be a positive whole number, got {size!r}")
    return size


def ngram_files(folder: str | Path) -> list[Path]:
    files = sorted(Path(folder).glob("*.sorted.zst")) + sorted(Path(folder).glob("*.sorted"))
    if not files:
        raise ConfigError(f"decontamination n-grams folder {folder} holds no *.sorted.zst (or *.sorted) files")
    return files


def overlapping_docs(queries: Mapping[int, Any], folder: str | Path) -> set[int]:
    """The ids of documents whose query shares an n-gram with the training set's n-grams."""
    n = ngram_size(folder)
    lookup: dict[str, set[int]] = {}
    for doc_id, query in queries.items():
        for gram in word_ngrams(normalize(str(query)), n):
            lookup.setdefault(gram, set()).add(doc_id)
    found: set[int] = set()
    for path in ngram_files(folder):
        for line in _lines(path):
            ids = lookup.pop(line.rsplit(" ", 1)[0], None)
            if ids:
                found |= ids
            if not lookup:
                return found
    return found


def _lines(path: Path) -> Iterator[str]:
    if path.suffix != ".zst":
        with open(path, encoding="utf-8") as fh:
            yield from (line.rstrip("\n") for line in fh)
        return
    try:
        import zstandard
    except ImportError:
        raise ConfigError(
            f"{path} is zstd-compressed; reading it needs the decontamination extra: "
            "pip install 'evalflow[decontamination]' (or decompress it with `zstd -d`)"
        ) from None
    import io

    with open(path, "rb") as raw, zstandard.ZstdDecompressor().stream_reader(raw) as reader:
        yield from (line.rstrip("\n") for line in io.TextIOWrapper(reader, encoding="utf-8"))
