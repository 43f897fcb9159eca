"""``python -m evalflow explain RUN [RUN_B]``: why each computed stage of a run re-ran.

For every task and stage of the run (of RUN_B when two are given) that was computed rather than
served from the cache, it names the fields of the stage's key inputs that differ from the closest
earlier computation of the same task: RUN when two are given, else the earlier finished run folder
(under the same ``outputs/``) whose keys for that task match most stages. It reads manifest.json
only (every stage's key inputs are recorded there as plain data), so it works without the cache::

    python -m evalflow explain outputs/2026-11-30/12-00-00
    python -m evalflow explain outputs/run_a outputs/run_b
    # toy_mc metrics re-ran: metric_list: + acc_norm
    # toy_mc inference re-ran: 40 of 80 requests new (fewshot: limit: 10 → 20)
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalflow.errors import RunFolderError
from evalflow.insight.gate_sequence import gate_lines
from evalflow.output.contained import link_out
from evalflow.output.run_folder import is_complete
from evalflow.output.run_paths import MANIFEST, manifest_file, results_file

Stage = Mapping[str, Any]  # one entry of manifest["stages"]


@dataclass(frozen=True)
class Manifest:
    folder: Path
    data: Mapping[str, Any]
    started: float

    def stages(self, task: str) -> dict[str, Stage]:
        return {s["stage"]: s for s in self.data.get("stages", []) if s["task"] == task}

    def tasks(self) -> list[str]:
        return list(dict.fromkeys(s["task"] for s in self.data.get("stages", [])))


def read_manifest(folder: Path) -> Manifest:
    path = manifest_file(folder)
    if not path.is_file():
        raise RunFolderError(
            f"{folder}: no {MANIFEST}; explain needs an evalflow run folder (outputs/<date>/<time>/), "
            "written by a run that recorded its stages"
        )
    for file in (path, results_file(folder)):
        reason = link_out(folder, file)  # another folder's file is no record of this run
        if reason is not None:
            raise RunFolderError(f"{file}: not read: {reason}")
    data = json.loads(path.read_text())
    if any("inputs" not in s for s in data.get("stages", [])):
        raise RunFolderError(
            f"{path}: its stages carry no key inputs (written by an evalflow before `explain` existed); "
            "re-run it once to record them"
        )
    results = results_file(folder)
    started = json.loads(results.read_text()).get("date", 0.0) if results.is_file() else path.stat().st_mtime
    return Manifest(Path(folder), data, float(started))


def explain(run: Path, reference: Path | None = None, search: Path | None = None) -> list[str]:
    """The explanation lines for ``run`` (against ``reference``, else the closest earlier run)."""
    return explain_compared(run, reference, search)[0]


def explain_compared(
    run: Path, reference: Path | None = None, search: Path | None = None
) -> tuple[list[str], dict[str, Path | None]]:
    """:func:`explain`'s lines and, for each task of ``run`` that computed a stage, the run folder
    they compare it with (``reference``, else the closest earlier run; None: no run of the task)."""
    rounds = gate_lines(run)
    if rounds and reference is None:  # the rounds' own runs are gone: an earlier folder would explain the wrong run
        note = (
            "each round computed only its new documents, the earlier rounds' answers read from the cache; "
            f"to see why against another run: python -m evalflow explain {run} OTHER_RUN"
        )
        return [*rounds, note], {}
    target = read_manifest(run)
    ref = read_manifest(reference) if reference is not None else None
    bases = _bases(target, ref, search)
    compared = {task: base.folder if base is not None and base.stages(task) else None for task, base in bases.items()}
    return _lines(run, target, ref, bases), compared


def _lines(run: Path, target: Manifest, ref: Manifest | None, bases: Mapping[str, Manifest | None]) -> list[str]:
    """The lines: the gate's rounds, then why each computed stage of each task re-ran against its base."""
    lines: list[str] = gate_lines(run)  # a sequential gate's folder: its rounds and verdict first
    for task, base in bases.items():
        stages = target.stages(task)
        computed = [s for s in stages.values() if not s["hit"]]
        if base is None or not base.stages(task):
            where = f"in {ref.folder}" if ref is not None else "among earlier run folders"
            lines.append(f"{task}: computed for the first time (no run of {task} {where})")
            continue
        old = base.stages(task)
        models = (base.data.get("model_identity"), target.data.get("model_identity"))
        for stage in computed:
            lines.append(f"{task} {stage['stage']} re-ran: {_why(stage, stages, old, models, base.folder)}")
        lines.extend(_execution_change(task, base, target))
    return lines


def _bases(target: Manifest, ref: Manifest | None, search: Path | None) -> dict[str, Manifest | None]:
    """Each task with a computed stage -> the run its stages are explained against."""
    earlier = None if ref is not None else _earlier_runs(target, search)
    bases: dict[str, Manifest | None] = {}
    for task in target.tasks():
        stages = target.stages(task)
        if any(not s["hit"] for s in stages.values()):
            bases[task] = ref if ref is not None else _closest(task, stages, earlier or [])
    return bases


def _execution_change(task: str, old: Manifest, new: Manifest) -> list[str]:
    """A line when what ran the task's code (sandbox, side environment) differs from the other run's."""
    from evalflow.output.code_execution import task_execution

    if "code_execution" not in old.data or "code_execution" not in new.data:  # older run folders
        return []
    a, b = task_execution(old.data["code_execution"], task), task_execution(new.data["code_execution"], task)
    if a == b:
        return []
    return [f"{task} code ran differently than in {old.folder}: {'; '.join(_paths(a, b)) or 'changed'}"]


def _earlier_runs(target: Manifest, search: Path | None) -> list[Manifest]:
    root = search or _outputs_root(target.folder)
    found = []
    for path in root.rglob(MANIFEST):
        folder = path.parent
        if folder.resolve() == target.folder.resolve() or not is_complete(folder):
            continue
        try:
            other = read_manifest(folder)
        except (RunFolderError, ValueError):
            continue  # an older or damaged folder cannot be a reference
        if other.started < target.started:
            found.append(other)
    return found


def _outputs_root(folder: Path) -> Path:
    """The ``outputs/`` folder a run folder lies in (its grandparent when there is none)."""
    for parent in folder.resolve().parents:
        if parent.name == "outputs":
            return parent
    return folder.resolve().parent.parent


def _closest(task: str, stages: Mapping[str, Stage], runs: Sequence[Manifest]) -> Manifest | None:
    """The earlier run whose keys for ``task`` match most stages; among equals, the one whose
    differing stages differ in the fewest key inputs (a limit-10 run explains a limit-20 run better
    than a 3-shot limit-5 one), then the latest."""
    scored = []
    for run in runs:
        old = run.stages(task)
        if old:
            same = sum(1 for name, s in stages.items() if name in old and old[name]["key"] == s["key"])
            scored.append((same, -_differing_inputs(stages, old), run.started, run))
    return max(scored, key=lambda t: t[:3])[3] if scored else None


def _differing_inputs(new: Mapping[str, Stage], old: Mapping[str, Stage]) -> int:
    return sum(
        len(list(_paths(old[name]["inputs"], s["inputs"])))
        for name, s in new.items()
        if name in old and old[name]["key"] != s["key"]
    )


def _why(stage: Stage, new: Mapping[str, Stage], old: Mapping[str, Stage], models: tuple[Any, Any], ref: Path) -> str:
    before = old.get(stage["stage"])
    if stage["key"] is None:
        return "never cached: it depends on a model object without identity(), so it runs every time"
    if before is None:
        return f"the stage did not run in {ref}"
    if before["key"] == stage["key"]:
        return f"same inputs as in {ref}; its cache entry was gone (cache cleared, or another cache_dir)"
    causes = _own_changes(stage["inputs"], before["inputs"], models)
    if not causes:
        causes = [f"{up}: {c}" for up, c in _upstream_causes(stage, new, old, models)]
    text = "; ".join(dict.fromkeys(causes)) or "its key inputs differ"
    counts = stage.get("requests")
    if stage["stage"] in ("inference", "judge_inference") and counts:
        kind = "judge requests" if stage["stage"] == "judge_inference" else "requests"
        return f"{counts['computed']} of {counts['requests']} {kind} new ({text})"
    return text


def _upstream_causes(
    stage: Stage, new: Mapping[str, Stage], old: Mapping[str, Stage], models: tuple[Any, Any]
) -> Iterator[tuple[str, str]]:
    """The own changes of the nearest upstream stages that changed (the root causes)."""
    for up in stage["inputs"].get("upstream", {}):
        a, b = old.get(up), new.get(up)
        if a is None or b is None or a["key"] == b["key"]:
            continue
        own = _own_changes(b["inputs"], a["inputs"], models)
        if own:
            yield from ((up, c) for c in own)
        else:
            yield from _upstream_causes(b, new, old, models)


def _own_changes(new: Mapping[str, Any], old: Mapping[str, Any], models: tuple[Any, Any]) -> list[str]:
    out: list[str] = []
    if new.get("code") != old.get("code"):
        out.append(_code_change(old.get("code"), new.get("code")))
    for section in ("task", "derived"):
        a, b = old.get(section, {}), new.get(section, {})
        for name in sorted(set(a) | set(b)):
            if a.get(name) == b.get(name):
                continue
            if section == "derived" and new.get("stage") == "judge_requests":  # the judges' rubrics and gen_kwargs
                out.extend(_judge_changes("judge prompt", a.get(name), b.get(name)))
            else:
                out.append(_field_change(name, a.get(name), b.get(name)))
    a, b = old.get("identity", {}), new.get("identity", {})
    for name in sorted(set(a) | set(b)):
        if a.get(name) != b.get(name):
            if name == "data":
                out.extend(_data_changes(a.get(name), b.get(name), new.get("task", {})))
            elif name == "components":
                out.extend(_component_changes(a.get(name) or {}, b.get(name) or {}))
            else:
                out.append(_field_change(name, a.get(name), b.get(name)))
    a, b = old.get("settings", {}), new.get("settings", {})
    for name in sorted(set(a) | set(b)):
        if a.get(name) == b.get(name):
            continue
        if name == "model":
            diffs = list(_paths(models[0], models[1])) if models[0] != models[1] else []
            out.append("model identity changed" + (f" ({'; '.join(diffs)})" if diffs else ""))
        elif name == "chat":
            out.extend(_paths(a.get(name), b.get(name), "chat"))
        elif name == "judges":
            out.extend(_judge_changes("judge model", a.get(name), b.get(name)))
        else:
            out.append(_field_change(name, a.get(name), b.get(name)))
    if not out:  # a component newly called (or no longer) with nothing else changed: a re-registration
        out.extend(
            _component_calls(
                old.get("identity", {}).get("components") or {}, new.get("identity", {}).get("components") or {}
            )
        )
    return out


def _data_changes(old: Any, new: Any, task: Mapping[str, Any]) -> list[str]:
    """What changed in load_docs' data identity: the data files' bytes (a hash), and for an image
    task whose rows name files, each file by path (``{"data": hash, "image_files": {path: hash}}``)."""

    def parts(identity: Any) -> tuple[Any, Mapping[str, Any]]:
        if isinstance(identity, Mapping):
            return identity.get("data"), identity.get("image_files") or {}
        return identity, {}

    (data_a, files_a), (data_b, files_b) = parts(old), parts(new)
    out = []
    if data_a != data_b:
        split = task.get("test_split") or task.get("validation_split") or "evaluated"
        out.append(f"data file bytes changed ({split} split; data fingerprint {_short(data_a)} → {_short(data_b)})")
    return out + _entry_changes(
        files_a,
        files_b,
        lambda path, added: (
            f"image file {path} {'newly named by the data' if added else 'no longer named by the data'}"
        ),
        lambda path, _, b: f"image file {path} {'deleted' if b == '<missing>' else 'changed'}",
    )


def _judge_changes(what: str, old: Any, new: Any) -> list[str]:
    """``judge prompt changed (graded: prompt: 'Rate…' → 'Grade…')``, per judge metric: the judge
    stages' inputs are keyed per metric (judges: metric -> identity; prompts: a list of entries)."""

    def by_metric(value: Any) -> dict[str, Any]:
        if isinstance(value, Mapping):
            return dict(value)
        return {
            str(e.get("metric")): {k: v for k, v in e.items() if k != "metric"}
            for e in value or []
            if isinstance(e, Mapping)
        }

    return _entry_changes(
        by_metric(old),
        by_metric(new),
        lambda metric, added: f"judge metric {'+ ' if added else '- '}{metric}",
        lambda metric, a, b: f"{what} changed ({metric}: {'; '.join(_paths(a, b))})",
    )


def _entry_changes(
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    gone_or_new: Callable[[str, bool], str],
    changed: Callable[[str, Any, Any], str],
) -> list[str]:
    """One line per key, sorted, of an entry added or removed (``gone_or_new(key, added)``) or
    whose value differs (``changed(key, old value, new value)``): keyed identities (image files by
    path, judges by metric) name what changed by its key, not by a position in a list."""
    out = []
    for key in sorted(set(old) | set(new)):
        if key not in old or key not in new:
            out.append(gone_or_new(key, key in new))
        elif old[key] != new[key]:
            out.append(changed(key, old[key], new[key]))
    return out


def _code_change(old: Any, new: Any) -> str:
    """``stage code changed (evalflow.scoring.process)``: the modules of the stage whose files differ."""
    if not isinstance(old, Mapping) or not isinstance(new, Mapping):
        return "stage code changed (the earlier run recorded a code version number, not its modules)"
    changed = [m for m in sorted(set(old) | set(new)) if old.get(m) != new.get(m)]
    shown = ", ".join(changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
    return f"stage code changed ({shown})"


def _component_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """``metric 'x' code changed`` for each component called in both runs whose identity differs."""
    out = []
    for label in sorted(set(old) & set(new)):
        a, b = old[label], new[label]
        if a == b:
            continue
        if isinstance(a, str) and isinstance(b, str):
            out.append(f"{label} code changed")
        else:
            out.append(f"{label} registration changed ({'; '.join(_paths(a, b))})")
    return out


def _component_calls(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    added = [f"{label} now called" for label in sorted(set(new) - set(old))]
    return added + [f"{label} no longer called" for label in sorted(set(old) - set(new))]


def _field_change(name: str, old: Any, new: Any) -> str:
    if name == "metric_list":
        added_removed = _set_change(_names(old, "metric"), _names(new, "metric"))
        if added_removed != "reordered or changed" or len(old or []) != len(new or []):
            return f"metric_list: {added_removed}"
        # the same metrics: name the entry whose options changed (a reduction, an option)
        changed = [(a, b) for a, b in zip(old or [], new or []) if a != b]
        if changed and all(isinstance(e, Mapping) and "judge" in e for e in changed[0]):
            return f"judge metric {changed[0][1].get('metric')} changed ({'; '.join(_judge_paths(*changed[0]))})"
        return (
            f"metric_list: metric {changed[0][1].get('metric')} changed ({'; '.join(_paths(*changed[0]))})"
            if changed and all(isinstance(e, Mapping) for e in changed[0])
            else "metric_list reordered"
        )
    if name == "filter_list":
        added_removed = _set_change(_names(old, "name"), _names(new, "name"))
        if added_removed != "reordered or changed":
            return f"filter_list: {added_removed}"
        edited = [n for n in _names(new, "name") if _by_name(old, n) != _by_name(new, n)]
        if not edited:
            return "filter_list reordered"
        what = _paths(_by_name(old, edited[0]), _by_name(new, edited[0]))
        return f"filter_list: filter {', '.join(edited)} changed ({'; '.join(what)})"
    paths = list(_paths(old, new, name))
    return "; ".join(paths) if paths else f"{name} changed"


def _judge_paths(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """The differing leaves of two judge metric entries, an omitted key read as its default (the
    judge's own, :func:`evalflow.judges.judge_spec.with_defaults`); a default now given explicitly,
    which changes no value, is named as written."""
    from evalflow.judges.judge_spec import with_defaults

    def filled(entry: Mapping[str, Any]) -> dict[str, Any]:
        block = entry["judge"]
        return {**entry, "judge": with_defaults(block) if isinstance(block, Mapping) else block}

    paths = list(_paths(filled(old), filled(new)))
    if paths:
        return paths
    a, b = old["judge"], new["judge"]  # only a default written out or left out (both judge blocks, mappings)
    return [
        f"judge.{key}: the default, now {'written out' if key in b else 'left out'}"
        for key in sorted(set(a) | set(b))
        if a.get(key) != b.get(key)
    ]


def _names(items: Any, key: str) -> list[str]:
    return [str(item.get(key, "none")) for item in items or [] if isinstance(item, Mapping)]


def _by_name(items: Any, name: str) -> Any:
    return next((i for i in items or [] if isinstance(i, Mapping) and i.get("name", "none") == name), None)


def _set_change(old: list[str], new: list[str]) -> str:
    added = [f"+ {n}" for n in new if n not in old]
    removed = [f"- {n}" for n in old if n not in new]
    return ", ".join(added + removed) or "reordered or changed"


def _paths(old: Any, new: Any, prefix: str = "") -> Iterator[str]:
    """``path: old → new`` for each leaf that differs; long strings by their hashes."""
    if _is_summary(old) or _is_summary(new):
        yield f"{prefix} changed ({_short(old)} → {_short(new)})"
    elif isinstance(old, Mapping) and isinstance(new, Mapping):
        for key in sorted(set(old) | set(new)):
            if old.get(key) != new.get(key):
                yield from _paths(old.get(key), new.get(key), f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for i, (a, b) in enumerate(zip(old, new)):
            if a != b:
                yield from _paths(a, b, f"{prefix}.{i}" if prefix else str(i))
    elif isinstance(old, str) and isinstance(new, str):
        at = next((i for i, (a, b) in enumerate(zip(old, new)) if a != b), min(len(old), len(new)))
        start = max(0, at - 12) if max(len(old), len(new)) > 48 else 0
        lead = "…" if start else ""
        yield f"{prefix}: {_short(lead + old[start:])} → {_short(lead + new[start:])}"
    elif old != new:
        yield f"{prefix}: {_short(old)} → {_short(new)}"


def _is_summary(value: Any) -> bool:
    return isinstance(value, Mapping) and "xxh" in value


def _short(value: Any) -> str:
    if _is_summary(value):
        head = value.get("head") or value.get("function") or ""
        return f"{str(head)[:24]!r}… #{str(value['xxh'])[:8]}"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, (int, float)) else str(value)
    if isinstance(value, str) and len(value) == 32 and all(c in "0123456789abcdef" for c in value):
        return value[:8]  # a fingerprint
    return text if len(text) <= 48 else text[:45] + "…"
