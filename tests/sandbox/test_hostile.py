"""Hostile programs, each contained by the sandbox and scored as a failure, the evaluator unharmed.

Each case is a HumanEval-style candidate that would pass its (trivial) test if its attack succeeded
or did nothing (attacks call ``posix`` directly where code_eval's guard disables the ``os``
function, so that they test the sandbox, not the guard): a contained attack makes the program fail
(an exception, a limit, the wall clock), so ``passed`` is False, and the parent checks afterwards
that nothing escaped (the home file absent, the loopback server never reached, this process alive).
The table of the README's "Code execution" section is this file's CASES.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from pathlib import Path

import pytest

from evalflow.sandbox import Limits, run_program, sandbox, using
from evalflow.scoring.code_exec import candidate_passes, pass_at_k

pytestmark = pytest.mark.skipif(
    sandbox("bwrap").unavailable() is not None, reason=f"bubblewrap cannot run here: {sandbox('bwrap').unavailable()}"
)

SECRET = "EVALFLOW_TEST_SECRET"
TEST = "assert ok()"


def _passes(candidate: str, timeout: float = 3.0) -> bool:
    with using("bwrap"):
        return candidate_passes([candidate], TEST, timeout)[0]


def test_a_plain_program_passes_and_a_wrong_one_fails() -> None:
    assert _passes("def ok():\n    return True")
    assert not _passes("def ok():\n    return False")


def test_infinite_loop_is_killed_at_the_wall_clock() -> None:
    started = time.monotonic()
    assert not _passes("while True:\n    pass\ndef ok():\n    return True", timeout=1.0)
    assert time.monotonic() - started < 5


def test_fork_bomb_hits_the_process_limit() -> None:
    bomb = (
        "import posix\nwhile True:\n    try:\n        posix.fork()\n    except OSError:\n        posix._exit(1)\n"
        "def ok():\n    return True"
    )
    started = time.monotonic()
    assert not _passes(bomb, timeout=3.0)
    assert time.monotonic() - started < 10
    spawn = "import posix\npid = posix.fork()\nif pid == 0:\n    posix._exit(0)\nposix.waitpid(pid, 0)\n"
    assert _passes(spawn + "def ok():\n    return True")  # the machine can start processes again


def test_ten_gigabyte_allocation_fails_at_the_memory_limit() -> None:
    assert not _passes("x = bytearray(10 * 1024 ** 3)\ndef ok():\n    return True")


def test_writing_to_home_fails_and_leaves_no_file(tmp_path: Path) -> None:
    target = Path.home() / f"evalflow-sandbox-probe-{os.getpid()}"
    try:
        assert not _passes(f"open({str(target)!r}, 'w').write('x')\ndef ok():\n    return True")
        assert not target.exists()
    finally:
        target.unlink(missing_ok=True)


def test_reading_home_sees_an_empty_folder() -> None:
    marker = Path.home() / f"evalflow-sandbox-visible-{os.getpid()}"
    marker.write_text("private")
    try:
        assert not _passes(f"import os\ndef ok():\n    return {marker.name!r} in os.listdir({str(Path.home())!r})")
    finally:
        marker.unlink()


def test_network_connection_to_a_loopback_server_fails() -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(5)
    port = server.getsockname()[1]
    reached: list[bool] = []

    def accept() -> None:
        try:
            server.accept()
            reached.append(True)
        except OSError:
            pass

    thread = threading.Thread(target=accept)
    thread.start()
    try:
        attack = (
            f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)\ndef ok():\n    return True"
        )
        assert not _passes(attack)
    finally:
        server.close()
        thread.join()
    assert not reached


def test_environment_secret_of_the_parent_is_not_visible(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET, "hunter2")
    assert not _passes(f"import os\ndef ok():\n    return os.environ.get({SECRET!r}) == 'hunter2'")
    assert not _passes(
        "import os\ndef ok():\n    return any(b'hunter2' in open(f'/proc/{p}/environ', 'rb').read()\n"
        "               for p in os.listdir('/proc') if p.isdigit())"
    )


@pytest.mark.parametrize(
    "attack",
    [
        "import os, posix, signal\nposix.kill(os.getppid(), signal.SIGKILL)",
        "import posix, signal\nposix.kill(-1, signal.SIGKILL)",
        f"import posix, signal\nposix.kill({os.getpid()}, signal.SIGKILL)",
    ],
    ids=["parent", "every_process", "evaluator_pid"],
)  # ids without the pid: xdist workers collect the same names
def test_killing_the_parent_ends_only_the_sandbox(attack: str) -> None:
    assert not _passes(attack + "\ndef ok():\n    return True")
    assert _passes("def ok():\n    return True")  # this process (the evaluator) is alive and still scoring


def test_hostile_candidates_score_as_failures_among_good_ones() -> None:
    good = "def ok():\n    return True"
    with using("bwrap"):
        scores = pass_at_k(
            [TEST], [[good, "while True: pass", "import os, posix\nposix.kill(os.getppid(), 9)", good]], k=[1, 4]
        )
    assert scores == {"pass@1": 0.5, "pass@4": 1.0}


def test_subprocess_opt_out_keeps_the_limits() -> None:
    plain = sandbox("subprocess")
    assert plain.run([sys.executable, "-I", "-c", "while True: pass"], Limits(wall_seconds=1)).timed_out
    assert not run_program(plain, "x = bytearray(10 * 1024 ** 3)", Limits())
    assert run_program(plain, "import os; assert 'HOME' not in os.environ", Limits())
