"""``python -m evalflow view``'s words: its help, refusals in one paragraph, the URL it prints
(port=0: the port it got, which then answers), the warning off loopback, ``view bundle``'s
out=, and the paragraph when aiohttp is missing."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from evalflow.commands.main import SUBCOMMANDS
from evalflow.commands.view import BUNDLE, COMMAND, main, outward_address
from evalflow.errors import ConfigError
from tests.support.paths import ROOT


def test_registered_with_its_words(capsys: pytest.CaptureFixture[str]) -> None:
    assert "view" in SUBCOMMANDS
    assert main(["--help"]) == 0
    text = capsys.readouterr().out
    for word in ("[FOLDER ...]", "port=", "host=", "view bundle", "out=", "docs="):
        assert word in text, word


@pytest.mark.parametrize(
    "argv,message",
    [
        (["{d}", "port=http"], "port takes a port number"),
        (["{d}", "port=70000"], "port takes a port number"),
        (["{d}", "prot=1"], "did you mean 'port'"),
        (["{d}/missing"], "no such folder"),
        (["bundle", "{d}"], "out= is missing"),
        (["bundle", "out={d}/b"], "takes 1 or more FOLDER"),
        (["bundle", "{d}", "out={d}/b", "docs=-1"], "docs takes"),
    ],
)
def test_refusals(tmp_path: Path, argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as raised:
        main([a.format(d=tmp_path) for a in argv])
    assert "\n" not in str(raised.value)
    assert (
        (COMMAND.line() in str(raised.value)) or (BUNDLE.line() in str(raised.value)) or "folder" in str(raised.value)
    )


def _start(args: list[str], cwd: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "evalflow", "view", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _url(proc: subprocess.Popen) -> str:
    assert proc.stdout is not None
    line = proc.stdout.readline()  # blocks until the server has bound its port and printed its URL
    if not line:  # it ended instead: its error
        assert proc.stderr is not None
        proc.wait(timeout=30)
        pytest.fail(f"view ended without a URL: {proc.stderr.read()}")
    assert line.startswith("evalflow view: http://"), line
    return line.split()[2]


def test_port_zero_prints_the_port_it_got_and_serves(tmp_path: Path) -> None:
    (tmp_path / "outputs").mkdir()
    proc = _start(["port=0"], tmp_path)  # the default folder, outputs/
    try:
        url = _url(proc)
        assert url.startswith("http://127.0.0.1:") and not url.endswith(":0/")
        with urllib.request.urlopen(url + "api/runs", timeout=30) as resp:
            assert json.loads(resp.read()) == {"roots": ["outputs"], "runs": []}
            assert "default-src 'none'" in resp.headers["Content-Security-Policy"]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_a_host_off_loopback_is_warned_about(tmp_path: Path) -> None:
    proc = _start([str(tmp_path), "host=0.0.0.0", "port=0"], tmp_path)
    try:
        assert proc.stderr is not None
        warning = proc.stderr.readline()
        assert "warning: host=0.0.0.0 is not a loopback address" in warning
        assert f"no run found under {tmp_path}" in proc.stderr.readline()  # an empty folder: said on start
        url = _url(proc)
        assert url.startswith(f"http://{outward_address()}:") and "0.0.0.0" not in url  # one others can open
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_missing_aiohttp_is_one_paragraph(tmp_path: Path) -> None:
    program = (
        "import sys; sys.modules['aiohttp'] = None; sys.argv = ['evalflow', 'view', sys.argv[1]]\n"
        "from evalflow.commands.main import entry; entry()"
    )
    done = subprocess.run(
        [sys.executable, "-c", program, str(tmp_path)],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert 'pip install "evalflow[view]"' in done.stderr and done.stderr.count("\n") == 1


def test_a_port_in_use_is_one_paragraph(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ConfigError, match=f"cannot listen on 127.0.0.1:{port}.*port=") as raised:
            main([str(tmp_path), f"port={port}"])
    assert "\n" not in str(raised.value)


def test_a_missing_folder_of_bundle_ends_with_the_bundle_usage(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such folder") as raised:
        main(["bundle", str(tmp_path / "nope"), f"out={tmp_path / 'b'}"])
    assert str(raised.value).endswith(BUNDLE.line()) and str(raised.value).startswith("view bundle:")
