"""Few-shot samplers, fewshot_config merging, the split fallback order and the exclusion rule."""

from __future__ import annotations

import json
import os
import random
import subprocess
from pathlib import Path

import pytest

from evalflow.errors import ConfigError, TaskError
from evalflow.taskspec.format.spec import TaskConfig
from evalflow.taskspec.prompts.samplers import (
    excludes_eval_doc,
    fewshot_options,
    fewshot_source,
    make_sampler,
)

PEER_PY = Path.home() / ".cache/evalflow-peer/venv/bin/python"
POOL = [{"q": f"question {i}", "a": str(i)} for i in range(20)]


def test_default_sampler_is_pythons_random_sample_with_the_seed() -> None:
    sampler = make_sampler("default", POOL, seed=1234)
    rnd = random.Random(1234)
    for _ in range(5):  # one stream, consumed call after call
        expected = [POOL.index(d) for d in rnd.sample(POOL, 3)]
        assert list(sampler.sample(3)) == expected


def test_default_sampler_excludes_the_evaluated_doc_by_value() -> None:
    for k in range(20):
        ids = make_sampler("default", POOL, seed=k).sample(19, eval_doc=POOL[k])
        assert k not in ids and len(ids) == 19 == len(set(ids))


def test_duplicates_of_the_evaluated_doc_trigger_a_redraw_from_the_rest() -> None:
    pool = [{"q": "dup"}] * 3 + [{"q": str(i)} for i in range(3)]
    ids = make_sampler("default", pool, seed=0).sample(3, eval_doc={"q": "dup"})
    assert sorted(ids) == [3, 4, 5]


def test_stream_depends_on_what_was_drawn_before() -> None:
    a = make_sampler("default", POOL, seed=1)
    first, second = a.sample(2), a.sample(2)
    assert make_sampler("default", POOL, seed=1).sample(2) == first
    assert second != first  # the second document gets the continuation of the stream


def test_first_n_takes_pool_order_and_skips_the_evaluated_doc() -> None:
    s = make_sampler("first_n", POOL, seed=None)
    assert s.sample(3) == (0, 1, 2)
    assert s.sample(3, eval_doc=POOL[1]) == (0, 2, 3)
    assert s.sample(0) == ()
    with pytest.raises(TaskError, match="only 20"):
        s.sample(21)


def test_fewshot_indices_restrict_the_pool_and_ids_stay_pool_positions() -> None:
    assert make_sampler("first_n", POOL, seed=None, indices=[5, 2, 9]).sample(2) == (5, 2)
    ids = make_sampler("default", POOL, seed=3, indices=[4, 6, 8, 10]).sample(4)
    assert sorted(ids) == [4, 6, 8, 10]
    with pytest.raises(TaskError, match="fewshot_indices"):
        make_sampler("default", POOL, seed=3, indices=[99])


def test_errors_unknown_sampler_small_pool_and_missing_seed() -> None:
    with pytest.raises(TaskError, match="first_n"):
        make_sampler("firstn", POOL, seed=1)
    with pytest.raises(TaskError, match="pool has 3"):
        make_sampler("default", POOL[:3], seed=1).sample(3, eval_doc=POOL[0])
    with pytest.raises(ConfigError, match="fewshot_seed"):
        make_sampler("default", POOL, seed=None).sample(1)


def test_fewshot_options_inherit_task_fields_and_override_them() -> None:
    t = TaskConfig(
        task="t",
        fewshot_split="dev",
        doc_to_text="Q: {{q}}",
        doc_to_target="{{a}}",
        target_delimiter=" ",
        fewshot_delimiter="\n\n",
        gen_prefix="So",
        fewshot_config={
            "sampler": "first_n",
            "doc_to_target": "{{long}}",
            "fewshot_delimiter": "\n###\n",
            "target_delimiter": None,
        },
    )
    o = fewshot_options(t)
    assert (o.sampler, o.split, o.doc_to_text, o.doc_to_target) == ("first_n", "dev", "Q: {{q}}", "{{long}}")
    assert (o.fewshot_delimiter, o.target_delimiter, o.gen_prefix) == ("\n###\n", " ", "So")
    with pytest.raises(TaskError, match="did you mean 'sampler'"):
        fewshot_options(TaskConfig(task="t", fewshot_config={"samplr": "first_n"}))


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"fewshot_split": "dev", "training_split": "train"}, ("split", "dev")),
        ({"fewshot_config": {"split": "extra"}, "fewshot_split": "dev"}, ("split", "extra")),
        ({"fewshot_config": {"samples": [{"q": 1}]}, "training_split": "train"}, ("samples", ({"q": 1},))),
        ({"training_split": "train", "validation_split": "val", "test_split": "test"}, ("split", "train")),
        ({"validation_split": "val", "test_split": "test"}, ("split", "val")),
        ({"test_split": "test"}, ("split", "test")),
        ({}, None),
    ],
)
def test_fewshot_source_follows_lm_evals_order(fields: dict, expected: object) -> None:
    assert fewshot_source(TaskConfig(task="t", **fields)) == expected


@pytest.mark.parametrize(
    ("fields", "excluded"),
    [
        ({"fewshot_split": "train", "test_split": "test"}, False),  # gsm8k
        ({"training_split": "train", "test_split": "test"}, False),  # arc: no split named
        ({"training_split": "train", "validation_split": "validation"}, True),  # winogrande, boolq
        ({"fewshot_split": "test", "test_split": "test"}, True),
        ({"fewshot_split": "dev", "test_split": "test"}, False),  # mmlu
    ],
)
def test_evaluated_doc_is_excluded_exactly_when_fewshot_split_equals_test_split(fields: dict, excluded: bool) -> None:
    assert excludes_eval_doc(TaskConfig(task="t", **fields)) is excluded


@pytest.mark.skipif(not PEER_PY.exists(), reason="lm-eval's venv (~/.cache/evalflow-peer) is absent")
def test_draws_equal_lm_evals_samplers(tmp_path: Path) -> None:
    """Run lm-eval's own ContextSampler/FirstNSampler on the same pool and evaluated docs."""
    pool = [{"q": f"q{i % 17}", "n": i % 17} for i in range(25)]  # duplicate rows included
    evals = [pool[i] for i in (0, 3, 3, 16, 24, 7)] + [{"q": "new", "n": -1}]
    script = (
        "import json,sys\nfrom lm_eval.api.samplers import ContextSampler, FirstNSampler\n"
        "pool, evals = json.load(open(sys.argv[1]))\nout = {}\n"
        "for name, cls in (('default', ContextSampler), ('first_n', FirstNSampler)):\n"
        "    s = cls(pool, rnd=None); s.set_rnd(1234); rows = []\n"
        "    for n in (1, 3, 5):\n"
        "        for e in evals:\n"
        "            rows.append(s.sample(n, eval_doc=e)); rows.append(s.sample(n))\n"
        "    out[name] = rows\n"
        "print(json.dumps(out))\n"
    )
    (tmp_path / "in.json").write_text(json.dumps([pool, evals]))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    proc = subprocess.run(
        [str(PEER_PY), "-c", script, str(tmp_path / "in.json")], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    theirs = json.loads(proc.stdout.strip().splitlines()[-1])
    for name in ("default", "first_n"):
        s = make_sampler(name, pool, seed=1234)
        ours = []
        for n in (1, 3, 5):
            for e in evals:
                ours.append([pool[i] for i in s.sample(n, eval_doc=e)])
                ours.append([pool[i] for i in s.sample(n)])
        assert ours == theirs[name], name
