"""WikiText's detokenizer and per-page counts (lm-eval 0.4.13 ``tasks/wikitext/preprocess_wikitext.py``).

The raw pages are Moses-tokenized (``" @-@ "``, ``" , "``); the model scores the detokenized
text, but perplexities are normalized by the words and bytes of the *original* page, as lm-eval does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any


def wikitext_detokenizer(doc: Mapping[str, Any]) -> str:
    """Undo WikiText's tokenization of the ``page`` field."""
    string = str(doc["page"])
    # contractions
    string = string.replace("s '", "s'")
    string = re.sub(r"/' [0-9]/", r"/'[0-9]/", string)
    # number separators
    for token, char in ((" @-@ ", "-"), (" @,@ ", ","), (" @.@ ", ".")):
        string = string.replace(token, char)
    # punctuation
    for mark in (":", ";", ".", "!", "?", ","):
        string = string.replace(f" {mark} ", f"{mark} ")
    # double brackets and quotes
    string = re.sub(r"\(\s*([^\)]*?)\s*\)", r"(\1)", string)
    string = re.sub(r"\[\s*([^\]]*?)\s*\]", r"[\1]", string)
    string = re.sub(r"{\s*([^}]*?)\s*}", r"{\1}", string)
    string = re.sub(r"\"\s*([^\"]*?)\s*\"", r'"\1"', string)
    string = re.sub(r"'\s*([^']*?)\s*'", r"'\1'", string)
    # miscellaneous
    string = string.replace("= = = =", "====")
    string = string.replace("= = =", "===")
    string = string.replace("= =", "==")
    string = string.replace(" " + chr(176) + " ", chr(176))
    string = string.replace(" \n", "\n")
    string = string.replace("\n ", "\n")
    string = string.replace(" N ", " 1 ")
    return string.replace(" 's", "'s")


def process_results(doc: Mapping[str, Any], results: Any) -> dict[str, tuple[float, int]]:
    """Per-page (loglikelihood, count) pairs; words and bytes counted on the raw page."""
    (loglikelihood,) = results
    words = len(re.split(r"\s+", doc["page"]))
    size = len(doc["page"].encode("utf-8"))
    return {
        "word_perplexity": (loglikelihood, words),
        "byte_perplexity": (loglikelihood, size),
        "bits_per_byte": (loglikelihood, size),
    }
