"""``python -m evalflow``: the Hydra app, plus subcommands dispatched before Hydra sees argv.

    python -m evalflow                                        # default: smollm2 on arith_mc
    python -m evalflow model=dummy task=gsm8k num_fewshot=5 limit=50
    python -m evalflow model=dummy task=[arc_easy,arc_challenge] -m num_fewshot=0,5
    python -m evalflow --config-dir outputs/<run>/.hydra --config-name config   # reproduce
    python -m evalflow ls [--json] [include_path=[dir]]       # tasks, groups, tags
    python -m evalflow cache stats|verify|gc|clear [cache_dir=DIR]
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

from evalflow.errors import EvalflowError

SUBCOMMANDS = {
    "ls": "evalflow.taskspec.listing:main",
    "cache": "evalflow.cache.cli:main",
}


def _report(exc: EvalflowError) -> int:
    if os.environ.get("EVALFLOW_DEBUG") == "1":
        raise exc
    print(f"evalflow: error: {exc}", file=sys.stderr)
    return 2


def hydra_main() -> None:
    import hydra
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import DictConfig

    from evalflow.config.resolvers import register_resolvers
    from evalflow.config.schema import register_configs

    register_configs()
    register_resolvers()
    conf_dir = str(Path(__file__).resolve().parents[1] / "conf")
    run_dir = _pop_config_dir()
    if run_dir is not None:  # reproducing a run: its snapshot is the primary config, conf/ stays searchable
        sys.argv.append(f"hydra.searchpath=[file://{conf_dir}]")
        conf_dir = run_dir

    @hydra.main(config_path=conf_dir, config_name="config", version_base="1.3")
    def main(cfg: DictConfig) -> None:
        from evalflow.app import run
        from evalflow.output.table import print_results
        from evalflow.settings import settings_from_config

        logging.getLogger("evalflow").setLevel(logging.INFO)
        try:
            results = run(settings_from_config(cfg), Path(HydraConfig.get().runtime.output_dir))
        except EvalflowError as exc:
            raise SystemExit(_report(exc)) from None
        print_results(results)
        print(f"run folder: {HydraConfig.get().runtime.output_dir}")

    main()


def _pop_config_dir() -> str | None:
    """Take ``--config-dir DIR`` out of argv. Hydra would only *append* DIR to its search path, so
    ``--config-name config`` would still find conf/config.yaml rather than the run's snapshot."""
    argv = sys.argv
    for i, arg in enumerate(argv[1:], start=1):
        if arg == "--config-dir" and i + 1 < len(argv):
            value = argv[i + 1]
            del argv[i : i + 2]
            return str(Path(value).resolve())
        if arg.startswith("--config-dir="):
            del argv[i]
            return str(Path(arg.split("=", 1)[1]).resolve())
    return None


def entry() -> None:
    if len(sys.argv) > 1 and sys.argv[1] in SUBCOMMANDS:
        import importlib

        module, attr = SUBCOMMANDS[sys.argv[1]].split(":")
        try:
            code = getattr(importlib.import_module(module), attr)(sys.argv[2:])
        except EvalflowError as exc:
            code = _report(exc)
        raise SystemExit(code)
    sys.argv[1:] = _flags_first(sys.argv[1:])
    hydra_main()


def _flags_first(argv: list[str]) -> list[str]:
    """Let ``-m`` stand anywhere (``task=x -m num_fewshot=0,5``): Hydra's argparse wants flags
    before the overrides, so move the flag-only options to the front."""
    flags = [a for a in argv if a in ("-m", "--multirun", "--run", "--resolve")]
    return flags + [a for a in argv if a not in flags]


if __name__ == "__main__":
    entry()
