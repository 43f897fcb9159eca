"""lm-eval 0.4.13's own loggers (``lm_eval.loggers``, installed beside evalflow) run on a results file
and samples files that ``evalflow lm-eval --output_path`` wrote, as lm-eval's ``run`` command runs them
after its evaluation: the reference side of tests/lmeval_compat/test_lmeval_logging.py.

As a script: ``python -m tests.support.lmeval_loggers_peer KIND ARGS_JSON RESULTS_FILE [SAMPLES_FILE...]``
(KIND: wandb or trackio); in a child process, as each client keeps one global run.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def in_memory(row: dict[str, Any]) -> dict[str, Any]:
    """A samples-file row as lm-eval holds it before writing it: ``arguments`` a list of tuples."""
    args = row["arguments"]
    return {**row, "arguments": [tuple(a.values()) for a in args.values()] if isinstance(args, dict) else args}


def samples_of(files: list[str]) -> dict[str, list[dict[str, Any]]]:
    """Each samples file's rows by task, from lm-eval's names ``samples_<task>_<date>.jsonl``."""
    out = {}
    for name in files:
        task = Path(name).name[len("samples_") :].rsplit("_", 1)[0]
        out[task] = [in_memory(json.loads(line)) for line in Path(name).read_text().splitlines() if line.strip()]
    return out


def main(kind: str, args: dict[str, Any], results_file: str, sample_files: list[str]) -> None:
    results = json.loads(Path(results_file).read_text())
    samples = samples_of(sample_files)
    if kind == "wandb":
        from lm_eval.loggers import WandbLogger

        logger: Any = WandbLogger(args["init"], args.get("config"))
        logger.post_init(results)
        logger.log_eval_result()
        logger.log_eval_samples(samples)
        logger.run.finish()
    else:
        from lm_eval.loggers import TrackioLogger

        logger = TrackioLogger(args["init"])
        logger.post_init(results)
        logger.log_eval_result()
        logger.log_eval_samples(samples)
        logger.finish()


if __name__ == "__main__":
    main(sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], sys.argv[4:])
