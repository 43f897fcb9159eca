"""Errors that point the way: Ctrl-C, lm-eval habits on the command line, and evaluate()'s errors
reading as the command line's (the one-paragraph cases themselves are in
tests/reliability/test_bad_input.py)."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from evalflow import evaluate
from evalflow.errors import ConfigError
from tests.support.cli import base_args, cli, held_args, start_held, wait_or_dump
from tests.support.hold import Hold
from tests.support.runs import COUNTING


def test_ctrl_c_prints_one_line_saying_what_was_saved_and_how_to_resume(toy_library: Path, tmp_path: Path) -> None:
    """SIGINT while the model holds the 3rd of 20 chunks (so the run is certainly mid-inference):
    one line, exit 130, and the two chunks answered before it are what the resume reuses."""
    cache, logs = tmp_path / "cache", tmp_path / "interrupted"
    args = held_args(toy_library, cache) + ["chunk_size=8", f"hydra.run.dir={tmp_path / 'run'}"]
    with Hold(at=3) as hold:
        proc = start_held(args, hold, logs)
        try:
            hold.wait_held()
            proc.send_signal(signal.SIGINT)
            code = wait_or_dump(proc, logs)
        finally:
            proc.kill()
            proc.wait(timeout=60)
    out, err = Path(f"{logs}.out").read_text(), Path(f"{logs}.err").read_text()
    assert code == 130, (out, err)
    assert "Traceback" not in err + out
    lines = [line for line in err.splitlines() if line.startswith("evalflow:")]
    assert len(lines) == 1 and lines[0].startswith("evalflow: interrupted."), err
    assert str(cache) in lines[0] and "run the same command again to resume" in lines[0]
    assert not (tmp_path / "run" / "results.json").exists()

    resumed = cli(args)  # "the same command", into the same run folder (no hold in its environment)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads((tmp_path / "run" / "manifest.json").read_text())["inference"] == {
        "requests": 160,
        "computed": 144,
        "cached": 16,
    }


@pytest.mark.parametrize(
    ("sig", "status", "said"), [(signal.SIGTERM, 143, "stopped by SIGTERM"), (signal.SIGHUP, 129, "stopped by SIGHUP")]
)
def test_sigterm_and_sighup_end_a_run_as_ctrl_c_does_and_exit_handlers_run(
    sig, status, said, toy_library: Path, tmp_path: Path
) -> None:
    """``kill PID`` mid-inference: the same one line and resumable cache as Ctrl-C, exit status 128 +
    the signal, and the process's exit handlers run (vLLM shuts its engine processes down from one;
    under SIGTERM's default disposition they are skipped and the engine processes left orphaned)."""
    marker = tmp_path / "exit-handlers-ran"
    hook = tmp_path / "exit_hook.py"
    hook.write_text(f"import atexit, pathlib\natexit.register(pathlib.Path({str(marker)!r}).touch)\n")
    args = held_args(toy_library, tmp_path / "cache") + [
        "chunk_size=8",
        f"hydra.run.dir={tmp_path / 'run'}",
        f"imports=[{hook}]",
    ]
    with Hold(at=2) as hold:
        proc = start_held(args, hold, tmp_path / "stopped")
        try:
            hold.wait_held()
            proc.send_signal(sig)
            code = wait_or_dump(proc, tmp_path / "stopped")
        finally:
            proc.kill()
            proc.wait(timeout=60)
    err = (tmp_path / "stopped.err").read_text()
    assert code == status, err
    lines = [line for line in err.splitlines() if line.startswith("evalflow:")]
    assert len(lines) == 1 and lines[0].startswith(f"evalflow: {said}.") and "Traceback" not in err, err
    assert marker.is_file() and not (tmp_path / "run" / "results.json").exists()


def test_include_path_accepts_one_folder_without_brackets(toy_library: Path, tmp_path: Path) -> None:
    args = [
        a if not a.startswith("include_path=") else f"include_path={toy_library}"
        for a in base_args(toy_library, tmp_path / "c")
    ]
    done = cli(args + ["limit=3", f"hydra.run.dir={tmp_path / 'run'}"])
    assert done.returncode == 0, done.stderr
    assert "toy_mc" in json.loads((tmp_path / "run" / "results.json").read_text())["results"]
    results = evaluate(
        "toy_mc", "dummy", include_path=str(toy_library), limit=3, cache_dir=str(tmp_path / "c"), bootstrap_iters=0
    )
    assert "toy_mc" in results["results"]


def test_evaluate_raises_config_errors_like_the_command_line(toy_library: Path, tmp_path: Path) -> None:
    kw = dict(include_path=[str(toy_library)], cache_dir=str(tmp_path / "c"), limit=2, bootstrap_iters=0)
    with pytest.raises(ConfigError, match=r"model=dumy: there is no 'dumy' in conf/model/; did you mean 'dummy'"):
        evaluate("toy_mc", "dumy", **kw)
    with pytest.raises(ConfigError, match=r"model.dtyp: the 'hf' model config .* did you mean 'dtype'"):
        evaluate("toy_mc", {"type": "hf", "pretrained": "/nowhere", "dtyp": "bfloat16"}, **kw)
    with pytest.raises(ConfigError, match=r"model.sallt: .* did you mean 'salt'"):
        evaluate("toy_mc", "dummy", overrides=["model.sallt=x"], **kw)
    with pytest.raises(ConfigError, match=r"'output_path': .*hydra.run.dir=DIR"):
        evaluate("toy_mc", "dummy", output_path="out", **kw)
    with pytest.raises(ConfigError, match=r"'device': .*model.device=cpu"):
        evaluate("toy_mc", "dummy", device="cpu", **kw)


def test_a_model_mapping_is_laid_over_its_preset(toy_library: Path, tmp_path: Path) -> None:
    """{"type": "dummy", "salt": "x"} is the same run as model=dummy model.salt=x on the command line."""
    kw = dict(include_path=[str(toy_library)], cache_dir=str(tmp_path / "c"), limit=4, bootstrap_iters=0)
    by_mapping = evaluate("toy_mc", {"type": "dummy", "salt": "x"}, **kw)
    by_override = evaluate("toy_mc", "dummy", overrides=["model.salt=x"], **kw)
    assert (
        by_mapping["results"] == by_override["results"]
        and by_mapping["evalflow"]["model"] == by_override["evalflow"]["model"]
    )
    own = evaluate("toy_mc", {"type": COUNTING, "anything": 1}, **kw)  # a class of the user's own: keys as given
    assert own["evalflow"]["model"] == {"type": COUNTING, "anything": 1}


def test_a_signal_ignored_or_handled_by_a_launcher_is_left_as_it_is() -> None:
    """Under nohup SIGHUP is ignored and stays so; a scheduler's own SIGTERM handler is kept."""
    import subprocess
    import sys

    probe = (
        "import signal\n"
        "from evalflow.commands.stopping import stop_on_termination\n"
        "signal.signal(signal.SIGHUP, signal.SIG_IGN)\n"
        "mine = lambda *_: None\n"
        "stop_on_termination()\n"
        "assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN\n"
        "assert signal.getsignal(signal.SIGTERM).__name__ == 'stop'\n"
        "signal.signal(signal.SIGTERM, mine)\n"
        "stop_on_termination()\n"
        "assert signal.getsignal(signal.SIGTERM) is mine\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
