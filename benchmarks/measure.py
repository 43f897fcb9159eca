#!/usr/bin/env python3
"""Time commands fairly on a small, shared, noisy machine, and print their ratio.

Carried here from the workplace's ``shared/bench/measure.py`` so that every benchmark runs from the
project alone.

usage:
  measure.py [--rounds N] [--wait-idle S] [--label NAME] -- CMD_A ... [--vs -- CMD_B ...]

Runs CMD_A (and CMD_B, interleaved A B A B ... so drift hits both alike) N times each (default 3).
Before every run it waits up to S seconds (default 120) for the machine to be under 15% busy, so a
run does not start on top of another job. For each run it records:
  wall_s        wall-clock seconds
  rss_mib       peak resident memory of the command's process tree (largest single process)
  foreign_frac  CPU used by *other* processes during the run / (wall x cores); above ~0.05 the
                figure is disturbed: with 2 threads on 2 cores one co-runner slows torch 2-18x
Prints one line per run, then the minimum per command, and with --vs the ratio min(B)/min(A)
("A is R x faster than B"). The last line is a JSON object with all figures, for scripts.

Use it from benchmarks: the reported speed figure is the ratio, never an absolute time.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

HZ = os.sysconf("SC_CLK_TCK")
NCPU = os.cpu_count() or 1


def busy_seconds() -> float:
    with open("/proc/stat") as fh:
        v = list(map(int, fh.readline().split()[1:9]))
    return (sum(v) - v[3] - v[4]) / HZ  # all but idle and iowait


FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_tile", "fma")


def cpu_description() -> str:
    """The CPU model and which of the flags that matter to the kernels it has (figures measured on an
    AVX-512 host do not hold on an AVX2 one)."""
    with open("/proc/cpuinfo") as fh:
        lines = fh.read().splitlines()
    model = next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("model name")), "?")
    flags = next((ln.split(":", 1)[1].split() for ln in lines if ln.startswith("flags")), [])
    return f"{model}; flags: {' '.join(f for f in FLAGS if f in flags) or 'none of ' + ','.join(FLAGS)}"


def wait_idle(max_wait: float, threshold: float = 0.15, window: float = 2.0) -> float:
    start = time.time()
    while time.time() - start < max_wait:
        b = busy_seconds()
        time.sleep(window)
        if (busy_seconds() - b) / (window * NCPU) < threshold:
            break
    return time.time() - start


def run_once(cmd: list[str]) -> dict:
    b0, t0 = busy_seconds(), time.time()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.time() - t0
    # wait4 on the direct child gives its own usage; RUSAGE_CHILDREN adds its reaped descendants.
    own = ru.ru_utime + ru.ru_stime
    busy = busy_seconds() - b0
    err = proc.stderr.read() if proc.stderr else ""
    rc = os.waitstatus_to_exitcode(status)
    return {
        "wall_s": round(wall, 3),
        "rss_mib": round(ru.ru_maxrss / 1024, 1),
        "foreign_frac": round(max(0.0, busy - own) / (wall * NCPU), 3),
        "rc": rc,
        "stderr_tail": err[-300:] if rc else "",
    }


def parse(argv: list[str]):
    opts = {"rounds": 3, "wait_idle": 120.0, "label": "A"}
    if "--" not in argv:
        sys.exit(__doc__)
    head, rest = argv[: argv.index("--")], argv[argv.index("--") + 1 :]
    i = 0
    while i < len(head):
        key = head[i].lstrip("-").replace("-", "_")
        opts[key] = type(opts[key])(head[i + 1])
        i += 2
    cmd_b = None
    if "--vs" in rest:
        k = rest.index("--vs")
        cmd_a, tail = rest[:k], rest[k + 1 :]
        cmd_b = tail[1:] if tail[:1] == ["--"] else tail
    else:
        cmd_a = rest
    return opts, cmd_a, cmd_b


def main() -> int:
    opts, cmd_a, cmd_b = parse(sys.argv[1:])
    cmds = {"A": cmd_a} if cmd_b is None else {"A": cmd_a, "B": cmd_b}
    runs: dict[str, list[dict]] = {k: [] for k in cmds}
    print(f"cpu: {cpu_description()}", flush=True)
    for r in range(opts["rounds"]):
        for name, cmd in cmds.items():
            waited = wait_idle(opts["wait_idle"])
            res = run_once(cmd)
            res["waited_s"] = round(waited, 1)
            runs[name].append(res)
            print(
                f"round {r + 1} {name}: wall {res['wall_s']:.2f}s rss {res['rss_mib']:.0f}MiB "
                f"foreign {res['foreign_frac']:.2f} rc {res['rc']}",
                flush=True,
            )
            if res["rc"]:
                print(f"  {name} failed: {res['stderr_tail']}", file=sys.stderr)
                return 1
    summary = {
        k: {
            "min_wall_s": min(x["wall_s"] for x in v),
            "median_wall_s": statistics.median(x["wall_s"] for x in v),
            "max_rss_mib": max(x["rss_mib"] for x in v),
            "max_foreign_frac": max(x["foreign_frac"] for x in v),
        }
        for k, v in runs.items()
    }
    for k, s in summary.items():
        print(
            f"{k}: min {s['min_wall_s']:.2f}s median {s['median_wall_s']:.2f}s "
            f"peak rss {s['max_rss_mib']:.0f}MiB worst foreign {s['max_foreign_frac']:.2f}"
        )
    out = {"label": opts["label"], "cpu": cpu_description(), "runs": runs, "summary": summary}
    if cmd_b is not None:
        ratio = summary["B"]["min_wall_s"] / summary["A"]["min_wall_s"]
        out["ratio_b_over_a"] = round(ratio, 3)
        print(f"A is {ratio:.2f}x faster than B (min wall B / min wall A)")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
