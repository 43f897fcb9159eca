"""lm-eval 0.4.13's ``local-completions`` / ``local-chat-completions`` and evalflow's
``openai_completions`` / ``openai_chat`` on the same real server (``../shared/serve``, ``--fixed``),
compared document by document and request body by request body.

Each side talks to the server through its own recording proxy (``tests.support.fault_proxy``), so
the bodies each sent are compared as multisets (evalflow's two alignment probes aside). Both sides
run one after the other: the server answers one request at a time anyway, and its prompt cache
state can change greedy outputs, so they should not interleave.

Used by ``tests/parity/test_api_parity.py`` (a short scope) and ``benchmarks/api_parity.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from tests.support import served
from tests.support.fault_proxy import FaultProxy
from tests.support.parity_harness import COMPARE, PEER_SH, PEER_VENV, ROOT, generation_differences
from tests.support.parity_harness import missing as peer_missing

GEN_MIN_SHARE = 0.9  # the issue: >= 9 of 10 identical generations


def missing() -> str | None:
    return peer_missing() or served.missing()


@dataclass(frozen=True)
class ApiSetting:
    task: str
    num_fewshot: int
    limit: int
    kind: str = "completions"  # or "chat" (generation tasks, with apply_chat_template)
    num_concurrent: int = 1

    @property
    def name(self) -> str:
        return f"{self.task} {self.num_fewshot}-shot {self.limit} docs via {self.kind}"


@dataclass
class ApiReport:
    setting: ApiSetting
    compare_code: int = 1
    compare_out: str = ""
    bodies_ours: int = 0
    bodies_peer: int = 0
    body_diff: list[str] = field(default_factory=list)
    documents: int = 0
    generation_diffs: list[str] = field(default_factory=list)

    @property
    def generative(self) -> bool:
        return self.setting.task.startswith("gsm8k")

    @property
    def ok(self) -> bool:
        if self.body_diff or not self.bodies_ours:
            return False
        if self.generative:  # metrics follow the generations, which may differ on a near-tie
            same_prompts = " 0 prompt diffs" in self.compare_out
            return (
                same_prompts
                and self.documents > 0
                and len(self.generation_diffs) <= (1 - GEN_MIN_SHARE) * self.documents
            )
        return self.compare_code == 0

    @property
    def verdict(self) -> str:
        last = self.compare_out.strip().splitlines()[-1] if self.compare_out.strip() else "no comparison"
        bodies = (
            "request bodies identical" if not self.body_diff else f"{len(self.body_diff)} request bodies differ"
        ) + (f" ({self.bodies_ours} vs {self.bodies_peer})")
        gen = (
            f", generations identical for {self.documents - len(self.generation_diffs)}/{self.documents} docs"
            if self.generative
            else ""
        )
        return f"{self.setting.name}: {'PARITY OK' if self.ok else 'PARITY FAILS'} ({last}; {bodies}{gen})"


def tokenizer_folder(work: Path) -> Path:
    """SmolLM2's tokenizer as a folder, for lm-eval (``../shared/serve/save_tokenizer.py``)."""
    folder = work / "tokenizer"
    if not (folder / "tokenizer_config.json").is_file():
        subprocess.run(
            [str(PEER_VENV / "bin" / "python"), str(served.SERVE_SH.parent / "save_tokenizer.py"), str(folder)],
            check=True,
            capture_output=True,
            text=True,
        )
    return folder


def peer_command(s: ApiSetting, url: str, tokdir: Path) -> list[str]:
    if s.kind == "chat":
        model, args = "local-chat-completions", f"model={served.MODEL_NAME},base_url={url}/v1/chat/completions"
        extra = ["--apply_chat_template"]
    else:
        model = "local-completions"
        args = (
            f"model={served.MODEL_NAME},base_url={url}/v1/completions,tokenizer_backend=huggingface,"
            f"tokenizer={tokdir},tokenized_requests=False"
        )
        extra = []
    args += f",num_concurrent={s.num_concurrent}"
    return [
        "bash",
        str(PEER_SH),
        s.task,
        "--limit",
        str(s.limit),
        "--num_fewshot",
        str(s.num_fewshot),
        "--model",
        model,
        "--model_args",
        args,
        *extra,
    ]


def evalflow_command(s: ApiSetting, url: str, out: Path, cache: Path) -> list[str]:
    model = [
        f"model=openai_{s.kind}",
        f"model.base_url={url}/v1",
        f"model.model={served.MODEL_NAME}",
        f"model.num_concurrent={s.num_concurrent}",
    ]
    if s.kind == "chat":
        model.append("apply_chat_template=true")
    else:
        model += [f"model.tokenizer={served.gguf_file()}", "model.tokenized_requests=false"]
    return [
        sys.executable,
        "-m",
        "evalflow",
        *model,
        f"task={s.task}",
        "data_map=shared",
        f"limit={s.limit}",
        f"num_fewshot={s.num_fewshot}",
        f"cache_dir={cache}",
        f"hydra.run.dir={out}",
        "bootstrap_iters=0",
    ]


def _run(cmd: list[str], env: dict[str, str], what: str) -> None:
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{what} failed:\n{proc.stderr[-3000:]}")


# llama.cpp reuses the longest prefix it shares with the previous prompt, and greedy outputs can
# depend on that cache state (../shared/serve/README.md): a one-token prompt sharing no prefix with
# any task prompt, sent before each request, makes every request start from the same state on both
# sides, whatever order each side sends them in.
PREFIX_RESET = ("/v1/completions", json.dumps({"prompt": "\u00a4", "max_tokens": 1, "temperature": 0}).encode())


def _through_proxy(server: served.LlamaServer, run) -> list:
    proxy = FaultProxy(server.url.removesuffix("/v1"))
    proxy.before_each = PREFIX_RESET
    proxy.start()
    try:
        run(proxy.url)
    finally:
        proxy.stop()
    return proxy.bodies


def _task_bodies(bodies: list) -> Counter:
    from evalflow.models.api.alignment import PROMPT

    def probe(b: dict) -> bool:
        return (
            isinstance(b.get("prompt"), str)
            and b["prompt"].startswith(PROMPT)
            and (b.get("logprobs") == 5 or b.get("echo"))
        )
        # evalflow's alignment probes: a 5-logprob completion of PROMPT, then the echo of PROMPT + its token

    kept = [b for b in bodies if not probe(b)]
    return Counter(json.dumps(b, sort_keys=True, ensure_ascii=False) for b in kept)


def unwrap_chat_prompts(path: Path) -> Path:
    """lm-eval's samples file with each chat prompt (a ``JsonChatStr``, which its samples writer
    stores as a one-element list) as the JSON string itself, as evalflow writes it; the text is
    unchanged, so compare.py then checks it exactly."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    for row in rows:
        for req in row.get("arguments", {}).values():
            if isinstance(req.get("arg_0"), list) and len(req["arg_0"]) == 1 and isinstance(req["arg_0"][0], str):
                req["arg_0"] = req["arg_0"][0]
    out = path.with_name("unwrapped_" + path.name)
    out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return out


def run_api_setting(setting: ApiSetting, server: served.LlamaServer, work: Path) -> ApiReport:
    work.mkdir(parents=True, exist_ok=True)
    tokdir = tokenizer_folder(work.parent)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PEER_OUT": str(work / "peer"), "OMP_NUM_THREADS": "1"}
    peer_bodies = _through_proxy(
        server, lambda url: _run(peer_command(setting, url, tokdir), env, f"lm-eval {setting.name}")
    )
    our_bodies = _through_proxy(
        server,
        lambda url: _run(
            evalflow_command(setting, url, work / "evalflow", work / "cache"), env, f"evalflow {setting.name}"
        ),
    )
    report = ApiReport(setting)
    ours, theirs = _task_bodies(our_bodies), _task_bodies(peer_bodies)
    report.bodies_ours, report.bodies_peer = sum(ours.values()), sum(theirs.values())
    report.body_diff = [f"only evalflow sent: {b[:300]}" for b in (ours - theirs)] + [
        f"only lm-eval sent: {b[:300]}" for b in (theirs - ours)
    ]
    ref = unwrap_chat_prompts(next((work / "peer").rglob(f"samples_{setting.task}_*.jsonl")))
    cand = work / "evalflow" / f"samples_{setting.task}.jsonl"
    proc = subprocess.run([sys.executable, str(COMPARE), str(ref), str(cand)], capture_output=True, text=True)
    report.compare_code, report.compare_out = proc.returncode, proc.stdout + proc.stderr
    if report.generative:
        report.documents, report.generation_diffs = generation_differences(ref, cand)
    return report


# the short scope: the chat path (the completions path is compared with the server itself in
# tests/models/api/test_server.py, and with lm-eval in the full scope)
SHORT = [ApiSetting("gsm8k", 5, 2, "chat")]
FULL = [
    ApiSetting("arc_easy", 0, 50),
    ApiSetting("arc_challenge", 5, 25),
    ApiSetting("gsm8k", 5, 10, "completions"),
    ApiSetting("gsm8k", 5, 10, "chat"),
]
