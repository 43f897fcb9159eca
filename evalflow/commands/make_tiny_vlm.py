"""``python -m evalflow make-tiny-vlm DIR``: its words; the model is
:func:`evalflow.models.hf.vlm.tiny_vlm.build_tiny_vlm`'s, whose module's docstring is the help."""

from __future__ import annotations

from pathlib import Path

from evalflow.commands.reference import print_help
from evalflow.commands.words import Command, Option, asks_for_help, parse_words
from evalflow.errors import ConfigError
from evalflow.models.hf.vlm import tiny_vlm

COMMAND = Command(
    "make-tiny-vlm",
    "a tiny random VLM, to try image tasks offline (task=shapes_vqa)",
    "DIR",
    1,
    1,
    options=(
        Option("tokenizer", str, "bytes", "the tokenizer: bytes or smollm2"),
        Option("seed", int, 0, "the random weights' seed"),
    ),
    note="(tokenizer: bytes, the default, or smollm2)",
    doc=tiny_vlm.__doc__ or "",
)


def main(argv: list[str]) -> int:
    """``python -m evalflow make-tiny-vlm DIR [tokenizer=bytes|smollm2] [seed=N]``."""
    if asks_for_help(argv):
        print_help(COMMAND)
        return 0
    words = parse_words(argv, COMMAND)
    name = words.value("tokenizer")
    if name not in tiny_vlm.TOKENIZERS:
        raise ConfigError(
            f"make-tiny-vlm: tokenizer={name} is not one of {', '.join(tiny_vlm.TOKENIZERS)}. {COMMAND.line()}"
        )
    tiny_vlm.require_pillow("make-tiny-vlm")
    folder = tiny_vlm.build_tiny_vlm(
        Path(words.positional[0]).absolute(), words.value("seed"), tiny_vlm.TOKENIZERS[name]()
    )
    print(
        f"a tiny random LLaVA (tokenizer={name}) is in {folder}; try it on the built-in image task:\n"
        f"  python -m evalflow model=hf_multimodal model.pretrained={folder} task=shapes_vqa"
    )
    return 0
