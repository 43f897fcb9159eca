"""Run lm-eval 0.4.13's HFLM on given requests; run with the peer venv's python, never imported.

stdin: a JSON list of runs, each {"model_args": {...HFLM kwargs...}, "loglikelihood": [[ctx, cont],
       ...], "loglikelihood_rolling": [text, ...], "generate_until": [[ctx, gen_kwargs], ...]}
stdout: one JSON line: per run, the answers of each request type in request order.
"""

import json
import logging
import sys

logging.disable(logging.WARNING)

from lm_eval.api.instance import Instance  # noqa: E402
from lm_eval.models.huggingface import HFLM  # noqa: E402


def run(spec: dict) -> dict:
    lm = HFLM(device="cpu", **spec["model_args"])
    out = {}
    for rtype in ("loglikelihood", "loglikelihood_rolling", "generate_until"):
        args = spec.get(rtype) or []
        reqs = [Instance(rtype, {}, tuple(a) if isinstance(a, list) else (a,), i) for i, a in enumerate(args)]
        out[rtype] = getattr(lm, rtype)(reqs, disable_tqdm=True) if reqs else []
    return out


def main() -> None:
    print(json.dumps([run(spec) for spec in json.load(sys.stdin)]))


if __name__ == "__main__":
    main()
