"""lm-eval habits on the native command line (``python -m evalflow``), before Hydra sees argv:
``model_args=k=v,...`` becomes ``model.k=v`` overrides (lm-eval's value typing kept), and lm-eval's
flags (``--model hf --tasks ...``) get one paragraph pointing at ``python -m evalflow lm-eval``.

    >>> native_argv(["model=hf", "model_args=pretrained=org/m,dtype=float32,max_length=2048"])
    ['model=hf', 'model.pretrained=org/m', 'model.dtype=float32', 'model.max_length=2048']
"""

from __future__ import annotations

from evalflow.config.override_words import split_word
from evalflow.errors import ConfigError
from evalflow.lmeval_compat.args import model_args_overrides
from evalflow.lmeval_compat.parser import FLAG_NAMES

_NOT_HINTED = {"--config"}  # a prefix of Hydra's --config-name/--config-dir: left to Hydra


def lm_eval_flags(argv: list[str]) -> list[str]:
    """The lm-eval flags in a native argv (``--model`` or ``--model=hf``)."""
    keys = [split_word(word)[0] for word in argv]
    return [key for key in keys if key in FLAG_NAMES - _NOT_HINTED]


def native_argv(argv: list[str]) -> list[str]:
    """argv with ``model_args=...`` expanded; raises the pointer paragraph for lm-eval flags."""
    flags = lm_eval_flags(argv)
    if flags:
        raise ConfigError(
            f"{', '.join(dict.fromkeys(flags))} {'is an lm-eval flag' if len(flags) == 1 else 'are lm-eval flags'}; "
            "`python -m evalflow` takes Hydra overrides (key=value). Run lm-eval's command unchanged as "
            "`python -m evalflow lm-eval " + " ".join(argv) + "` (it prints the native form), or write it "
            "natively, e.g. python -m evalflow model=hf model.pretrained=NAME task=[arc_easy,boolq] num_fewshot=5 "
            "limit=10 (docs/lm-eval-migration.md maps every flag)."
        )
    out: list[str] = []
    for arg in argv:
        key, value = split_word(arg)
        out.extend(model_args_overrides(value) if key == "model_args" and value is not None else [arg])
    return out
