"""A model's chat template, read without loading the model, and rendered as transformers does.

The template *text* is what the few-shot stage's cache key holds, so it must be known at plan time
without torch: it comes from ``tokenizer_config.json`` / ``chat_template.jinja`` in a local model
folder, or from a GGUF file's ``tokenizer.chat_template`` metadata (parsing a GGUF takes seconds,
so the answer is memoized on disk by the file's content hash).

Rendering uses transformers' own ``render_jinja_template`` (imported only when prompts are built,
i.e. on a cache miss), so a prompt is byte-identical to ``tokenizer.apply_chat_template(...,
tokenize=False)`` as lm-eval calls it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from evalflow.cache.fingerprint import file_fingerprint
from evalflow.cache.store import default_cache_dir
from evalflow.errors import ConfigError

log = logging.getLogger(__name__)


def chat_template(model_config: Mapping[str, Any], name: str | None = None) -> tuple[str | None, dict[str, str]]:
    """The chat template of the model a config names (None when it has none) and the special
    tokens (bos_token, eos_token) transformers passes to it.

    ``name`` picks one of several named templates (lm-eval's ``--apply_chat_template NAME``).
    """
    templates, tokens = _templates(model_config)
    where = str(model_config.get("tokenizer") or model_config.get("pretrained"))
    return select_template(templates, name, where), tokens


def select_template(templates: str | dict[str, str] | None, name: str | None, where: str) -> str | None:
    """lm-eval's ``HFLM.chat_template`` choice: the named entry of a dict of templates, else its
    "default"; a single template is used whatever the name (lm-eval warns, and so do we)."""
    if isinstance(templates, dict):
        key = name or "default"
        if key not in templates:
            raise ConfigError(
                f"model {where} has no chat template named '{key}'; its templates are "
                f"{sorted(templates)}: set apply_chat_template to one of those names."
            )
        return templates[key]
    if name and templates is not None:
        log.warning("chat template '%s' asked for, but model %s has a single chat template; using it", name, where)
    return templates


def _templates(model_config: Mapping[str, Any]) -> tuple[str | dict[str, str] | None, dict[str, str]]:
    """Every chat template the model's tokenizer carries (a dict when they are named) and its
    special tokens, where transformers would find them."""
    pretrained = model_config.get("tokenizer") or model_config.get("pretrained")
    if not pretrained:
        return None, {}
    folder = Path(str(pretrained)).expanduser()
    gguf = model_config.get("gguf_file")
    if gguf and (folder / str(gguf)).is_file():  # transformers reads a GGUF's single template only
        meta = gguf_metadata(folder / str(gguf))
        return meta.get("chat_template"), {k: meta[k] for k in ("bos_token", "eos_token") if k in meta}
    if not folder.is_dir():
        return None, {}
    config_file = folder / "tokenizer_config.json"
    config = json.loads(config_file.read_text(encoding="utf-8")) if config_file.is_file() else {}
    tokens = {k: _token_text(config.get(k)) for k in ("bos_token", "eos_token") if config.get(k)}
    named = {
        f.stem: f.read_text(encoding="utf-8") for f in sorted((folder / "additional_chat_templates").glob("*.jinja"))
    }
    jinja = folder / "chat_template.jinja"
    template = jinja.read_text(encoding="utf-8") if jinja.is_file() else config.get("chat_template")
    if isinstance(template, list):  # the legacy layout of named templates
        named = {**{t.get("name"): t.get("template") for t in template}, **named}
        template = None
    if named:
        return ({"default": template, **named} if isinstance(template, str) else named), tokens
    return (template if isinstance(template, str) else None), tokens


def _token_text(token: Any) -> str:
    return token.get("content", "") if isinstance(token, Mapping) else str(token)


def gguf_metadata(path: Path) -> dict[str, Any]:
    """``chat_template``, ``bos_token`` and ``eos_token`` of a GGUF file, memoized by its hash."""
    memo = default_cache_dir() / "gguf-meta" / f"{file_fingerprint(path)}.json"
    if memo.is_file():
        return json.loads(memo.read_text(encoding="utf-8"))
    import gguf  # the reader is slow; only on the first use of a file

    reader = gguf.GGUFReader(str(path))

    def field(name: str) -> Any:
        f = reader.fields.get(name)
        return None if f is None else f.parts[f.data[0]]

    meta: dict[str, Any] = {}
    template = field("tokenizer.chat_template")
    if template is not None:
        meta["chat_template"] = bytes(template).decode("utf-8")
    tokens = reader.fields.get("tokenizer.ggml.tokens")
    for role in ("bos", "eos"):
        token_id = field(f"tokenizer.ggml.{role}_token_id")
        if tokens is not None and token_id is not None:
            meta[f"{role}_token"] = bytes(tokens.parts[tokens.data[int(token_id[0])]]).decode("utf-8")
    memo.parent.mkdir(parents=True, exist_ok=True)
    tmp = memo.with_suffix(".tmp")
    tmp.write_text(json.dumps(meta), encoding="utf-8")
    tmp.replace(memo)
    return meta


def unread_template_args(template: str, args: Mapping[str, Any]) -> list[str]:
    """The keys of ``args`` the chat ``template`` never reads (a variable it does not mention):
    passing them changes no prompt, which a user setting ``reasoning_effort`` should be told.

    >>> template = "{% if enable_thinking %}<think>{% endif %}{{ messages }}"
    >>> unread_template_args(template, {"enable_thinking": False, "reasoning_effort": "low"})
    ['reasoning_effort']
    """
    import jinja2
    from jinja2 import meta

    try:
        read = meta.find_undeclared_variables(jinja2.Environment().parse(template))
    except jinja2.TemplateSyntaxError:
        return []  # rendering reports a broken template with its own paragraph
    return [key for key in args if key not in read]


def render_chat(
    template: str,
    messages: Sequence[Mapping[str, str]],
    *,
    add_generation_prompt: bool = True,
    continue_final_message: bool = False,
    **special_tokens: Any,
) -> str:
    """``messages`` through ``template`` exactly as ``tokenizer.apply_chat_template(tokenize=False)``."""
    from transformers.utils.chat_template_utils import render_jinja_template

    rendered, _ = render_jinja_template(  # type: ignore[str-unpack]  # annotated str; returns (texts, indices)
        conversations=[list(map(dict, messages))],
        chat_template=template,
        add_generation_prompt=add_generation_prompt,
        continue_final_message=continue_final_message,
        **special_tokens,
    )
    return rendered[0]
