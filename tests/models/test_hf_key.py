"""The HF answers' key is the reference path: the keyed modules define what an answer is and
import nothing of the speed engine (``evalflow/models/hf/fast/``), so an edit there re-runs no
answer while an edit to the scoring rule re-runs them all. What keeps ``fast/`` honest instead is
its equivalence tests (``hf_model.SEMANTICS`` names them)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from evalflow.cache.code import module_closure
from evalflow.core.records import Request
from evalflow.dag.node import EVALFLOW_DIR
from evalflow.models import registry
from evalflow.models.hf import HFModel

FAST = "evalflow.models.hf.fast"
DOOR = f"{FAST}.fast_engine"  # the one module of fast/ that HFModel imports, when the fast engine runs


def keyed_modules() -> list[str]:
    """The dotted names of the files HF answers are keyed by (``registry.code_files``)."""
    names = []
    for path in registry.code_files(HFModel):
        parts = Path(path).resolve().relative_to(EVALFLOW_DIR.resolve()).with_suffix("").parts
        names.append(".".join(("evalflow", *parts)))
    return names


def test_the_key_closure_holds_no_module_of_the_speed_engine() -> None:
    """Every import of the keyed modules, function-level ones included, walked transitively: none
    reaches ``fast/`` but the class's one door, which leads there alone."""
    keyed = keyed_modules()
    assert "evalflow.models.hf.score" in keyed and "evalflow.models.hf.hf_model" in keyed
    reached = {m for name in keyed for m in module_closure(name, EVALFLOW_DIR, exclude=(DOOR,))}
    assert sorted(m for m in reached if m == FAST or m.startswith(FAST + ".")) == []
    assert DOOR in module_closure("evalflow.models.hf.hf_model", EVALFLOW_DIR)  # the door is real


def test_the_reference_engine_never_imports_the_speed_engine(
    tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [m for m in sys.modules if m == FAST or m.startswith(FAST + ".")]:
        monkeypatch.delitem(sys.modules, name)
    model = HFModel(str(tiny_model_dir), batch_size=2, engine="reference")
    model.loglikelihood([Request("loglikelihood", ("The cat", " sat")), Request("loglikelihood", ("The cat", " ran"))])
    model.loglikelihood_rolling([Request("loglikelihood_rolling", ("Paris is the capital of France.",))])
    model.generate_until([Request("generate_until", ("The cat", {"until": ["\n"], "max_gen_toks": 4}))])
    assert model.fast is None and [m for m in sys.modules if m.startswith(FAST)] == []


# Run in a copy of the evalflow package: the answer keys of a few requests of each type, for each
# engine, before and after appending one line to each file named on the command line in turn.
ANSWER_KEYS = """
import json, sys
from pathlib import Path
import evalflow
from evalflow.cache.fingerprint import fingerprint
from evalflow.core.records import Request
from evalflow.scale.answer_cache import request_key
from evalflow.models.registry import model_identity

folder, package, edits = sys.argv[1], Path(sys.argv[2]), sys.argv[3:]
assert Path(evalflow.__file__).parent == package, evalflow.__file__  # the copy runs, not the checkout
requests = [
    Request("loglikelihood", ("The cat", " sat")),
    Request("loglikelihood_rolling", ("Paris is the capital of France.",)),
    Request("generate_until", ("The cat", {"until": ["\\n"]})),
]

def keys():
    configs = [{"type": "hf", "pretrained": folder, "engine": e} for e in ("fast", "reference")]
    ids = [fingerprint(model_identity(c)) for c in configs]
    return [request_key(i, r) for i in ids for r in requests]

out = {"": keys()}
for name in edits:
    path = package / name
    text = path.read_text()
    path.write_text(text + ("// " if name.endswith(".c") else "# ") + "a one-line edit\\n")
    out[name] = keys()
    path.write_text(text)
print(json.dumps(out))
"""


def test_a_one_line_edit_to_fast_re_runs_no_answer_and_one_to_the_scoring_rule_re_runs_them_all(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "tree"
    shutil.copytree(EVALFLOW_DIR, copy / "evalflow", ignore=shutil.ignore_patterns("__pycache__"))
    fast = sorted(
        str(p.relative_to(copy / "evalflow"))
        for p in (copy / "evalflow/models/hf/fast").rglob("*")
        if p.suffix in (".py", ".c")
    )
    assert "models/hf/fast/native/decode_attention.c" in fast and "models/hf/fast/shared_scoring.py" in fast
    semantic = ["models/hf/score.py", "models/hf/generate.py", "models/hf/hf_model.py"]
    done = subprocess.run(
        [sys.executable, "-c", ANSWER_KEYS, str(tiny_model_dir), str(copy / "evalflow"), *fast, *semantic],
        env={"PYTHONPATH": str(copy), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        cwd=tmp_path,  # `python -c` puts its working folder first on sys.path: not the checkout's
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    keys = json.loads(done.stdout)
    before = keys[""]
    assert len(set(before)) == len(before) == 6
    assert [name for name in fast if keys[name] != before] == []  # no answer re-runs
    for name in semantic:  # every answer re-runs: each of its keys is new
        assert not set(keys[name]) & set(before), name
