"""The codec stores a long string once however often it recurs, and stays exact where orjson is not."""

from __future__ import annotations

import json
import math

import xxhash

from evalflow.cache.codec import SHARED_MIN, decode, encode
from evalflow.core.records import Instance, Request


def _instances(prompt: str) -> tuple[Instance, ...]:
    return tuple(Instance(0, i, Request("loglikelihood", (prompt, f" {c}"))) for i, c in enumerate("ABCD"))


def test_a_recurring_long_string_is_stored_once_and_decoded_as_one_object() -> None:
    prompt = "Question: " + "x" * 3000
    blob = encode(_instances(prompt))
    assert blob.startswith(b"EVF2 ") and blob.count(b"x" * 3000) == 1
    back = decode(blob)
    assert back == list(_instances(prompt))  # a top-level tuple comes back a list, as it always did
    assert len({id(inst.request.args[0]) for inst in back}) == 1
    assert isinstance(back[0].request.args, tuple)


def test_values_without_long_strings_keep_the_plain_format() -> None:
    blob = encode([(-1.5, True), "y" * (SHARED_MIN - 1)])
    assert blob.startswith(b"EVF1 ")
    assert decode(blob) == [[-1.5, True], "y" * (SHARED_MIN - 1)]


def test_values_orjson_cannot_write_exactly_round_trip() -> None:
    values = [math.inf, -math.inf, 2**70, "\ud800 lone", {"k": "\ud800" * SHARED_MIN}]
    back = decode(encode(values))
    assert back[:4] == values[:4] and back[4] == values[4]
    assert math.isnan(decode(encode({"acc": math.nan}))["acc"])


def test_entries_written_before_the_shared_table_still_decode() -> None:
    payload = json.dumps({"doc_id": 3, "prompt": "p" * 500, "fewshot_ids": [1], "__record__": "Context"}).encode()
    old = b"EVF1 " + xxhash.xxh64_hexdigest(payload).encode() + b"\n" + payload
    context = decode(old)
    assert (context.doc_id, context.prompt, context.fewshot_ids) == (3, "p" * 500, (1,))


def test_a_reference_to_a_string_that_is_not_there_is_corrupt() -> None:
    import pytest

    from evalflow.cache.codec import CorruptEntry

    payload = b'[[],{"__record__":"__ref__","i":0}]'
    with pytest.raises(CorruptEntry):
        decode(b"EVF2 " + xxhash.xxh64_hexdigest(payload).encode() + b"\n" + payload)
