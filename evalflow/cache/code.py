"""The identity of code, for cache keys: an edit to what runs changes the key of what it computes.

Two kinds of code enter keys, each by its source, never by a hand-kept number or an ``id()``:

- a **component** (a registered metric, aggregation or filter function, a filter class):
  :func:`code_hash` hashes the file of the module that defines it (of every class in its MRO, for a
  class), so an edit anywhere in that module changes it, as ``!function`` references do. Code with
  no file (``python -c``, a notebook cell), or whose file was edited after it was imported, is
  hashed by what is loaded: its code objects, defaults, closure and the module-level names it
  reads, recursively.
- a **stage**: :func:`module_closure` is the stage's module and every module of its package that
  it imports, transitively, read from their ``import`` statements (``ast``, no import is run), each
  with the hash of its file.

    >>> def double(x):
    ...     return 2 * x
    >>> code_hash(double) == code_hash(double), len(code_hash(double))
    (True, 32)
"""

from __future__ import annotations

import ast
import functools
import inspect
import os
import re
import sys
import weakref
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import CodeType, MappingProxyType, ModuleType
from typing import Any

from evalflow.cache.fingerprint import UnhashableError, canonical, file_fingerprint, fingerprint
from evalflow.cache.import_memo import remembered_imports
from evalflow.cache.import_memo import save as save_imports

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def code_hash(obj: Any) -> str:
    """A hash of the code that runs when ``obj`` (a function, class or callable object) is called.

    Memoized per object when all of it comes from files: its loaded code cannot change (a reload
    makes new objects), while code without a file may read a module-level name a notebook rebinds.
    """
    try:
        return _FROM_FILES[obj]
    except (KeyError, TypeError):
        pass
    units = [_unit(u) for u in _units(obj)]
    digest = fingerprint(units)
    if all(u[0] in ("file", "builtin") for u in units):
        try:
            _FROM_FILES[obj] = digest
        except TypeError:  # not weakly referenceable: recomputed each time
            pass
    return digest


_FROM_FILES: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


def _units(obj: Any) -> list[Any]:
    """The functions and classes whose code ``obj`` runs: wrappers and what they wrap, a partial's
    function, a method's function, a class's MRO, a callable object's class."""
    if isinstance(obj, functools.partial):
        return [("partial", _value(obj.args, set()), _value(obj.keywords, set()))] + _units(obj.func)
    if inspect.ismethod(obj):
        return _units(obj.__func__)
    if isinstance(obj, type):
        return [k for k in obj.__mro__ if k.__module__ != "builtins"]
    if inspect.isfunction(obj) or inspect.isbuiltin(obj):
        wrapped = getattr(obj, "__wrapped__", None)
        return [obj] + (_units(wrapped) if wrapped is not None else [])
    return _units(type(obj))


def _unit(obj: Any) -> Any:
    """A function's or class's identity: its qualified name and its module's file (not the
    module's import name, which does not change what runs), else its loaded code."""
    name = getattr(obj, "__qualname__", None)
    if inspect.isbuiltin(obj):  # C code: its identity is its full name (and the interpreter's)
        return ("builtin", getattr(obj, "__module__", None), name)
    path = _source_file(obj)
    if path is not None and _matches_file(obj, path):
        return ("file", name, file_fingerprint(path))
    return ("loaded", name, _loaded(obj, set()))


def _source_file(obj: Any) -> str | None:
    try:
        path = inspect.getsourcefile(obj)
    except (TypeError, OSError):  # a class of a module without a file (`python -c`, a notebook)
        return None
    return path if path and os.path.isfile(path) else None


def _matches_file(obj: Any, path: str) -> bool:
    """Whether the loaded code of ``obj``'s module is what its file compiles to now: a module
    edited after it was imported runs its old code, which the file's hash would not describe.
    Every function of the module is compared (an edited helper counts), not its data."""
    module = sys.modules.get(getattr(obj, "__module__", ""))
    namespace = obj.__globals__ if inspect.isfunction(obj) else vars(module) if module else {}
    compiled = _compiled(path, file_fingerprint(path))
    real = os.path.realpath(path)
    return all(
        compiled.get(f.__code__.co_qualname) == f.__code__
        for f in _functions([obj, *namespace.values()])
        if os.path.realpath(f.__code__.co_filename) == real
    )


def _functions(objects: list[Any]) -> Iterator[Any]:
    """The functions among ``objects`` and the methods of the classes among them."""
    for obj in objects:
        if inspect.isfunction(obj):
            yield obj
        elif isinstance(obj, type):
            yield from (f for f in vars(obj).values() if inspect.isfunction(f))


@functools.lru_cache(maxsize=256)
def _compiled(path: str, digest: str) -> Mapping[str, CodeType]:
    """Every code object the file compiles to, by qualified name (first definition wins)."""
    try:
        module = compile(Path(path).read_bytes(), path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return {}
    found: dict[str, CodeType] = {}
    for code in _nested(module):
        found.setdefault(code.co_qualname, code)
    return MappingProxyType(found)


def _nested(code: CodeType) -> Iterator[CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, CodeType):
            yield from _nested(const)


def _loaded(obj: Any, seen: set[int]) -> Any:
    """The loaded code of a function or class, with the module-level names it reads."""
    if id(obj) in seen:  # id() only to stop at a cycle, never as part of the hash
        return ("cycle", getattr(obj, "__qualname__", ""))
    seen.add(id(obj))
    if isinstance(obj, type):
        members = {
            k: _value(v, seen)
            for k, v in sorted(vars(obj).items())
            if k not in ("__dict__", "__weakref__", "__module__")
        }
        return ("class", obj.__qualname__, [_value(b, seen) for b in obj.__bases__], members)
    cells = [c.cell_contents for c in obj.__closure__ or () if _filled(c)]
    code = obj.__code__
    reads = {n: _value(obj.__globals__[n], seen) for n in _names(code) if n in obj.__globals__}
    return (
        "function",
        _code(code),
        _value(obj.__defaults__, seen),
        _value(obj.__kwdefaults__, seen),
        _value(cells, seen),
        reads,
    )


def _filled(cell: Any) -> bool:
    try:
        _ = cell.cell_contents  # an empty cell raises
    except ValueError:
        return False
    return True


def _names(code: CodeType) -> list[str]:
    return sorted({n for c in _nested(code) for n in c.co_names})


def _code(code: CodeType) -> Any:
    consts = [_code(c) if isinstance(c, CodeType) else _const(c) for c in code.co_consts]
    return (
        code.co_code,
        code.co_names,
        code.co_varnames,
        code.co_freevars,
        code.co_cellvars,
        code.co_argcount,
        code.co_kwonlyargcount,
        code.co_flags,
        consts,
    )


def _const(value: Any) -> Any:
    if isinstance(value, frozenset):
        return ("frozenset", sorted(repr(v) for v in value))
    if isinstance(value, tuple):
        return [_const(v) for v in value]
    if value is Ellipsis or isinstance(value, complex):
        return repr(value)
    return value


def _value(value: Any, seen: set[int]) -> Any:
    """A module-level value as hashable data: code by its source (or loaded code), modules by name,
    plain data canonically, anything else by its type and its repr without memory addresses."""
    if isinstance(value, ModuleType):
        return ("module", value.__name__)
    if isinstance(value, (staticmethod, classmethod)):
        return _value(value.__func__, seen)
    if isinstance(value, property):
        return [_value(f, seen) for f in (value.fget, value.fset, value.fdel)]
    if inspect.isfunction(value) or isinstance(value, type):
        path = _source_file(value)
        if path is not None and _matches_file(value, path):
            return ("file", value.__qualname__, file_fingerprint(path))
        return _loaded(value, seen)
    if isinstance(value, (list, tuple)):
        return [_value(v, seen) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: _value(v, seen) for k, v in value.items()}
    try:
        canonical(value)
        return value
    except UnhashableError:
        return ("object", type(value).__module__, type(value).__qualname__, _ADDRESS.sub("", repr(value)))


def module_closure(module: str, package_dir: Path, exclude: tuple[str, ...] = ()) -> Mapping[str, str]:
    """``{module name: file hash}`` of ``module`` and every module of its package it imports.

    ``package_dir`` is the folder of the top-level package (``module``'s first dotted part);
    modules under ``exclude`` (and what only they import) are left out. Imports inside functions
    count: a stage's lazy import is still code it runs. Parent packages' ``__init__`` modules
    count only when imported from (``from pkg import name``), so a package whose ``__init__``
    re-exports every stage does not tie each stage to all the others.
    """
    package = module.split(".")[0]
    if _module_file(module, package_dir) is None:  # e.g. a zipped install: no source to hash
        raise FileNotFoundError(
            f"no source file for module {module} under {package_dir}; its code "
            "cannot be hashed into cache keys (install the package from files)"
        )
    found: dict[str, str] = {}
    todo = [module]
    while todo:
        name = todo.pop()
        path = _module_file(name, package_dir)
        if path is None and "." in name:  # `from m import a` where a is a name in m, not a module
            name = name.rpartition(".")[0]
            path = _module_file(name, package_dir)
        if name in found or path is None or _excluded(name, exclude):
            continue
        digest = file_fingerprint(path)
        found[name] = digest
        todo.extend(
            m for m in _imports(str(path), digest, name, path.name == "__init__.py") if m.split(".")[0] == package
        )
    save_imports()
    return MappingProxyType(dict(sorted(found.items())))


def _excluded(name: str, exclude: tuple[str, ...]) -> bool:
    return any(name == e or name.startswith(e + ".") for e in exclude)


def _module_file(name: str, package_dir: Path) -> Path | None:
    base = os.path.join(package_dir, *name.split(".")[1:])
    for path in (base + ".py" if "." in name else None, os.path.join(base, "__init__.py")):
        if path is not None and os.path.isfile(path):
            return Path(path)
    return None


@functools.lru_cache(maxsize=1024)
def _imports(path: str, digest: str, module: str, is_package: bool) -> tuple[str, ...]:
    """The absolute names of the modules a file imports. ``from m import a`` names ``m.a`` or,
    when that is no module, ``m`` (the two are told apart by :func:`module_closure`). Remembered
    across runs by the file's content hash (:mod:`evalflow.cache.import_memo`)."""
    return remembered_imports(
        path, digest, module, is_package, lambda data: _parsed_imports(data, path, module, is_package)
    )


def _parsed_imports(data: bytes, path: str, module: str, is_package: bool) -> tuple[str, ...]:
    tree = ast.parse(data, path)
    here = module if is_package else module.rpartition(".")[0]
    names: list[str] = []
    for node in all_statements(tree.body):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = here.split(".")[: len(here.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            names.extend(f"{base}.{alias.name}" if alias.name != "*" else base for alias in node.names)
    return tuple(dict.fromkeys(n for n in names if n))


def all_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement, at any depth (imports are statements: expressions need no visit)."""
    for stmt in body:
        yield stmt
        for name in ("body", "orelse", "finalbody", "handlers", "cases"):
            inner = getattr(stmt, name, None)
            if isinstance(inner, list):
                yield from all_statements(inner)
