"""Side environments: which task modules need one (the table applied to their imports), the pins in
their keys, provisioning with pip, and the worker that runs them (results, errors, crashes)."""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evalflow.cache.fingerprint import file_fingerprint, fingerprint
from evalflow.errors import TaskError
from evalflow.taskspec.format.loader import function_ref, resolve_function
from evalflow.taskspec.sidenv import envs as side_env
from evalflow.taskspec.sidenv import provision as side_provision
from evalflow.taskspec.sidenv import worker as side_worker
from evalflow.taskspec.sidenv.envs import SIDE_ENVS, SideEnv, side_env_for
from evalflow.taskspec.sidenv.provision import ProvisionError, ensure_provisioned, is_provisioned, provision
from evalflow.taskspec.sidenv.worker import SideEnvError, SideFunction

ANTLR = SIDE_ENVS[0]


def _module(folder: Path, name: str, source: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source))
    return path


def _env(path: Path) -> SideEnv | None:
    return side_env_for(str(path), file_fingerprint(path))


# ----------------------------------------------------------------------------- the table


@pytest.mark.parametrize(
    "source",
    [
        "from sympy.parsing.latex import parse_latex\n",
        "import antlr4\n",
        "def f():\n    from math_verify import parse\n",  # inside a function still counts
        "try:\n    import sympy.parsing.latex as L\nexcept ImportError:\n    L = None\n",
    ],
)
def test_a_module_importing_a_trigger_needs_the_side_environment(tmp_path: Path, source: str) -> None:
    assert _env(_module(tmp_path, "utils.py", source)) == ANTLR


@pytest.mark.parametrize(
    "source",
    [
        "import sympy\nimport re\n",
        "from sympy.parsing import sympy_parser\n",
        "import datasets\nimport antlr4_helpers\n",
        "",
    ],
)
def test_other_modules_run_in_evalflows_process(tmp_path: Path, source: str) -> None:
    assert _env(_module(tmp_path, "utils.py", source)) is None


def test_imports_of_task_modules_are_followed_and_installed_packages_are_not(tmp_path: Path) -> None:
    _module(tmp_path, "helpers.py", "from sympy.parsing.latex import parse_latex\n")
    assert _env(_module(tmp_path, "utils.py", "import helpers\n")) == ANTLR  # a sibling
    _module(tmp_path, "pkg/__init__.py", "")
    _module(tmp_path, "pkg/grade/grader.py", "import antlr4\n")
    assert _env(_module(tmp_path, "pkg/tasks/x/utils.py", "from pkg.grade.grader import f\n")) == ANTLR
    assert _env(_module(tmp_path, "pkg/tasks/y/utils.py", "from ...grade import grader\n")) == ANTLR  # relative
    # a same-named module in a folder above that is not the module's own package is not task code
    _module(tmp_path, "other/antlr_user.py", "import antlr4\n")
    assert _env(_module(tmp_path, "pkg/tasks/z/utils.py", "from other import antlr_user\n")) is None


def test_lm_evals_math_modules_need_it_and_its_other_modules_do_not() -> None:
    lm_eval = pytest.importorskip("lm_eval")
    tasks = Path(lm_eval.__file__).parent / "tasks"
    needs = {p.relative_to(tasks).as_posix() for p in tasks.rglob("*.py") if _env(p) is not None}
    assert {"minerva_math/utils.py", "leaderboard/math/utils.py", "score/math/utils_math.py"} <= needs
    assert "hendrycks_math/utils.py" not in needs and "ifeval/utils.py" not in needs
    assert len(needs) < 10  # only the LaTeX-parsing modules (6 in lm-eval 0.4.13)


# ----------------------------------------------------------------------------- keys


def test_the_pins_are_part_of_the_function_fingerprint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _module(tmp_path / "a", "utils.py", "import sympy\ndef f(): pass\n")
    plain = function_ref("utils.f", str(tmp_path / "a"))
    assert plain.__fingerprint__() == ("function", "f", plain.source_hash)  # unchanged for other code
    _module(tmp_path / "b", "utils.py", "from sympy.parsing.latex import parse_latex\ndef f(): pass\n")
    ref = function_ref("utils.f", str(tmp_path / "b"))
    assert ref.__fingerprint__() == ("function", "f", ref.source_hash, ("side_env", ANTLR.name, ANTLR.requirements))
    before = fingerprint(ref)
    other = dataclasses.replace(ANTLR, requirements=("antlr4-python3-runtime==4.11.1",))
    monkeypatch.setattr(side_env, "SIDE_ENVS", (other,))
    assert fingerprint(ref) != before  # another pin, another key
    monkeypatch.setattr(side_env, "SIDE_ENVS", (ANTLR,))
    assert fingerprint(ref) == before


# ----------------------------------------------------------------------------- provisioning


@pytest.fixture(scope="module")
def env_root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A side-environment root provisioned from the real package index, once for this module."""
    root = tmp_path_factory.mktemp("side-envs")
    try:
        provision(ANTLR, root)
    except ProvisionError as exc:
        probe = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "-d", str(root / "probe"), *ANTLR.requirements],
            capture_output=True,
            text=True,
        )
        if probe.returncode != 0:
            pytest.skip(f"the package index is unreachable: {exc}")
        raise
    saved = os.environ.get("EVALFLOW_SIDE_ENVS")
    os.environ["EVALFLOW_SIDE_ENVS"] = str(root)
    yield root
    side_worker.stop_workers()
    if saved is None:
        os.environ.pop("EVALFLOW_SIDE_ENVS")
    else:
        os.environ["EVALFLOW_SIDE_ENVS"] = saved


def test_provisioning_installs_the_pins_with_their_metadata(env_root: Path) -> None:
    folder = env_root / ANTLR.name
    assert (folder / "antlr4" / "__init__.py").is_file() and is_provisioned(ANTLR, env_root)
    assert json.loads((folder / side_provision.MARKER).read_text())["requirements"] == list(ANTLR.requirements)
    code = "import importlib.metadata as m, antlr4; print(m.version('antlr4-python3-runtime'), antlr4.__file__)"
    seen = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(folder)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert seen[0] == "4.11.0" and seen[1].startswith(str(folder))
    assert [p.name for p in env_root.iterdir() if p.name.startswith(".")] == []  # no staging left


def test_a_provisioned_folder_is_used_without_pip(env_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_pip(*_: Any) -> None:
        raise AssertionError("pip ran for a provisioned environment")

    monkeypatch.setattr(side_provision, "_pip_install", no_pip)
    assert provision(ANTLR, env_root) == env_root / ANTLR.name


def test_processes_waiting_on_the_lock_use_the_folder_the_holder_made(tmp_path: Path) -> None:
    from filelock import FileLock

    folder = tmp_path / ANTLR.name
    code = textwrap.dedent("""\
        import sys
        from pathlib import Path
        from evalflow.taskspec.sidenv import provision as side_provision
        from evalflow.taskspec.sidenv.envs import SIDE_ENVS

        def no_pip(*_):
            raise SystemExit("pip ran although another process provisioned the folder")

        side_provision._pip_install = no_pip
        print(side_provision.provision(SIDE_ENVS[0], Path(sys.argv[1])))
    """)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    with FileLock(str(folder) + ".lock"):
        waiting = [
            subprocess.Popen(
                [sys.executable, "-c", code, str(tmp_path)],
                env=env,
                text=True,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            for _ in range(2)
        ]
        folder.mkdir()  # what the lock holder's pip and rename produce
        (folder / side_provision.MARKER).write_text(json.dumps({"requirements": list(ANTLR.requirements)}))
    for proc in waiting:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0 and out.strip() == str(folder), err


def test_a_failed_install_leaves_nothing_and_says_what_to_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALFLOW_SIDE_ENVS", str(tmp_path))
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # offline: pip sees no index and no local wheels
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "no-wheels"))
    with pytest.raises(TaskError) as caught:
        ensure_provisioned(ANTLR, needed_by="tasks/x/utils.py")
    text = str(caught.value)
    assert "tasks/x/utils.py" in text and "antlr4-python3-runtime==4.11.0" in text and "-m pip` exited with" in text
    assert f"python -m evalflow side-env provision {ANTLR.name}" in text and str(tmp_path / ANTLR.name) in text
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{ANTLR.name}.lock"]


def test_validate_refuses_before_any_model_call_when_it_cannot_provision(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    _module(lib, "utils.py", "from sympy.parsing.latex import parse_latex\ndef text(doc):\n    return doc['q']\n")
    (lib / "t.yaml").write_text(
        "task: latex_t\ndataset_path: json\ndataset_kwargs: {data_files: {test: d.jsonl}}\n"
        "test_split: test\noutput_type: generate_until\ndoc_to_text: !function utils.text\n"
        "doc_to_target: a\n"
    )
    (lib / "d.jsonl").write_text('{"q": "x", "a": "y"}\n')
    env = {
        **os.environ,
        "PYTHONPATH": str(Path(__file__).resolve().parents[3]),
        "EVALFLOW_SIDE_ENVS": str(tmp_path / "se"),
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(tmp_path / "none"),
        "EVALFLOW_CACHE": str(tmp_path / "cache"),
    }
    done = subprocess.run(
        [sys.executable, "-m", "evalflow", "validate", "task=latex_t", f"include_path=[{lib}]", "trust_task_code=true"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "side-env provision antlr4-4.11" in done.stderr and "latex_t" in done.stderr
    assert "Traceback" not in done.stderr


# ----------------------------------------------------------------------------- the worker

TASK_CODE = """\
import importlib.metadata, os, signal, sys
import antlr4

def version(doc):
    return importlib.metadata.version("antlr4-python3-runtime"), antlr4.__file__

def twice(doc, results, scale=2):
    print("task code prints go to stderr")
    return {"n": len(results) * scale}

def boom(doc):
    helper = {}
    return helper[doc["key"]]

class Odd(Exception):
    def __init__(self, a, b):
        super().__init__(a)

def odd(doc):
    raise Odd("cannot be rebuilt", 2)

def crash(doc):
    os.kill(os.getpid(), signal.SIGKILL)

def alarm(doc):
    def on_alarm(signum, frame):
        raise TimeoutError("alarm fired")
    signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, 0.05)
    while True:
        pass

def process_docs(dataset):
    return dataset.map(lambda d: {"answer": d["solution"].upper()})

class Local:
    pass

def local(doc):
    return Local()

NOT_A_FUNCTION = 3
"""


@pytest.fixture()
def task(env_root: Path, tmp_path: Path) -> Any:
    folder = tmp_path / "task"
    _module(folder, "utils.py", TASK_CODE)
    return lambda attr: resolve_function(function_ref(f"utils.{attr}", str(folder)))


def test_the_worker_sees_antlr_4_11_and_this_process_does_not(task: Any, env_root: Path) -> None:
    fn = task("version")
    assert isinstance(fn, SideFunction)
    version, where = fn({})
    assert version == "4.11.0" and where.startswith(str(env_root / ANTLR.name))
    import importlib.metadata

    assert importlib.metadata.version("antlr4-python3-runtime").startswith("4.9")  # Hydra's, untouched here


def test_results_keywords_and_signature_cross_as_in_process(task: Any) -> None:
    fn = task("twice")
    assert fn({"q": 1}, ["a", "b"]) == {"n": 4} and fn({}, ["a"], scale=5) == {"n": 5}
    assert list(inspect.signature(fn).parameters) == ["doc", "results", "scale"]
    with pytest.raises(TypeError):
        inspect.signature(fn).bind(references=[], predictions=[])


def test_a_dataset_crosses_both_ways(task: Any) -> None:
    datasets = pytest.importorskip("datasets")
    out = task("process_docs")(datasets.Dataset.from_list([{"solution": "a"}, {"solution": "b"}]))
    assert list(out["answer"]) == ["A", "B"]


def test_task_code_exceptions_surface_as_themselves_with_the_workers_traceback(task: Any) -> None:
    with pytest.raises(KeyError) as caught:
        task("boom")({"key": "missing"})
    note = "\n".join(caught.value.__notes__)
    assert "utils.py" in note and "in boom" in note and 'return helper[doc["key"]]' in note
    assert isinstance(caught.value.__cause__, side_worker.RemoteTraceback)
    with pytest.raises(SideEnvError, match=r"(?s)raised Odd: cannot be rebuilt .*Traceback.*in odd"):
        task("odd")({})


def test_what_does_not_pickle_is_an_error_naming_the_function(task: Any) -> None:
    with pytest.raises(SideEnvError, match="`twice` of .*: its arguments cannot be sent.*do not pickle"):
        task("twice")(lambda: 0, [])
    with pytest.raises(SideEnvError, match="`local` of .* returned a value this process cannot unpickle"):
        task("local")({})
    assert task("twice")({}, ["a"]) == {"n": 2}  # the worker is still the same, and answers


def test_a_crashed_worker_is_an_error_and_the_next_call_starts_another(task: Any) -> None:
    twice = task("twice")
    assert task("twice") is twice  # resolved once: templates resolve per document
    with pytest.raises(SideEnvError, match="killed by SIGKILL while running `crash`"):
        task("crash")({})
    assert twice({}, ["a"]) == {"n": 2}  # a new worker, the module imported there again


def test_signal_alarm_timeouts_work_in_the_worker(task: Any) -> None:
    with pytest.raises(TimeoutError, match="alarm fired"):
        task("alarm")({})


def test_import_and_name_errors_come_at_resolve_time(task: Any, env_root: Path, tmp_path: Path) -> None:
    with pytest.raises(TaskError, match="has no attribute 'twicee'.*did you mean 'twice'"):
        task("twicee")
    with pytest.raises(TaskError, match="'NOT_A_FUNCTION' is a int, not a function"):
        task("NOT_A_FUNCTION")
    _module(tmp_path / "broken", "utils.py", "import antlr4\nimport no_such_package_here\ndef f(d): pass\n")
    with pytest.raises(
        TaskError,
        match="in the side environment 'antlr4-4.11' failed: ModuleNotFoundError.*"
        "Install the package that provides 'no_such_package_here'",
    ):
        resolve_function(function_ref("utils.f", str(tmp_path / "broken")))


# ----------------------------------------------------------------------------- the subcommand


def _side_env_cli(*args: str, root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3]), "EVALFLOW_SIDE_ENVS": str(root)}
    return subprocess.run(
        [sys.executable, "-m", "evalflow", "side-env", *args], env=env, capture_output=True, text=True, timeout=300
    )


def test_the_subcommand_lists_and_provisions(env_root: Path, tmp_path: Path) -> None:
    listed = _side_env_cli("list", root=env_root)
    assert listed.returncode == 0 and f"{ANTLR.name}: antlr4-python3-runtime==4.11.0" in listed.stdout
    assert "provisioned" in listed.stdout and "not provisioned" not in listed.stdout
    assert "not provisioned" in _side_env_cli("list", root=tmp_path).stdout
    done = _side_env_cli("provision", ANTLR.name, root=env_root)
    assert done.returncode == 0 and f"provisioned in {env_root / ANTLR.name}" in done.stdout
    wrong = _side_env_cli("provision", "antlr", root=env_root)
    assert wrong.returncode == 2 and "did you mean 'antlr4-4.11'" in wrong.stderr and "Traceback" not in wrong.stderr
