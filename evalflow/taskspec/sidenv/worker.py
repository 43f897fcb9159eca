"""Running task code in a side environment: one reused worker interpreter per environment.

:func:`side_function` is what ``resolve_function`` returns for a module that needs a side
environment (:mod:`evalflow.taskspec.sidenv.envs`): a callable proxy that sends its arguments to the worker by pickle
(a ``datasets.Dataset`` included) and returns the result. The worker is started on first use with
this interpreter (``sys.executable -P``, the same installed packages) and a ``sys.path`` that puts
the environment's private folder first; this process never imports its packages.

An exception raised by task code is raised here as itself (same type and message) with the
worker's traceback text attached as a note and as its ``__cause__``; one that cannot be pickled,
or a worker that dies, raises :class:`SideEnvError` with the traceback or the exit status and the
worker's last stderr lines. Nothing becomes a silent 0. Task code's stderr is forwarded to this
process's, each line prefixed ``[side env NAME] ``.

    fn = side_function(ref, SIDE_ENVS[0])   # provisions the folder, starts the worker, imports
    fn(doc, ["The final answer is $\\frac12$."])
"""

from __future__ import annotations

import atexit
import codecs
import collections
import inspect
import os
import pickle
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, Protocol, cast

import xxhash

from evalflow.errors import TaskError, closest
from evalflow.taskspec.sidenv.envs import SideEnv
from evalflow.taskspec.sidenv.provision import ensure_provisioned, env_folder
from evalflow.taskspec.sidenv.worker_main import dumps, read_frame, write_frame

_MAIN = str(Path(__file__).with_name("worker_main.py"))
_CHUNK = 8192  # bytes of stderr read at a time
_READER_GRACE_S = 10.0  # how long stop() waits for stderr's end once the worker's group is dead


class CodeRef(Protocol):
    """What running task code needs of a ``!function`` reference (a hashable one, as
    ``FunctionRef`` is): the module file, its source version and the attribute. Named by shape,
    not by ``FunctionRef``, so side environments sit below the task format
    (:mod:`evalflow.taskspec.format`), which uses them."""

    @property
    def module_path(self) -> str: ...
    @property
    def attr(self) -> str: ...
    @property
    def source_hash(self) -> str: ...


class SideEnvError(TaskError):
    """Task code in a side environment failed in a way that cannot be re-raised as itself."""


class RemoteTraceback(Exception):
    """The worker's traceback text, as the ``__cause__`` of a re-raised task-code exception."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class Worker:
    """One worker interpreter; requests are answered one at a time, in its main thread."""

    def __init__(self, env: SideEnv, folder: Path) -> None:
        self.env, self.pid = env, os.getpid()
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=20)
        self.lock = threading.Lock()
        self.loaded: set[str] = set()  # task modules imported in this worker, by module name
        self.proc = subprocess.Popen(
            [sys.executable, "-P", _MAIN],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # Ctrl-C reaches the host only
        )
        self.stdin, self.stdout = cast(IO[bytes], self.proc.stdin), cast(IO[bytes], self.proc.stdout)
        self._reader = threading.Thread(target=self._forward, args=(self.proc.stderr,), daemon=True)
        self._reader.start()
        self.request({"sys_path": [str(folder)] + [p for p in sys.path if p != str(folder)]}, "start")

    def _forward(self, stream: IO[bytes]) -> None:
        """Task code's prints and logs reach this process's stderr, each line prefixed with the
        environment's name (they would otherwise read as evalflow's own); the last lines are kept
        for the message if the worker dies. The pipe is drained to its end whatever happens to a
        line here: a reader that stopped would leave the worker blocked on a full pipe, and this
        process waiting on its answer, forever. Lines are read in bounded chunks (one huge line
        costs no more memory than a chunk)."""
        prefix = f"[side env {self.env.name}] "
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        at_line_start = True
        for chunk in iter(lambda: stream.readline(_CHUNK), b""):
            text = decoder.decode(chunk)
            self.stderr_tail.append(text)
            _write_stderr(prefix + text if at_line_start else text)
            at_line_start = chunk.endswith(b"\n")

    def alive(self) -> bool:
        return self.proc.poll() is None and self.pid == os.getpid()

    def request(self, message: Any, what: str) -> Any:
        """Send one request and return its answer's payload; the worker is stopped (a later call
        starts a new one) if the exchange does not complete: a crash, or an interrupt here."""
        try:
            body = dumps(message)
        except Exception as exc:
            raise SideEnvError(
                f"{what}: its arguments cannot be sent to the '{self.env.name}' "
                f"side environment, as they do not pickle ({type(exc).__name__}: {exc})"
            ) from exc
        with self.lock:
            try:
                write_frame(self.stdin, body)
                answer = read_frame(self.stdout)
            except (EOFError, OSError) as exc:
                self.stop()  # before the message: the reader has then read all it wrote
                raise self._died(what) from exc
            except BaseException:
                self.stop()
                raise
        try:
            status, payload = pickle.loads(answer)
        except Exception as exc:
            raise SideEnvError(
                f"{what} returned a value this process cannot unpickle "
                f"({type(exc).__name__}: {exc}); return plain data (dicts, lists, "
                "strings, numbers, datasets.Dataset) from task code."
            ) from exc
        if status == "error":
            raise _reraise(payload, self.env, what)
        return payload

    def _died(self, what: str) -> SideEnvError:
        """The error for a worker that stopped answering (called after :meth:`stop`, so every
        line it wrote has been read)."""
        code = self.proc.wait()
        how = f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited with status {code}"
        tail = "".join(self.stderr_tail).strip()[-1500:]
        return SideEnvError(
            f"the '{self.env.name}' side-environment worker (pid {self.proc.pid}) {how} while "
            f"running {what}; its last output: {tail or '(none)'}. The next call starts a new worker; "
            "fix the task code if it crashes the interpreter."
        )

    def stop(self) -> None:
        """Kill the worker with its process group (a child task code started there holds the
        worker's stderr open and would keep the reader waiting), then let the reader read to the
        end and close the pipes. A descendant that left the group (``setsid``) can still hold
        stderr: the reader is then left to end with it, after a bounded wait."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # its own session and group (start_new_session)
        except (ProcessLookupError, PermissionError):  # the group is gone already
            pass
        self.proc.wait()
        self._reader.join(timeout=_READER_GRACE_S)
        streams = (self.stdin, self.stdout) + (() if self._reader.is_alive() else (self.proc.stderr,))
        for stream in streams:
            try:
                if stream is not None:
                    stream.close()
            except OSError:  # stdin's buffered bytes cannot reach a dead worker
                pass


def _write_stderr(text: str) -> None:
    """One forwarded piece of the worker's stderr, on this process's; never raises (see _forward)."""
    out = sys.stderr
    if out is None:  # no console (pythonw): nothing to print to
        return
    try:
        out.write(text)
    except UnicodeEncodeError:  # an ASCII console: escape what it cannot show rather than drop the line
        encoding = getattr(out, "encoding", None) or "ascii"
        try:
            out.write(text.encode(encoding, "backslashreplace").decode(encoding))
        except Exception:
            pass
    except Exception:
        pass


def _reraise(info: dict[str, Any], env: SideEnv, what: str) -> BaseException:
    """The task code's exception, rebuilt here, carrying the worker's traceback text."""
    text = info["traceback"]
    exc: BaseException | None = None
    if info["pickled"] is not None:
        try:
            exc = pickle.loads(info["pickled"])
        except Exception:
            exc = None
    if not isinstance(exc, Exception):
        return SideEnvError(
            f"{what} raised {info['type']}: {info['message']} in the '{env.name}' "
            f"side environment. Its traceback there:\n{text}"
        )
    exc.add_note(f"Raised in the '{env.name}' side-environment worker:\n{text}")
    exc.__cause__ = RemoteTraceback(text)
    return exc


_WORKERS: dict[tuple[str, str], Worker] = {}  # by environment and folder
_WORKERS_LOCK = threading.Lock()


def worker_for(env: SideEnv, needed_by: str) -> Worker:
    """The running worker of ``env`` (started, after provisioning, if none is or it died)."""
    key = (env.name, str(env_folder(env)))
    with _WORKERS_LOCK:
        worker = _WORKERS.get(key)
        if worker is None or not worker.alive():
            folder = ensure_provisioned(env, needed_by)
            try:
                worker = _WORKERS[key] = Worker(env, folder)
            except OSError as exc:
                raise SideEnvError(
                    f"{needed_by} needs the '{env.name}' side environment, whose worker "
                    f"({sys.executable} -P) cannot be started: {exc}"
                ) from exc
        return worker


@atexit.register
def stop_workers() -> None:
    """Stop every worker this process started (each also exits when its stdin closes)."""
    with _WORKERS_LOCK:
        for worker in _WORKERS.values():
            if worker.pid == os.getpid():
                worker.stop()
        _WORKERS.clear()


class SideFunction:
    """A task function living in a side-environment worker; called like the function itself."""

    def __init__(self, ref: CodeRef, env: SideEnv, described: dict[str, Any]) -> None:
        self.ref, self.env = ref, env
        self.module = _module_name(ref)
        self.__name__ = self.__qualname__ = described.get("name") or ref.attr
        self.__doc__ = described.get("doc")
        if described.get("params") is not None:
            self.__signature__ = inspect.Signature(
                [
                    inspect.Parameter(
                        n, getattr(inspect.Parameter, k), default=_REMOTE if d else inspect.Parameter.empty
                    )
                    for n, k, d in described["params"]
                ]
            )

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        worker = worker_for(self.env, self.ref.module_path)
        if self.module not in worker.loaded:  # a new worker, after a crash or in a forked child
            _load(worker, self.ref, self.module)
        return worker.request(
            ("call", self.module, self.ref.attr, args, kwargs), f"`{self.ref.attr}` of {self.ref.module_path}"
        )

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        return side_function, (self.ref, self.env)  # another process starts its own worker

    def __repr__(self) -> str:
        return f"<{self.ref.attr} of {self.ref.module_path} in side environment {self.env.name}>"


_REMOTE = type("RemoteDefault", (), {"__repr__": lambda self: "<default in the side environment>"})()


def _module_name(ref: CodeRef) -> str:
    """The module's name in the worker: unique per file and source version, as in-process."""
    return f"_evalflow_task_code_{xxhash.xxh64_hexdigest(ref.module_path.encode())}_{ref.source_hash[:12]}"


def _load(worker: Worker, ref: CodeRef, module: str) -> dict[str, Any]:
    described: dict[str, Any] = worker.request(
        ("load", ref.module_path, module, ref.attr), f"the import of {ref.module_path}"
    )
    worker.loaded.add(module)
    return described


_PROXIES: dict[tuple[CodeRef, str], SideFunction] = {}  # resolved once per worker folder


def side_function(ref: CodeRef, env: SideEnv) -> SideFunction:
    """The proxy for ``ref``, after importing its module in the worker (so a broken or missing
    import fails now, at task load time, as an in-process import would). Templates resolve a
    ``!function`` per document: a proxy already made is returned without a round trip."""
    key = (ref, str(env_folder(env)))
    if key in _PROXIES:
        return _PROXIES[key]
    worker = worker_for(env, ref.module_path)
    try:
        described = _load(worker, ref, _module_name(ref))
    except SideEnvError:
        raise
    except Exception as exc:
        missing = getattr(exc, "name", None) if isinstance(exc, ModuleNotFoundError) else None
        fix = f"Install the package that provides '{missing}'" if missing else "Fix the task module"
        raise TaskError(
            f"importing {ref.module_path} (for `!function ...{ref.attr}`) in the side environment "
            f"'{env.name}' failed: {type(exc).__name__}: {exc}. {fix}, or leave out the tasks that "
            "need it. The worker's traceback:\n" + str(exc.__cause__ or "")
        ) from exc
    if described.get("missing_attr"):
        raise TaskError(
            f"{ref.module_path} has no attribute '{ref.attr}' (named by a `!function` tag); "
            f"{closest(ref.attr, described['public'])} Fix the name in the YAML or define it in the module."
        )
    if not described["callable"]:
        raise TaskError(f"{ref.module_path}: '{ref.attr}' is a {described['type']}, not a function.")
    proxy = _PROXIES[key] = SideFunction(ref, env, described)
    return proxy
