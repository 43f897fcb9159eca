"""evalflow's ``openai_completions`` against lm-eval's ``local-completions`` on the same real server:
a cold run each, then a cached re-run each (lm-eval with its own request cache).

    python benchmarks/api_speed.py                    # arc_easy, 100 documents, 2 rounds
    python benchmarks/api_speed.py --limit 20 --rounds 1

Starts ``../shared/serve/llama_server.sh PORT --fixed`` (llama.cpp on SmolLM2); both sides use the
same ``num_concurrent`` and one prompt per request. Timing goes through
``benchmarks/measure.py`` (waits for an idle machine, interleaves the commands, reports the CPU
other processes took: ``foreign``). Prints:

- cold: lm-eval wall / evalflow wall (the goal: >= 1.0), each from an empty cache;
- cached: lm-eval's re-run with ``--use_cache`` and ``--cache_requests true`` (its SQLite caches of
  model answers and of built requests, filled by a
  first run) / evalflow's fully cached re-run (the goal: >= 50);
- the floor under any such ratio: a Hydra app that does nothing (``@hydra.main`` with no config,
  run like evalflow, with this environment's Hydra plugins), and the best ratio it would allow.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import measure  # noqa: E402

from tests.support.parity_api import ApiSetting, evalflow_command, missing, peer_command, tokenizer_folder  # noqa: E402
from tests.support.served import LlamaServer  # noqa: E402


def shell(cmd: list[str], env: dict[str, str], before: str = "") -> list[str]:
    exports = " ".join(f"{k}={v}" for k, v in env.items())
    return ["bash", "-c", f"{before}cd {ROOT} && env {exports} " + " ".join(f"'{c}'" for c in cmd)]


EMPTY_HYDRA_APP = "import hydra\nhydra.main(version_base=None, config_path=None)(lambda cfg: None)()\n"


def best(runs: list[dict]) -> dict:
    top = min(runs, key=lambda r: r["wall_s"])
    return {"wall_s": top["wall_s"], "foreign": max(r["foreign_frac"] for r in runs)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--num-concurrent", type=int, default=1)
    parser.add_argument(
        "--wait-idle", type=float, default=120.0, help="max seconds to wait for an idle machine per run"
    )
    args = parser.parse_args()
    if missing():
        print(f"cannot run: {missing()}")
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="evalflow-api-speed-"))
    setting = ApiSetting("arc_easy", 0, args.limit, num_concurrent=args.num_concurrent)
    server = LlamaServer.start(fixed=True)  # one llama.cpp thread: two spin against other processes on 2 shared cores
    try:
        tokdir = tokenizer_folder(tmp)
        url = server.url.removesuffix("/v1")
        env = {"PYTHONPATH": str(ROOT), "PEER_OUT": str(tmp / "peer")}
        ours = evalflow_command(setting, url, tmp / "out" / "${now:%H-%M-%S-%f}", tmp / "cold")  # a new folder per run
        ours_warm = evalflow_command(setting, url, tmp / "out" / "${now:%H-%M-%S-%f}", tmp / "warm")
        peer = peer_command(setting, url, tokdir)
        peer_warm = peer + ["--use_cache", str(tmp / "peer-cache" / "lm"), "--cache_requests", "true"]
        (tmp / "empty_app.py").write_text(EMPTY_HYDRA_APP)
        commands = {
            "evalflow cold": shell(ours, env, f"rm -rf {tmp / 'cold'} && "),
            "lm-eval cold": shell(peer, env),
            "evalflow cached": shell(ours_warm, env),
            "lm-eval cached": shell(peer_warm, env),
            "empty Hydra app": shell(
                [sys.executable, str(tmp / "empty_app.py"), f"hydra.run.dir={tmp / 'empty'}"], env
            ),
        }
        for name in ("evalflow cached", "lm-eval cached"):  # fill both caches once
            first = measure.run_once(commands[name])
            if first["rc"]:
                print(f"{name} (filling its cache) failed: {first['stderr_tail']}")
                return 1
        runs: dict[str, list[dict]] = {k: [] for k in commands}
        for r in range(args.rounds):
            for name, cmd in commands.items():
                measure.wait_idle(args.wait_idle)
                res = measure.run_once(cmd)
                runs[name].append(res)
                print(
                    f"round {r + 1} {name}: wall {res['wall_s']:.2f} s, "
                    f"foreign {res['foreign_frac']:.2f}, rc {res['rc']}",
                    flush=True,
                )
                if res["rc"]:
                    print(res["stderr_tail"])
                    return 1
    finally:
        server.stop()
    b = {k: best(v) for k, v in runs.items()}
    cold = b["lm-eval cold"]["wall_s"] / b["evalflow cold"]["wall_s"]
    cached = b["lm-eval cached"]["wall_s"] / b["evalflow cached"]["wall_s"]
    floor = b["lm-eval cached"]["wall_s"] / b["empty Hydra app"]["wall_s"]
    foreign = max(x["foreign"] for x in b.values())
    print(
        f"\narc_easy {args.limit} docs, num_concurrent={args.num_concurrent}, min of {args.rounds} rounds, "
        f"worst foreign CPU load {foreign:.2f} of the machine"
    )
    for k, v in b.items():
        print(f"  {k:16s} {v['wall_s']:8.2f} s")
    print(f"cold:   lm-eval / evalflow = {cold:.2f}x  (goal >= 1.0: {'met' if cold >= 1.0 else 'NOT met'})")
    print(
        f"cached: lm-eval --use_cache / evalflow cached = {cached:.1f}x  "
        f"(goal >= 50: {'met' if cached >= 50 else 'NOT met'})"
    )
    print(
        f"        (an empty Hydra app takes {b['empty Hydra app']['wall_s']:.2f} s here: "
        f"no Hydra app can show more than {floor:.1f}x)"
    )
    print(
        json.dumps(
            {
                "runs": runs,
                "best": b,
                "ratio_cold": round(cold, 3),
                "ratio_cached": round(cached, 2),
                "ratio_cached_floor": round(floor, 2),
            }
        )
    )
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
