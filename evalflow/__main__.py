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


def entry() -> None:
    if len(sys.argv) > 1 and sys.argv[1] in SUBCOMMANDS:
        import importlib

        module, attr = SUBCOMMANDS[sys.argv[1]].split(":")
        try:
            code = getattr(importlib.import_module(module), attr)(sys.argv[2:])
        except EvalflowError as exc:
            code = _report(exc)
        raise SystemExit(code)
    hydra_main()


if __name__ == "__main__":
    entry()
