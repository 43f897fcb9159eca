"""The command line is one package: library code never imports evalflow.commands, and each
subcommand ``python -m evalflow --help`` lists is the ``main`` of its own module there.

Function-level imports count too (read with ``ast``, nothing imported): a lazy import of a
command-line helper is still the library depending on the command line.
"""

from __future__ import annotations

import ast
from pathlib import Path

from evalflow.commands.main import SUBCOMMANDS, subcommand_module

EVALFLOW = Path(__file__).resolve().parents[2] / "evalflow"
COMMANDS = EVALFLOW / "commands"
HELPERS = {"__init__", "main", "words", "overrides", "reference", "stopping"}  # the dispatch and what subcommands share


def imports_commands(source: str) -> bool:
    """Whether ``source`` imports evalflow.commands or anything in it, wherever the statement is."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "evalflow" and any(a.name == "commands" for a in node.names):
                return True
            if node.module == "evalflow.commands" or node.module.startswith("evalflow.commands."):
                return True
        elif isinstance(node, ast.Import) and any(
            a.name == "evalflow.commands" or a.name.startswith("evalflow.commands.") for a in node.names
        ):
            return True
    return False


def _defines_main(path: Path) -> bool:
    return any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in ast.parse(path.read_text()).body)


def test_library_code_never_imports_the_command_line() -> None:
    library = [p for p in EVALFLOW.rglob("*.py") if COMMANDS not in p.parents and p != EVALFLOW / "__main__.py"]
    assert len(library) > 100  # the tree is read (not vacuously empty)
    offenders = [str(p.relative_to(EVALFLOW)) for p in library if imports_commands(p.read_text())]
    assert offenders == [], f"library modules import evalflow.commands: {offenders}"


def test_the_import_check_sees_every_form_of_import() -> None:
    for source in (
        "from evalflow.commands.words import Usage",
        "import evalflow.commands.main",
        "from evalflow import commands",
        "def f():\n    from evalflow.commands import words\n",
    ):
        assert imports_commands(source), source
    assert not imports_commands("from evalflow.insight.comparison import compare\nimport evalflow.commandsx")


def test_each_subcommand_is_the_main_of_its_own_module() -> None:
    modules = {p.stem for p in COMMANDS.glob("*.py")}
    for name in SUBCOMMANDS:
        module = subcommand_module(name).rsplit(".", 1)[1]
        assert module in modules, f"subcommand {name}: no evalflow/commands/{module}.py"
        assert _defines_main(COMMANDS / f"{module}.py"), f"evalflow/commands/{module}.py defines no main(argv)"
    subcommands = {subcommand_module(name).rsplit(".", 1)[1] for name in SUBCOMMANDS}
    assert modules - subcommands == HELPERS, (
        "a module of evalflow/commands/ is neither a subcommand nor a shared helper"
    )
