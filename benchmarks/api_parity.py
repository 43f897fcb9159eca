"""evalflow's served models against lm-eval 0.4.13's on the same real server, one verdict per setting.

    python benchmarks/api_parity.py            # the issue's scope (about 15 minutes on two cores)
    python benchmarks/api_parity.py --short    # the test suite's short scope
    python benchmarks/api_parity.py --only gsm8k   # the settings whose name contains "gsm8k"

Starts ``../shared/serve/llama_server.sh PORT --fixed`` (llama.cpp on SmolLM2 with its echo
defects fixed) and runs lm-eval (``local-completions`` / ``local-chat-completions`` through
``../shared/parity/peer.sh``) and evalflow (``openai_completions`` / ``openai_chat``) one after
the other, each through a recording proxy: request bodies must be identical (as multisets;
evalflow's two alignment probes aside), and ``../shared/parity/compare.py`` compares the samples
(prompts, log-likelihoods within 1e-3, greedy flags, per-document metrics); for gsm8k at least 9
of 10 generations must be identical. Exit status 0 iff every setting passes.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.parity_api import FULL, SHORT, missing, run_api_setting  # noqa: E402
from tests.support.served import LlamaServer  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--short", action="store_true")
    parser.add_argument("--work", default="/tmp/evalflow-api-parity")
    parser.add_argument("--only", default="", help="run the settings whose name contains this text")
    args = parser.parse_args()
    if missing():
        print(f"cannot run: {missing()}")
        return 2
    server = LlamaServer.start(fixed=True)  # one llama.cpp thread: two spin against other processes on 2 shared cores
    verdicts, ok = [], True
    try:
        for setting in [s for s in (SHORT if args.short else FULL) if args.only in s.name]:
            start = time.time()
            report = run_api_setting(setting, server, Path(args.work) / setting.name.replace(" ", "_"))
            verdicts.append(f"{report.verdict} [{time.time() - start:.0f} s]")
            print(verdicts[-1], flush=True)
            for line in report.body_diff[:5] + report.generation_diffs:
                print(f"    {line}", flush=True)
            if report.compare_code:
                print("\n".join("    " + x for x in report.compare_out.strip().splitlines()[-12:]), flush=True)
            ok = ok and report.ok
    finally:
        server.stop()
    print("\n".join(["", "verdicts:", *verdicts]))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
