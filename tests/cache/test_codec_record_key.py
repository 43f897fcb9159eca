"""A document field named ``__record__`` (the codec's record tag) keeps its cache entry readable."""

from __future__ import annotations

import json
from pathlib import Path

from evalflow.cache.codec import decode, encode
from evalflow.core.records import DocSet
from tests.support.runs import Runner, stage_hits


def test_mappings_with_the_record_tag_as_a_key_round_trip() -> None:
    doc = {"__record__": "Doc", "question": "q", "nested": {"__record__": "__mapping__", "items": 1}}
    value = DocSet("test", (doc,), None, (), "fp")
    assert decode(encode(value)) == value
    assert decode(encode({"__record__": None})) == {"__record__": None}


def test_a_task_whose_documents_have_a_record_field_is_cached(tmp_path: Path, toy_library: Path) -> None:
    for split in ("train", "test"):
        data = toy_library.parent / "data" / f"{split}.jsonl"
        rows = [{**json.loads(line), "__record__": "Instance"} for line in data.read_text().splitlines()]
        data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = Runner(toy_library, tmp_path / "cache", tmp_path / "out")
    first, _, _ = run(limit=5)
    second, manifest, _ = run(limit=5)
    assert all(stage_hits(manifest).values()), stage_hits(manifest)
    assert second["results"] == first["results"]
