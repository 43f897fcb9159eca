"""The bundle's file names and script text: FNV-1a 32 as app.js computes it, the key's query
encoded as encodeURIComponent encodes it, and JSON that no text can break out of."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from evalflow.view.bundle import MODE_META, api_key, bundle_index, data_name, fnv1a32, js_json, script
from tests.support.view_server_runs import HOSTILE


@pytest.mark.parametrize(
    "text,expected",
    # the FNV-1a 32 reference vectors (draft-eastlake-fnv's test suite)
    [("", 0x811C9DC5), ("a", 0xE40C292C), ("foobar", 0xBF9CF968)],
)
def test_fnv1a32_vectors(text: str, expected: int) -> None:
    assert fnv1a32(text) == expected
    assert data_name(text) == f"{expected:08x}.js"


def test_non_ascii_keys_hash_their_utf8_bytes() -> None:
    assert fnv1a32("é") == fnv1a32_bytes("é".encode()) != fnv1a32_bytes("é".encode("latin-1"))


def fnv1a32_bytes(data: bytes) -> int:
    h = 0x811C9DC5
    for byte in data:
        h = ((h ^ byte) * 0x01000193) % 2**32
    return h


def test_key_sorts_words_and_encodes_as_encode_uri_component() -> None:
    key = api_key("/api/sample", {"task": "mmlu_a b", "id": "0:sweep/1,x", "doc_id": "3", "filter": "get-answer"})
    assert key == "/api/sample?doc_id=3&filter=get-answer&id=0%3Asweep%2F1%2Cx&task=mmlu_a%20b"
    assert api_key("/api/runs", {}) == "/api/runs"
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: encodeURIComponent itself cannot be asked")
    value = "a/b:c,d é!~*'()?&=#+"
    out = subprocess.run(
        [node, "-e", f"process.stdout.write(encodeURIComponent({json.dumps(value)}))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert api_key("/x", {"v": value}) == f"/x?v={out}"


@pytest.mark.parametrize("text", HOSTILE)
def test_json_in_a_script_cannot_end_it(text: str) -> None:
    encoded = js_json({"answer": text, text: [text]})
    for raw in ("<", ">", "&", "\u2028", "\u2029"):
        assert raw not in encoded
    assert json.loads(encoded) == {"answer": text, text: [text]}


def test_a_data_script_runs_in_node_and_gives_back_the_text() -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    payload = {"rows": list(HOSTILE)}
    program = (
        "const got = {}; globalThis.window = {EVALFLOW_BUNDLE: {put: (k, v) => { got[k] = v; }}};\n"
        + script("/api/x?id=1", payload)
        + "process.stdout.write(JSON.stringify(got));"
    )
    out = subprocess.run([node, "-e", program], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == {"/api/x?id=1": payload}


@pytest.mark.parametrize(
    "html",
    [
        '<!doctype html><html><head><meta name="evalflow-mode" content="server">\n'
        '<script src="/static/app.js"></script>',
        '<!doctype html><html><head><script src="static/app.js"></script></head></html>',
    ],
)
def test_index_is_marked_as_a_bundle_with_relative_paths(html: str) -> None:
    marked = bundle_index(html)
    assert marked.count('name="evalflow-mode"') == 1 and MODE_META in marked
    assert '"/static/' not in marked and 'src="static/app.js"' in marked


def test_a_metric_that_is_not_a_number_is_null() -> None:
    assert js_json({"acc": float("nan"), "rows": [float("inf"), 0.5], "n": 3}) == '{"acc":null,"rows":[null,0.5],"n":3}'
