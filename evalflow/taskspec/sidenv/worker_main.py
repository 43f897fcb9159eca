"""The side-environment worker: a second interpreter that imports and runs task code for evalflow.

Started by :mod:`evalflow.taskspec.sidenv.worker` as ``python -P this_file`` and importing only the
standard library until it has its ``sys.path`` (the private package folder first, then the host's
path), so the pinned packages are the ones task code finds. Requests come on stdin and answers
leave on the original stdout, as length-prefixed pickles; fd 1 is then pointed at stderr so task
code's prints cannot corrupt the channel. Every call runs in the main thread: task code's
``signal.alarm`` timeouts (lm-eval's MATH ``is_equiv``) work as in lm-eval.

Requests: ``("load", path, name, attr)`` imports ``path`` as module ``name`` and describes
``attr``; ``("call", name, attr, args, kwargs)`` calls it. Answers: ``("ok", value)`` or
``("error", info)`` with the exception's type, text, formatted traceback and, if it pickles, the
exception itself.
"""

import importlib.util
import inspect
import os
import pickle
import signal
import struct
import sys
import traceback
from typing import IO, Any

_HEADER = struct.Struct("!Q")


def read_frame(stream: IO[bytes]) -> bytes:
    """One message's bytes (a pickle), or EOFError when the other side closed the channel."""
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        raise EOFError
    size = _HEADER.unpack(header)[0]
    body = stream.read(size)
    if len(body) < size:
        raise EOFError
    return body


def write_frame(stream: IO[bytes], body: bytes) -> None:
    stream.write(_HEADER.pack(len(body)) + body)
    stream.flush()


def dumps(message: Any) -> bytes:
    return pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)


def _error(exc: BaseException) -> tuple[str, dict[str, Any]]:
    try:
        pickled = pickle.dumps(exc, protocol=pickle.HIGHEST_PROTOCOL)
        pickle.loads(pickled)
    except Exception:
        pickled = None
    return "error", {
        "type": type(exc).__qualname__,
        "message": str(exc),
        "pickled": pickled,
        "missing": getattr(exc, "name", None) if isinstance(exc, ModuleNotFoundError) else None,
        "traceback": "".join(traceback.format_exception(exc)),
    }


def _describe(fn: Any) -> dict[str, Any]:
    """What the host's proxy shows of ``fn``: names, docstring, parameters (for ``bind``)."""
    try:
        params = [(p.name, p.kind.name, p.default is not p.empty) for p in inspect.signature(fn).parameters.values()]
    except (TypeError, ValueError):
        params = None
    return {
        "callable": callable(fn),
        "type": type(fn).__name__,
        "params": params,
        "name": getattr(fn, "__name__", None),
        "doc": getattr(fn, "__doc__", None),
    }


def _load(modules: dict[str, Any], path: str, name: str, attr: str) -> dict[str, Any]:
    if name not in modules:
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"{path} cannot be imported as a Python module")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
        modules[name] = module
    module = modules[name]
    if not hasattr(module, attr):
        return {"missing_attr": True, "public": [n for n in vars(module) if not n.startswith("_")]}
    return _describe(getattr(module, attr))


def serve(requests: IO[bytes], answers: IO[bytes]) -> None:
    """Answer requests until the host closes stdin."""
    modules: dict[str, Any] = {}
    while True:
        try:
            body = read_frame(requests)
        except EOFError:
            return
        try:
            request = pickle.loads(body)
            if request[0] == "load":
                answer: Any = ("ok", _load(modules, *request[1:]))
            else:
                _, name, attr, args, kwargs = request
                answer = ("ok", getattr(modules[name], attr)(*args, **kwargs))
            body = dumps(answer)
        except BaseException as exc:
            if isinstance(exc, SystemExit):
                exc = RuntimeError(f"task code called sys.exit({exc.code})")
            body = dumps(_error(exc))
        write_frame(answers, body)


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the host decides: it kills this worker on Ctrl-C
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    requests = sys.stdin.buffer
    hello = pickle.loads(read_frame(requests))
    sys.path[:] = hello["sys_path"]
    importlib.invalidate_caches()
    write_frame(answers, dumps(("ok", {"pid": os.getpid(), "executable": sys.executable})))
    serve(requests, answers)


if __name__ == "__main__":
    main()
