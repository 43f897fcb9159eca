"""``python -m evalflow make-tiny-vlm DIR``: its words; the model is
:func:`evalflow.models.hf.vlm.tiny_vlm.build_tiny_vlm`'s, whose module's docstring is the help."""

from __future__ import annotations

from pathlib import Path

from evalflow.commands.words import Usage, asks_for_help, parse_words, print_help
from evalflow.errors import ConfigError
from evalflow.models.hf.vlm import tiny_vlm

USAGE = Usage(
    "make-tiny-vlm",
    "DIR",
    {"tokenizer": str, "seed": int},
    min_positional=1,
    max_positional=1,
    note="(tokenizer: bytes, the default, or smollm2)",
)


def main(argv: list[str]) -> int:
    """``python -m evalflow make-tiny-vlm DIR [tokenizer=bytes|smollm2] [seed=N]``."""
    if asks_for_help(argv):
        print_help(tiny_vlm.__doc__, USAGE.line())
        return 0
    words = parse_words(argv, USAGE)
    name = words.options.get("tokenizer", "bytes")
    if name not in tiny_vlm.TOKENIZERS:
        raise ConfigError(
            f"make-tiny-vlm: tokenizer={name} is not one of {', '.join(tiny_vlm.TOKENIZERS)}. {USAGE.line()}"
        )
    tiny_vlm.require_pillow("make-tiny-vlm")
    folder = tiny_vlm.build_tiny_vlm(
        Path(words.positional[0]).absolute(), words.options.get("seed", 0), tiny_vlm.TOKENIZERS[name]()
    )
    print(
        f"a tiny random LLaVA (tokenizer={name}) is in {folder}; try it on the built-in image task:\n"
        f"  python -m evalflow model=hf_multimodal model.pretrained={folder} task=shapes_vqa"
    )
    return 0
