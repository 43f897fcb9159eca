"""lm-eval 0.4.13's thinking arguments of ``HFLM``, ``VLLM`` and their multimodal subclasses
(``think_end_token``, ``enable_thinking``, ``chat_template_args``) as the run settings they are here.

- ``think_end_token`` is the run's ``think_end_token`` (only the text after the last marker is scored;
  the raw generation stays cached), as ``batch_size`` among the model's arguments is the run's; with
  it, ``vllm`` stops generating at EOS only and the task's stop sequences are cut after the thinking
  part, as lm-eval's ``VLLM`` does, and ``hf`` stops at them as it generates, as ``HFLM`` does.
- ``enable_thinking`` and ``chat_template_args`` are the run's ``chat_template_args``, the keyword
  arguments the chat template is rendered with, merged as each lm-eval class merges them: ``HFLM``
  renders with ``chat_template_args | {enable_thinking: X}`` (X given), ``VLLM`` with
  ``enable_thinking=X`` (None when not given) and ``chat_template_args`` less its own
  ``enable_thinking`` (``VLLM.__init__`` pops it and keeps the argument).
- ``HFMultimodalLM`` and ``VLLM_VLM`` accept all three (their parents' ``__init__`` does) and read
  none: their ``generate_until`` and ``apply_chat_template`` are their own. So here they are accepted
  and ignored, said in a note, and the answers are lm-eval's.

lm-eval's checks come before any model call: ``enable_thinking=True`` without ``think_end_token``
is refused (every class's ``__init__`` raises), and so is an integer ``think_end_token`` (see
:func:`_token_refusal`).

>>> thinking_overrides("hf", {"think_end_token": "</think>", "enable_thinking": False}, [], [])
["think_end_token='</think>'", 'chat_template_args={enable_thinking:false}']
>>> thinking_overrides("vllm", {"chat_template_args": {"enable_thinking": True, "x": 1}}, [], [])
['chat_template_args={enable_thinking:null,x:1}']
"""

from __future__ import annotations

from typing import Any

from evalflow.lmeval_compat.args import hydra_value

THINKING_ARGS = ("think_end_token", "enable_thinking", "chat_template_args")
# each argument's run setting (the surface table names it)
RUN_SETTING_OF = {
    "think_end_token": "think_end_token",
    "enable_thinking": "chat_template_args",
    "chat_template_args": "chat_template_args",
}
_RENDERED_HERE = ("hf", "vllm")  # presets whose chat prompts evalflow renders with the tokenizer's template
_IGNORED_BY = {"hf_multimodal": "HFMultimodalLM", "vllm_vlm": "VLLM_VLM"}
THINKING_PRESETS = frozenset((*_RENDERED_HERE, *_IGNORED_BY))


def thinking_overrides(preset: str, lm_args: dict[str, Any], refused: list[str], notes: list[str]) -> list[str]:
    """The run settings the thinking arguments in ``lm_args`` are, for the evalflow ``preset``;
    a refusal paragraph goes to ``refused``, an ignored argument's note to ``notes``."""
    given = [key for key in THINKING_ARGS if key in lm_args]
    if not given:
        return []
    think_end_token = lm_args.get("think_end_token")
    enable_thinking = lm_args.get("enable_thinking")
    if enable_thinking and think_end_token is None:
        refused.append(
            f"--model_args enable_thinking={enable_thinking}: lm-eval requires think_end_token with "
            "enable_thinking=True (the thinking part must be cut from the answer before scoring); add "
            "think_end_token=MARKER (e.g. think_end_token=</think>), or set enable_thinking=False"
        )
        return []
    if not isinstance(lm_args.get("chat_template_args") or {}, dict):
        refused.append(
            f"--model_args chat_template_args={lm_args['chat_template_args']!r} is not a mapping (lm-eval passes it "
            "to apply_chat_template as keyword arguments); write chat_template_args={'enable_thinking':False}"
        )
        return []
    if preset in _IGNORED_BY:
        notes.append(
            f"--model_args {', '.join(given)}: accepted and ignored, as lm-eval's {_IGNORED_BY[preset]} "
            "ignores them (its generate_until and apply_chat_template read none of them)"
        )
        return []
    out = []
    if think_end_token is not None:
        if isinstance(think_end_token, int) or str(think_end_token).isdigit():
            refused.append(_token_refusal(think_end_token))
            return []
        out.append(f"think_end_token={hydra_value(think_end_token)}")
    template_args = _template_args(preset, lm_args)
    if template_args is not None:
        out.append(f"chat_template_args={hydra_value(template_args)}")
    return out


def _template_args(preset: str, lm_args: dict[str, Any]) -> dict[str, Any] | None:
    """The chat template's keyword arguments as lm-eval's class for ``preset`` merges them."""
    given = dict(lm_args.get("chat_template_args") or {})
    if preset == "vllm":  # VLLM: enable_thinking=X always, chat_template_args' own enable_thinking dropped
        if "enable_thinking" not in lm_args and "chat_template_args" not in lm_args:
            return None
        given.pop("enable_thinking", None)
        return {"enable_thinking": lm_args.get("enable_thinking"), **given}
    if lm_args.get("enable_thinking") is not None:
        given["enable_thinking"] = lm_args["enable_thinking"]
    return given or None


def _token_refusal(token: Any) -> str:
    """Why an integer ``think_end_token`` is refused, and what to give instead."""
    return (
        f"--model_args think_end_token={token}: a token id. lm-eval's HFLM cuts the generated token ids "
        "after the id's last occurrence and then decodes them with special tokens skipped; evalflow scores "
        "the text after the marker's last occurrence in the cached generation, and a token id's text is not "
        "that cut (a special token's text is skipped by decoding, and the same text can be spelled by other "
        "tokens), so the answers could differ. Give the marker's text instead: think_end_token=</think> (the "
        "token's text, tokenizer.decode([ID]))"
    )
