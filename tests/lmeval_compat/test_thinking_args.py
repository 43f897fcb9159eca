"""lm-eval 0.4.13's thinking arguments (``think_end_token``, ``enable_thinking``,
``chat_template_args``) under the front door: the run settings they become for each wrapped class,
lm-eval's refusals, the chat template rendered with them as lm-eval's HFLM renders it, and the new
setting keyed into the prompt stages only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evalflow.config.compose import compose_config
from evalflow.config.settings import settings_from_config
from evalflow.errors import ConfigError
from evalflow.lmeval_compat.args import cli_model_args
from evalflow.lmeval_compat.parser import parse
from evalflow.lmeval_compat.translate import Translation, translate
from evalflow.run.phases import chat_format

# a Qwen3-style template: enable_thinking=false closes an empty thinking block; any other keyword shows
THINKING_TEMPLATE = (
    "{%- for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}"
    "{%- if add_generation_prompt %}<|assistant|>"
    "{%- if enable_thinking is defined and enable_thinking is false %}<think></think>{% else %}<think>{% endif %}"
    "{%- if style is defined %}[{{ style }}]{% endif %}{% endif %}"
)


def front_door(model: str, model_args: str) -> Translation:
    return translate(parse(["--model", model, "--model_args", model_args, "--tasks", "arc_easy"]))


def thinking_overrides(tr: Translation) -> list[str]:
    return [o for o in tr.overrides if o.startswith(("think_end_token=", "chat_template_args="))]


@pytest.mark.parametrize("model", ["hf", "vllm"])
def test_think_end_token_is_the_run_setting(model: str) -> None:
    tr = front_door(model, "pretrained=/m,think_end_token=</think>")
    assert thinking_overrides(tr) == ["think_end_token='</think>'"]
    assert not any("think_end_token" in o for o in tr.overrides if "model." in o)  # not a model key
    assert settings_from_config(compose_config([f"model={tr.preset}", *tr.overrides])).think_end_token == "</think>"


CASES = [
    # HFLM: chat_template_args | {enable_thinking: X} when X is given
    ("hf", "enable_thinking=False", {"enable_thinking": False}),
    ("hf", "think_end_token=</think>,enable_thinking=True", {"enable_thinking": True}),
    ("hf", 'chat_template_args={"style":"brief","enable_thinking":True},enable_thinking=False', None),
    ("hf", 'chat_template_args={"enable_thinking":False}', {"enable_thinking": False}),
    # VLLM: enable_thinking=X always (None when not given), chat_template_args' own enable_thinking dropped
    ("vllm", "enable_thinking=False", {"enable_thinking": False}),
    (
        "vllm",
        'chat_template_args={"style":"brief","enable_thinking":False}',
        {"enable_thinking": None, "style": "brief"},
    ),
]


@pytest.mark.parametrize("model,args,expected", CASES)
def test_enable_thinking_and_chat_template_args_merge_as_lm_eval_merges_them(
    model: str, args: str, expected: dict[str, Any] | None
) -> None:
    expected = expected or {"style": "brief", "enable_thinking": False}
    tr = front_door(model, f"pretrained=/m,{args}")
    settings = settings_from_config(compose_config([f"model={tr.preset}", *tr.overrides]))
    assert dict(settings.chat_template_args or {}) == expected


@pytest.mark.parametrize("model", ["hf-multimodal", "vllm-vlm"])
def test_the_multimodal_classes_ignore_them_as_lm_eval_does(model: str) -> None:
    tr = front_door(model, 'pretrained=/m,think_end_token=</think>,enable_thinking=True,chat_template_args={"x":1}')
    model_keys = [o for o in tr.overrides if "model." in o]
    assert thinking_overrides(tr) == [] and not any("think" in o or "chat_template" in o for o in model_keys)
    assert [n for n in tr.notes if "enable_thinking" in n] == [
        f"--model_args think_end_token, enable_thinking, chat_template_args: accepted and ignored, as lm-eval's "
        f"{'HFMultimodalLM' if model == 'hf-multimodal' else 'VLLM_VLM'} ignores them (its generate_until and "
        "apply_chat_template read none of them)"
    ]


@pytest.mark.parametrize("model", ["hf", "vllm", "hf-multimodal", "vllm-vlm"])
def test_enable_thinking_without_think_end_token_is_refused(model: str) -> None:
    with pytest.raises(ConfigError, match="enable_thinking=True: lm-eval requires think_end_token"):
        front_door(model, "pretrained=/m,enable_thinking=True")


def test_a_token_id_is_refused_with_the_text_to_give() -> None:
    with pytest.raises(ConfigError, match=r"think_end_token=151668: a token id.*think_end_token=</think>"):
        front_door("hf", "pretrained=/m,think_end_token=151668")


def test_chat_template_args_must_be_a_mapping() -> None:
    with pytest.raises(ConfigError, match="chat_template_args='x' is not a mapping"):
        front_door("hf", "pretrained=/m,chat_template_args=x")


def test_the_setting_keys_the_chat_format_only_when_prompts_are_chat_formatted(tmp_path: Path) -> None:
    folder = _template_folder(tmp_path)

    def chat(*words: str) -> Any:
        return chat_format(settings_from_config(compose_config(["model=hf", f"model.pretrained={folder}", *words])))

    assert chat("chat_template_args={enable_thinking:false}") is None  # plain prompts: nothing to render with
    plain, thinking = chat("apply_chat_template=true"), chat("apply_chat_template=true", "chat_template_args={x:1}")
    assert "template_args" not in plain  # unset: the key of every run without it is unchanged
    assert thinking == {**plain, "template_args": {"x": 1}}
    with pytest.raises(ConfigError, match="chat_template_args=.*is not a mapping"):
        chat("chat_template_args=7")


def test_a_chat_api_refuses_it(tmp_path: Path) -> None:
    words = ["model=openai_chat", "model.model=m", "apply_chat_template=true", "chat_template_args={x:1}"]
    with pytest.raises(ConfigError, match="takes chat messages and renders them with its own template"):
        chat_format(settings_from_config(compose_config(words)))


def _template_folder(tmp_path: Path) -> Path:
    """A tokenizer folder whose only content is the thinking template (enough for chat_format)."""
    folder = tmp_path / "tok"
    folder.mkdir()
    (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": THINKING_TEMPLATE}))
    return folder


RENDER_ARGS = [
    "think_end_token=</think>,enable_thinking=False",
    'think_end_token=</think>,enable_thinking=True,chat_template_args={"style":"brief"}',
    'chat_template_args={"enable_thinking":False,"style":"terse"}',
    "think_end_token=</think>",
    'think_end_token=</think>,enable_thinking=False,chat_template_args={"enable_thinking":True,"style":"x"}',
]


@pytest.mark.slow
def test_the_prompt_is_the_one_lm_eval_renders(toy_library: Path, tmp_path: Path) -> None:
    """A real tiny model whose chat template reads enable_thinking: evalflow's prompt of toy_gen's
    first document, under the front door's settings, is lm-eval's HFLM.apply_chat_template of it."""
    hf = pytest.importorskip("lm_eval.models.huggingface")
    from evalflow.cache.store import CacheStore
    from evalflow.run.parts import select_tasks
    from evalflow.run.preview import prompt_outputs
    from tests.support.tiny_models import build_tiny_model

    folder = build_tiny_model(tmp_path / "m", add_bos=False)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    (folder / "tokenizer_config.json").write_text(json.dumps({**config, "chat_template": THINKING_TEMPLATE}))

    def ours(*overrides: str) -> str:
        words = [f"model.pretrained={folder}", f"include_path=[{toy_library}]", "task=[toy_gen]", "limit=1"]
        settings = settings_from_config(compose_config(["model=hf", *words, f"cache_dir={tmp_path / 'c'}", *overrides]))
        store = CacheStore(settings.cache_dir)
        try:
            return str(prompt_outputs(select_tasks(settings).tasks[0], settings, store)["instances"][0].request.args[0])
        finally:
            store.close()

    question = ours()  # zero-shot, plain: the user turn's text
    rendered = []
    for args in RENDER_ARGS:
        tr = front_door("hf", f"pretrained={folder},{args}")
        mine = ours("apply_chat_template=true", *thinking_overrides(tr))
        lm = hf.HFLM(pretrained=str(folder), device="cpu", **cli_model_args([args]))
        assert mine == lm.apply_chat_template([{"role": "user", "content": question}]), args
        rendered.append(mine)
    assert len(set(rendered)) == len(RENDER_ARGS)  # each case renders its own prompt


def test_enable_thinking_with_a_loglikelihood_task_is_refused_before_the_model(toy_library: Path) -> None:
    from evalflow.lmeval_compat.before_run import refuse_thinking_loglikelihood, selected_before_run

    def check(tasks: str, thinking: str = "True") -> None:
        args = f"pretrained=/m,think_end_token=</think>,enable_thinking={thinking}"
        argv = ["--model", "hf", "--model_args", args, "--tasks", tasks, "--include_path", str(toy_library)]
        tr = translate(parse(argv))
        refuse_thinking_loglikelihood(tr, selected_before_run(tr))

    with pytest.raises(ConfigError, match="enable_thinking=True is not compatible with loglikelihood tasks.*: toy_mc"):
        check("toy_gen,toy_mc")
    check("toy_gen")  # generation only: accepted
    check("toy_mc", "False")  # thinking off: accepted
