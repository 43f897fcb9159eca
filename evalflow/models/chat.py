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
from pathlib import Path
from typing import Any, Mapping, Sequence

from evalflow.cache.fingerprint import file_fingerprint
from evalflow.cache.store import default_cache_dir


def chat_template(model_config: Mapping[str, Any]) -> tuple[str | None, dict[str, str]]:
    """The chat template of the model a config names (None when it has none) and the special
    tokens (bos_token, eos_token) transformers passes to it."""
    pretrained = model_config.get("tokenizer") or model_config.get("pretrained")
    if not pretrained:
        return None, {}
    folder = Path(str(pretrained)).expanduser()
    gguf = model_config.get("gguf_file")
    if gguf and (folder / str(gguf)).is_file():
        meta = gguf_metadata(folder / str(gguf))
        return meta.get("chat_template"), {k: meta[k] for k in ("bos_token", "eos_token") if k in meta}
    if not folder.is_dir():
        return None, {}
    config_file = folder / "tokenizer_config.json"
    config = json.loads(config_file.read_text(encoding="utf-8")) if config_file.is_file() else {}
    tokens = {k: _token_text(config.get(k)) for k in ("bos_token", "eos_token") if config.get(k)}
    jinja = folder / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text(encoding="utf-8"), tokens
    template = config.get("chat_template")
    if isinstance(template, list):  # named templates: transformers picks "default"
        template = {t.get("name"): t.get("template") for t in template}.get("default")
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

    rendered, _ = render_jinja_template(
        conversations=[list(map(dict, messages))],
        chat_template=template,
        add_generation_prompt=add_generation_prompt,
        continue_final_message=continue_final_message,
        **special_tokens,
    )
    return rendered[0]
