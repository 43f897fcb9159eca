"""The opt-out backend (``code_sandbox=subprocess``): a plain child process with the same limits.

For machines where bubblewrap cannot run (a container without user namespaces). Each program
runs in a separate process, in a fresh empty working folder, with a cleared environment and the
CPU-time, address-space, process-count and wall-clock limits of the bubblewrap backend. It is not
isolated: it can read and write whatever the evaluating user can, open network connections and
signal the evaluator. As root, RLIMIT_NPROC does not bind (the kernel exempts root), so only the
wall clock stops a fork bomb. Use it only for code you would run yourself.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence

from evalflow.sandbox.contract import Limits, Outcome, run_limited


class PlainSubprocess:
    """The opt-out: see the module docstring for what a program can reach."""

    name = "subprocess"
    description = (
        "each program runs as an ordinary child process in an empty temporary folder with a cleared "
        "environment, under CPU-time, memory, process-count and wall-clock limits, with no isolation "
        "(it can read and write the evaluating user's files, use the network and signal the evaluator)"
    )

    def unavailable(self) -> str | None:
        return None if shutil.which("prlimit") else "prlimit (util-linux) is not on PATH; it sets the limits"

    def run(self, argv: Sequence[str], limits: Limits, stdin: bytes = b"") -> Outcome:
        with tempfile.TemporaryDirectory(prefix="evalflow-code-") as folder:
            return run_limited(argv, limits, uid=os.getuid(), cwd=folder, env={"PATH": os.defpath}, stdin=stdin)
