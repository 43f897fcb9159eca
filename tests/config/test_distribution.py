"""The wheel: built from the files a commit holds, it carries everything a run needs (conf/, tasks/
with their data and task code, the C source, py.typed, the console scripts), and installed into a
folder of its own it runs from an empty working folder, with no checkout in sight.

One wheel is built and installed per module (``pip wheel --no-build-isolation``, then ``pip install
--target``); the dependencies come from the test environment. ``.ci/wheel_check.sh`` does the same
in a fresh venv with ``python -m build``, the SmolLM2 default job and lm-eval's front door.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import pytest

from tests.support.paths import ROOT


@dataclass(frozen=True)
class Installed:
    wheel: Path
    site: Path  # the `pip install --target` folder
    tracked: tuple[str, ...]  # the checkout's files a commit holds (git ls-files)


def commit_files() -> tuple[str, ...]:
    """The files a commit of this checkout holds: tracked ones and new ones git does not ignore."""
    try:
        done = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            timeout=60,
            check=False,
        )
    except OSError:
        done = None
    if done is None or done.returncode != 0:
        pytest.skip("not a git checkout: the files a wheel must hold are read from git ls-files")
    return tuple(sorted(p for p in done.stdout.decode().split("\0") if p and (ROOT / p).is_file()))


def pip(*args: str | Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pip", *map(str, args)], capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """The wheel built from a copy of the commit's files (a build folder left in the checkout, or a
    file git ignores, cannot reach it), installed into a folder of its own."""
    root = tmp_path_factory.mktemp("dist")
    tracked = commit_files()
    for name in tracked:
        (root / "src" / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, root / "src" / name)
    pip("wheel", "-q", "--no-deps", "--no-build-isolation", "--wheel-dir", root / "dist", root / "src")
    (wheel,) = (root / "dist").glob("evalflow-*.whl")
    pip("install", "-q", "--no-deps", "--target", root / "site", wheel)
    return Installed(wheel, root / "site", tracked)


def installed_run(site: Path, args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` with only the installed folder on the path (evalflow's dependencies are
    this environment's), from ``cwd``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVALFLOW_")}
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        env={**env, "PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_the_wheel_holds_every_file_a_run_needs(installed: Installed) -> None:
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    for folder in ("conf", "tasks"):
        wanted = {f"evalflow/{name}" for name in installed.tracked if name.startswith(f"{folder}/")}
        shipped = {name for name in names if name.startswith(f"evalflow/{folder}/")}
        assert shipped == wanted, (sorted(wanted - shipped), sorted(shipped - wanted))
    assert {
        "evalflow/tasks/demo/arith_mc_test.jsonl",
        "evalflow/tasks/winogrande/utils.py",
        "evalflow/models/hf/fast/native/decode_attention.c",
        "evalflow/py.typed",
    } <= names
    code = {f for f in installed.tracked if f.startswith("evalflow/")}
    assert code <= names and not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    info = f"evalflow-{metadata.version('evalflow')}.dist-info"
    scripts = zipfile.ZipFile(installed.wheel).read(f"{info}/entry_points.txt").decode()
    assert (
        "evalflow = evalflow.commands.main:entry" in scripts
        and "evalflow-lm-eval = evalflow.commands.lm_eval:entry" in scripts
    )
    assert f"{info}/licenses/LICENSE" in names
    assert "License-Expression: MIT" in zipfile.ZipFile(installed.wheel).read(f"{info}/METADATA").decode()


def test_the_installed_wheel_runs_from_an_empty_folder(installed: Installed, tmp_path: Path) -> None:
    here = tmp_path / "empty"
    here.mkdir()
    which = installed_run(installed.site, ["-c", "import evalflow; print(evalflow.__file__)"], here)
    assert which.stdout.strip() == str(installed.site / "evalflow" / "__init__.py"), which.stderr
    version = installed_run(installed.site, ["-m", "evalflow", "--version"], here)
    assert version.stdout == f"evalflow {metadata.version('evalflow')} ({installed.site / 'evalflow'})\n", (
        version.stderr
    )
    script = installed_run(installed.site, [str(installed.site / "bin" / "evalflow"), "--version"], here)
    assert script.stdout == version.stdout, script.stderr
    run = installed_run(
        installed.site,
        ["-m", "evalflow", "model=dummy", "task=arith_mc", "limit=2", f"cache_dir={tmp_path / 'cache'}"],
        here,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    (results_file,) = here.glob("outputs/*/*/results.json")  # the default run folder, under the working folder
    results = json.loads(results_file.read_text())
    assert set(results["results"]) == {"arith_mc"} and results["n-samples"]["arith_mc"]["effective"] == 2
    assert results["git_hash"] is None  # an installed wheel is no checkout
    assert sorted(p.name for p in here.iterdir()) == ["outputs"]


def test_the_installed_copy_packs_itself_for_a_side_venv(installed: Installed, tmp_path: Path) -> None:
    """vllm-cpu-venv installs the running evalflow into its venv: an installed copy, packed again as
    a wheel (cpu_venv.installed_wheel), installs as the same code."""
    pack = (
        "import sys; from pathlib import Path; from evalflow.models.vllm.cpu_venv import evalflow_requirement; "
        "print(evalflow_requirement(Path(sys.argv[1]), 'lm-eval-tasks')[-1])"
    )
    done = installed_run(installed.site, ["-c", pack, str(tmp_path)], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    wheel = done.stdout.strip()
    assert wheel == f"{tmp_path / installed.wheel.name}[lm-eval-tasks]"
    pip("install", "-q", "--no-deps", "--target", tmp_path / "again", wheel.removesuffix("[lm-eval-tasks]"))
    identity = "from evalflow.config.packaged import code_identity; print(code_identity())"
    first, second = (installed_run(site, ["-c", identity], tmp_path) for site in (installed.site, tmp_path / "again"))
    assert first.stdout.startswith(f"installed {metadata.version('evalflow')} ") and first.stdout == second.stdout
