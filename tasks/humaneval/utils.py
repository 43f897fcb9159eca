"""HumanEval's filters, as lm-eval 0.4.13 writes them (tasks/humaneval/utils.py).

lm-eval's module also loads HF evaluate's hub metric ``code_eval`` at import; evalflow scores
with its own sandboxed ``pass_at_k`` (evalflow/scoring/code_exec.py), so only the filters that
build each candidate program (the prompt followed by the completion) are kept, unchanged.
"""


def build_predictions(resps: list[list[str]], docs: list[dict]) -> list[list[str]]:
    return [[doc["prompt"] + r for r in resp] for resp, doc in zip(resps, docs)]


def build_predictions_instruct(resps: list[list[str]], docs: list[dict]) -> list[list[str]]:
    return [
        [doc["prompt"] + (r if r.find("```") == -1 else r[: r.find("```")]) for r in resp]
        for resp, doc in zip(resps, docs)
    ]
