"""Reading lm-eval task YAMLs: ``include`` chains, ``!function`` tags, and the TaskConfig they make.

The semantics are lm-eval 0.4.13's (``lm_eval/tasks/_yaml_loader.py``, ``_factory.py``):

* ``include: base.yaml`` (or a list) is read relative to the including file's folder, or as an
  absolute path; the merge is shallow and the including file's keys win; later includes win over
  earlier ones; an included file's ``task_list`` is not inherited.
* ``!function utils.process_docs`` names ``process_docs`` in ``utils.py`` next to the YAML. It
  becomes a :class:`FunctionRef` that carries a hash of the module's source but does *not* import
  it: indexing and planning never run task code, :func:`resolve_function` does, on first use.

Example::

    cfg = load_yaml("tasks/hellaswag/hellaswag.yaml")
    task = task_from_dict(cfg, "tasks/hellaswag/hellaswag.yaml")
    process_docs = resolve_function(task.process_docs)  # utils.py is imported only now
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from evalflow.errors import TaskError, closest
from evalflow.taskspec.format.installed import code_fingerprint
from evalflow.taskspec.format.spec import OUTPUT_TYPES, FunctionRef, TaskConfig, check_keys

# re-exported: task code lived here, and `from evalflow.taskspec.format.loader import resolve_function` is used
from evalflow.taskspec.format.taskcode import function_refs as function_refs
from evalflow.taskspec.format.taskcode import keyed_function_refs as keyed_function_refs
from evalflow.taskspec.format.taskcode import resolve_function as resolve_function

# The keys that decide what a YAML is (task, group, python task, tag); all the index reads.
HEADER_KEYS = frozenset({"task", "group", "class", "tag", "task_list", "include"})
# Keys lm-eval accepts in a task YAML and drops before building its TaskConfig (_factory.py).
DROPPED_TASK_KEYS = ("group", "task_list")

# A task file expands to at most this many YAML nodes once aliases (``*name``) are followed:
# nested aliases (a "billion laughs" file) would otherwise make every later walk over the config
# (fingerprints, JSON) exponential. lm-eval's largest task files expand to a few thousand.
MAX_YAML_NODES = 100_000

_Base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_Base):
    """Safe YAML plus ``!function``; one instance per file, as the tag's meaning is per folder."""

    base_dir: str = ""
    file: str = ""
    full: bool = True


def _construct_function(loader: _Loader, node: yaml.Node) -> Any:
    spec = str(loader.construct_scalar(node))
    if not loader.full:
        return "!function " + spec  # header scans never use values: no path or hash work
    return function_ref(spec, loader.base_dir, loader.file)


_Loader.add_constructor("!function", _construct_function)


def function_ref(spec: str, base_dir: str, yaml_file: str = "") -> FunctionRef:
    """The :class:`FunctionRef` for ``!function spec`` written in a YAML inside ``base_dir``.

    ``mod.attr`` is looked up as ``base_dir/mod.py`` (``a.b.attr`` as ``a/b.py``) like lm-eval; if
    that file is missing, the same relative path is tried under each parent folder, which finds
    references spelled from a package root (``lm_eval.tasks.x.utils.fn``) without importing them.
    """
    module, _, attr = spec.strip().rpartition(".")
    if not module or not attr:
        raise TaskError(
            f"{yaml_file or base_dir}: `!function {spec}` must be `module.attribute`; write e.g. "
            "`!function utils.process_docs` for process_docs in utils.py next to the YAML."
        )
    module_path = _find_module(base_dir, module.replace(".", "/") + ".py")
    source_hash = code_fingerprint(module_path) if os.path.isfile(module_path) else ""
    return FunctionRef(module_path=module_path, attr=attr, source_hash=source_hash)


def _find_module(base_dir: str, relative: str) -> str:
    first = os.path.join(base_dir, relative)
    folder = base_dir
    while True:
        candidate = os.path.join(folder, relative)
        if os.path.isfile(candidate):
            return os.path.realpath(candidate)
        parent = os.path.dirname(folder)
        if parent == folder:
            return os.path.realpath(first)
        folder = parent


# ----------------------------------------------------------------------------- parsing one file


def _parse(path: str, *, full: bool) -> dict[str, Any]:
    """One YAML document as a dict (``full=False``: only :data:`HEADER_KEYS` are constructed)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise TaskError(f"cannot read task file {path}: {exc.strerror}. Check the path.") from None
    loader = _Loader(data)
    loader.base_dir, loader.file, loader.full = os.path.dirname(path), path, full
    try:
        node = loader.get_single_node()
        if b"&" in data:  # without an anchor there is no alias, and the tree is as big as the file
            _check_expansion(node, path)
        doc = None if node is None else loader.construct_document(node) if full else _construct_header(loader, node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{path}, line {mark.line + 1}, column {mark.column + 1}" if mark else path
        what = " ".join(str(x) for x in (exc.context, exc.problem) if x)
        raise TaskError(
            f"{where}: malformed YAML ({what}). Fix the YAML syntax there: indentation, quotes, "
            "brackets and `key: value` pairs."
        ) from None
    except yaml.YAMLError as exc:
        raise TaskError(f"{path}: malformed YAML ({exc}). Fix the YAML syntax.") from None
    finally:
        loader.dispose()
    if not isinstance(doc, dict):
        kind = "empty" if doc is None else f"a {type(doc).__name__}"
        raise TaskError(
            f"{path}: a task file must be a mapping of task keys (`task: name`, ...), but it is "
            f"{kind}. Write the task as `key: value` lines."
        )
    return doc


def _check_expansion(root: yaml.Node | None, path: str) -> None:
    """Refuse a document whose aliases expand it past :data:`MAX_YAML_NODES`, or into itself."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()

    def size(node: yaml.Node) -> int:
        if id(node) in sizes:
            return sizes[id(node)]
        if id(node) in open_nodes:
            raise TaskError(
                f"{path}, line {node.start_mark.line + 1}: a YAML alias refers to a node that contains "
                "it (a recursive structure). Task files must be finite trees; write the value out."
            )
        open_nodes.add(id(node))
        children: list[Any] = (
            node.value
            if isinstance(node, yaml.SequenceNode)
            else ([n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode) else [])
        )
        total = 1
        for child in children:
            total += size(child)
            if total > MAX_YAML_NODES:
                raise TaskError(
                    f"{path}: expanding its YAML aliases (`*name`) gives more than {MAX_YAML_NODES:,} "
                    "values, far beyond any task config (an alias expansion bomb?). Refused; write the "
                    "task without nested aliases."
                )
        open_nodes.discard(id(node))
        sizes[id(node)] = total
        return total

    if root is not None:
        size(root)


def _construct_header(loader: _Loader, node: yaml.Node) -> Any:
    """Construct only the keys of the composed document that classify it (about 2x faster)."""
    if not isinstance(node, yaml.MappingNode):
        return loader.construct_document(node)
    out: dict[str, Any] = {}
    for key_node, value_node in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":  # `<<:` merges: construct it all instead
            return loader.construct_document(node)
        if isinstance(key_node, yaml.ScalarNode) and key_node.value in HEADER_KEYS:
            out[key_node.value] = loader.construct_object(value_node, deep=True)
    return out


# ----------------------------------------------------------------------------- includes


@lru_cache(maxsize=65536)
def _real(path: str) -> str:
    return os.path.realpath(path)


def _load_merged(
    path: str,
    *,
    full: bool,
    chain: tuple[str, ...],
    memo: dict[str, tuple[dict[str, Any], frozenset[str]]] | None,
) -> tuple[dict[str, Any], frozenset[str]]:
    """The file merged with its includes, and every file that was read to make it."""
    if path in chain:
        cycle = " -> ".join(chain[chain.index(path) :] + (path,))
        raise TaskError(
            f"include cycle: {cycle}. A task file cannot include itself, directly or through "
            "other files; remove one of these `include:` lines."
        )
    if memo is not None and path in memo:
        return memo[path]
    doc, files = _merge_includes(_parse(path, full=full), path, full=full, chain=chain + (path,), memo=memo)
    result = (doc, files | {path})
    if memo is not None:
        memo[path] = result
    return result


def _merge_includes(
    doc: dict[str, Any],
    path: str,
    *,
    full: bool,
    chain: tuple[str, ...],
    memo: dict[str, tuple[dict[str, Any], frozenset[str]]] | None,
) -> tuple[dict[str, Any], frozenset[str]]:
    """``doc`` (written in file ``path``) merged over its includes, and the files they read."""
    includes = doc.pop("include", None)
    if includes is None:
        return doc, frozenset()
    merged: dict[str, Any] = {}
    files: set[str] = set()
    for inc in includes if isinstance(includes, list) else [includes]:
        sub, sub_files = _load_merged(_include_path(path, inc), full=full, chain=chain, memo=memo)
        files |= sub_files
        merged.update((k, v) for k, v in sub.items() if k != "task_list")
    merged.update(doc)
    return merged, frozenset(files)


def with_includes(cfg: Mapping[str, Any], yaml_file: str) -> dict[str, Any]:
    """A mapping written inside ``yaml_file`` (an inline group member) with its ``include:`` merged.

    lm-eval 0.4.13 refuses ``include`` inside inline members; older versions and the shipped flan
    groups use it, relative to the group file's folder, which is what this does.
    """
    return _merge_includes(dict(cfg), yaml_file, full=True, chain=(yaml_file,), memo=None)[0]


def _include_path(including: str, inc: Any) -> str:
    if not isinstance(inc, str) or not inc:
        raise TaskError(f"{including}: `include:` must be a file name or a list of file names, got {inc!r}.")
    target = _real(os.path.join(os.path.dirname(including), inc))
    if not os.path.isfile(target):
        raise TaskError(
            f"{including}: included file '{inc}' not found (looked for {target}). Includes are "
            "relative to the including file's folder, or absolute; fix the name or add the file."
        )
    return target


def load_yaml(path: str | Path) -> dict[str, Any]:
    """A task/group YAML with includes merged and ``!function`` tags as :class:`FunctionRef`.

    Returns a fresh dict on every call (safe to modify). Raises :class:`TaskError` for malformed
    YAML (with the line), include cycles (with the chain) and missing includes (both files).
    """
    real = _real(os.path.abspath(os.path.expanduser(os.fspath(path))))
    return _load_merged(real, full=True, chain=(), memo=None)[0]


def read_header(
    path: str, memo: dict[str, tuple[dict[str, Any], frozenset[str]]]
) -> tuple[dict[str, Any], frozenset[str]]:
    """Only the classifying keys (:data:`HEADER_KEYS`) of ``path`` after includes, for indexing.

    ``memo`` is shared across the files of one scan: included templates are parsed once. The
    returned dicts are shared too and must not be modified. ``path`` must be a real path.
    """
    return _load_merged(path, full=False, chain=(), memo=memo)


def key_origin(path: str, key: str) -> str:
    """The file in ``path``'s include chain that sets top-level ``key``, for messages that name it.

    The file itself if it has the key, else the last of its includes (recursively) that has it, as
    the merge does; ``path`` when no file of the chain has it (a group override, a task_list item).
    """
    if not os.path.isfile(path):
        return path
    return _origin(_real(os.path.abspath(path)), key, ()) or path


def _origin(path: str, key: str, chain: tuple[str, ...]) -> str | None:
    if path in chain:
        return None
    try:
        doc = _parse(path, full=True)
        if key in doc:
            return path
        includes = doc.get("include") or []
        for inc in reversed(includes if isinstance(includes, list) else [includes]):
            found = _origin(_include_path(path, inc), key, chain + (path,))
            if found:
                return found
    except TaskError:  # the file loaded once already; if it cannot be read now, name the task's own
        return None
    return None


# ----------------------------------------------------------------------------- TaskConfig


def task_from_dict(raw: Mapping[str, Any], source: str) -> TaskConfig:
    """Validate and normalize one task's merged config into a :class:`TaskConfig`.

    Like lm-eval 0.4.13: ``group`` and ``task_list`` are dropped (old-style task YAMLs carry a
    ``group`` key), ``tag`` becomes a tuple, non-mapping ``metadata`` is wrapped as
    ``{"_metadata": value}``, and ``generation_kwargs`` get lm-eval's defaults. A ``class:`` task
    (lm-eval's Python task API) cannot run in evalflow's declarative stages and is refused.
    """
    if not isinstance(raw, Mapping):
        raise TaskError(f"{source}: a task config must be a mapping, got {type(raw).__name__}.")
    if "class" in raw:
        raise TaskError(
            f"{source}: task '{raw.get('task')}' is a Python task class (`class: {raw['class']}`), "
            "lm-eval's imperative task API, which evalflow's declarative stages cannot run. Write "
            "the task as a YAML config (doc_to_text, doc_to_target, metric_list, ...) instead."
        )
    cfg = {k: v for k, v in raw.items() if k not in DROPPED_TASK_KEYS}
    check_keys(cfg, source)
    name = cfg.get("task")
    if not isinstance(name, str) or not name:
        raise TaskError(f"{source}: `task:` must be the task's name (a string), got {name!r}.")
    cfg["tag"] = _tags(cfg.get("tag"), source)
    cfg["metric_list"] = _dict_tuple(cfg.get("metric_list"), "metric_list", ("metric",), source)
    cfg["filter_list"] = _dict_tuple(cfg.get("filter_list"), "filter_list", ("name", "filter"), source)
    _check_values(cfg, source)
    if "metadata" in cfg and cfg["metadata"] is not None and not isinstance(cfg["metadata"], Mapping):
        cfg["metadata"] = {"_metadata": cfg["metadata"]}
    cfg["generation_kwargs"] = _generation_kwargs(cfg)
    return TaskConfig(**cfg, source=source)


def _tags(value: Any, source: str) -> tuple[str, ...]:
    if value is None:
        return ()
    tags = [value] if isinstance(value, str) else value
    if not isinstance(tags, (list, tuple)) or not all(isinstance(t, str) for t in tags):
        raise TaskError(f"{source}: `tag:` must be a name or a list of names, got {value!r}.")
    return tuple(tags)


def _dict_tuple(value: Any, key: str, required: tuple[str, ...], source: str) -> tuple[Mapping[str, Any], ...] | None:
    if value is None:
        return None
    if not isinstance(value, (list, tuple)):
        raise TaskError(f"{source}: `{key}:` must be a list of mappings, got {type(value).__name__}.")
    for i, item in enumerate(value):
        if not isinstance(item, Mapping) or any(r not in item for r in required):
            need = " and ".join(f"`{r}`" for r in required)
            raise TaskError(f"{source}: {key} entry {i} ({item!r}) must be a mapping with {need}.")
    return tuple(dict(item) for item in value)


def _check_values(cfg: dict[str, Any], source: str) -> None:
    """Refuse values whose type the stages would otherwise misread much later."""
    output_type = cfg.get("output_type", "generate_until")
    if output_type not in OUTPUT_TYPES:
        raise TaskError(
            f"{source}: output_type '{output_type}' is not one of {', '.join(OUTPUT_TYPES)}; "
            f"{closest(str(output_type), OUTPUT_TYPES)}"
        )
    for key in ("process_docs", "process_results"):
        if cfg.get(key) is not None and not isinstance(cfg[key], FunctionRef):
            raise TaskError(f"{source}: `{key}:` must be a `!function module.name` tag, got {cfg[key]!r}.")
    num = cfg.get("num_fewshot")
    if num is not None and (isinstance(num, bool) or not isinstance(num, int) or num < 0):
        raise TaskError(f"{source}: `num_fewshot:` must be a whole number >= 0, got {num!r}.")
    repeats = cfg.get("repeats", 1)
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise TaskError(f"{source}: `repeats:` must be a whole number >= 1, got {repeats!r}.")
    for key in ("generation_kwargs", "dataset_kwargs", "fewshot_config"):
        if cfg.get(key) is not None and not isinstance(cfg[key], Mapping):
            raise TaskError(f"{source}: `{key}:` must be a mapping, got {cfg[key]!r}.")
    cluster = cfg.get("cluster_key")
    if cluster is not None and (not isinstance(cluster, str) or not cluster.strip()):
        raise TaskError(
            f"{source}: `cluster_key:` must be a document field's name or a Jinja template (e.g. "
            f'`cluster_key: passage`, or `cluster_key: "{{{{article_id}}}}"`), got {cluster!r}. Write the field '
            "whose value the documents of one passage, subject or source share, or remove the key."
        )


def _generation_kwargs(cfg: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """lm-eval's TaskConfig.__post_init__: float temperature, `until` and greedy defaults."""
    delimiter = cfg.get("fewshot_delimiter", "\n\n")
    given = cfg.get("generation_kwargs")
    if given is None:
        if cfg.get("output_type", "generate_until") != "generate_until":
            return None
        return {"temperature": 0.0, "do_sample": False, "max_gen_toks": 256, "until": [delimiter]}
    out = dict(given)
    if "temperature" in out:
        out["temperature"] = float(out["temperature"])
    if "until" not in out:
        out["until"] = [delimiter]
    return out
