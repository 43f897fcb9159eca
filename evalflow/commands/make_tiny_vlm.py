"""``python -m evalflow make-tiny-vlm DIR``: its words; the model is
:func:`evalflow.models.hf.vlm.tiny_vlm.build_tiny_vlm`'s, whose module's docstring is the help."""

from __future__ import annotations

from pathlib import Path

from evalflow.commands.reference import print_help
from evalflow.commands.words import Command, Option, asks_for_help, parse_words
from evalflow.errors import ConfigError
from evalflow.models.hf.vlm import tiny_idefics3, tiny_vlm

# arch= -> (its builder, what the message calls it, the backend it suits first)
ARCHES = {
    "llava": (tiny_vlm.build_tiny_vlm, "LLaVA", "hf_multimodal"),
    "idefics3": (tiny_idefics3.build_tiny_idefics3, "Idefics3", "vllm_vlm"),  # vLLM's CPU build loads it
}

COMMAND = Command(
    "make-tiny-vlm",
    "a tiny random VLM, to try image tasks offline (task=shapes_vqa)",
    "DIR",
    1,
    1,
    options=(
        Option("tokenizer", str, "bytes", "the tokenizer: bytes or smollm2"),
        Option("seed", int, 0, "the random weights' seed"),
        Option("arch", str, "llava", "the architecture: llava or idefics3 (loads in vLLM's CPU build)"),
    ),
    note="(tokenizer: bytes, the default, or smollm2; arch: llava, the default, or idefics3)",
    doc=tiny_vlm.__doc__ or "",
)


def main(argv: list[str]) -> int:
    """``python -m evalflow make-tiny-vlm DIR [tokenizer=bytes|smollm2] [seed=N] [arch=llava|idefics3]``."""
    if asks_for_help(argv):
        print_help(COMMAND)
        return 0
    words = parse_words(argv, COMMAND)
    name = words.value("tokenizer")
    if name not in tiny_vlm.TOKENIZERS:
        raise ConfigError(
            f"make-tiny-vlm: tokenizer={name} is not one of {', '.join(tiny_vlm.TOKENIZERS)}. {COMMAND.line()}"
        )
    arch = words.value("arch")
    if arch not in ARCHES:
        raise ConfigError(f"make-tiny-vlm: arch={arch} is not one of {', '.join(ARCHES)}. {COMMAND.line()}")
    tiny_vlm.require_pillow("make-tiny-vlm")
    build, label, backend = ARCHES[arch]
    folder = build(Path(words.positional[0]).absolute(), words.value("seed"), tiny_vlm.TOKENIZERS[name]())
    print(
        f"a tiny random {label} (tokenizer={name}) is in {folder}; try it on the built-in image task:\n"
        f"  python -m evalflow model={backend} model.pretrained={folder} task=shapes_vqa"
    )
    return 0
