"""Score (document, candidate) pairs with lm-eval's MATH task code in *this* interpreter.

Run by tests/taskspec/sidenv/test_side_env_math_parity.py with lm-eval's own environment (the peer venv,
antlr 4.11) and with evalflow's (antlr 4.9, no side environment), to compare with what evalflow's
side-environment worker computes. Standard library plus the task code's own imports; no evalflow.

    python score_math_pairs.py LM_EVAL_TASKS_DIR pairs.json out.json

``pairs.json``: ``{"rows": [raw MATH rows], "pairs": [[row index, candidate], ...]}``. ``out.json``:
per task module, ``{"import_error": text}`` or ``{"results": [process_results(...) or {"error": text}]}``.
"""

import importlib.util
import json
import sys
import traceback

MODULES = {"minerva_math": "minerva_math/utils.py", "leaderboard_math_hard": "leaderboard/math/utils.py"}


def score(tasks_dir: str, rows: list, pairs: list) -> dict:
    import datasets

    out = {}
    for task, relative in MODULES.items():
        try:
            spec = importlib.util.spec_from_file_location(f"_peer_{task}", f"{tasks_dir}/{relative}")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        except Exception as exc:
            out[task] = {"import_error": f"{type(exc).__name__}: {exc}"}
            continue
        docs = list(module.process_docs(datasets.Dataset.from_list(rows)))
        results = []
        for index, candidate in pairs:
            try:
                results.append(module.process_results(docs[index], [candidate]))
            except Exception:
                results.append({"error": traceback.format_exc(limit=1)})
        out[task] = {"results": results}
    return out


if __name__ == "__main__":
    tasks_dir, pairs_file, out_file = sys.argv[1:4]
    with open(pairs_file) as fh:
        given = json.load(fh)
    with open(out_file, "w") as fh:
        json.dump(score(tasks_dir, given["rows"], given["pairs"]), fh)
