"""Reading finished runs of either kind as one shape: evalflow run folders (results.json,
samples_<task>.jsonl, manifest.json) and lm-eval 0.4.x output folders (results_<date>.json,
samples_<task>_<date>.jsonl, possibly one folder down, under the model's name).

    run = load_run(Path("outputs/2026-11-30/12-00-00"))
    run.results["results"]["arc_easy"]["acc,none"], run.per_doc("arc_easy", "acc", "none")
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Iterator, Mapping

from evalflow.cache.fingerprint import fingerprint
from evalflow.errors import RunFolderError


@dataclass(frozen=True)
class Run:
    """One finished run: its results dict, its samples files, and (evalflow) its manifest."""

    folder: Path
    kind: str  # "evalflow" or "lm-eval"
    results: Mapping[str, Any]
    samples_files: Mapping[str, Path]  # task -> samples file
    manifest: Mapping[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return self.folder.name

    def tasks(self) -> list[str]:
        """Leaf tasks (those with samples or configs), in results order."""
        subtasks = self.results.get("group_subtasks", {})  # lm-eval lists leaf tasks too, with []
        groups = set(self.results.get("groups", {})) | {g for g, members in subtasks.items() if members}
        return [t for t in self.results.get("results", {}) if t not in groups]

    def groups(self) -> dict[str, list[str]]:
        """Each group's leaf tasks (nested groups flattened)."""
        subtasks: Mapping[str, list[str]] = self.results.get("group_subtasks", {})

        def leaves(name: str) -> list[str]:
            return [leaf for m in subtasks.get(name, []) for leaf in (leaves(m) if subtasks.get(m) else [m])]

        return {g: leaves(g) for g in subtasks if subtasks[g]}

    def data_fingerprint(self, task: str) -> str | None:
        return self.manifest.get("data", {}).get(task)

    def rows(self, task: str) -> list[dict[str, Any]]:
        return self._rows.get(task) or self._read(task)

    @cached_property
    def _rows(self) -> dict[str, list[dict[str, Any]]]:
        return {}

    def _read(self, task: str) -> list[dict[str, Any]]:
        path = self.samples_files.get(task)
        if path is None:
            raise RunFolderError(
                f"{self.folder}: no samples file for task '{task}'; per-document views and paired tests "
                "need samples (evalflow: log_samples=true, the default; lm-eval: --log_samples)"
            )
        rows = []
        with open(path, encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if line.strip():
                    try:
                        rows.append(json.loads(line))
                    except ValueError as exc:
                        raise RunFolderError(f"{path}, line {n}: not JSON ({exc}); is the file complete?") from None
        self._rows[task] = rows
        return rows

    def filters(self, task: str) -> list[str]:
        return list(dict.fromkeys(str(r.get("filter", "none")) for r in self.rows(task)))

    def per_doc(self, task: str, metric: str, filter_name: str) -> dict[int, Any]:
        """doc_id -> the document's value of ``metric`` under ``filter_name``."""
        return {int(r["doc_id"]): r[metric] for r in self.rows(task)
                if str(r.get("filter", "none")) == filter_name and metric in r}

    def doc_ids(self, task: str, filter_name: str) -> set[int]:
        """The documents scored under ``filter_name``, with or without a value of any one metric."""
        return {int(r["doc_id"]) for r in self.rows(task) if str(r.get("filter", "none")) == filter_name}

    @property
    def hashes_images(self) -> bool:
        """Whether its samples name images by pixel hash (evalflow's); lm-eval's show a PIL repr."""
        return self.kind == "evalflow"

    def doc_fingerprints(self, task: str, images: bool = True) -> dict[int, str]:
        """doc_id -> the identity of what the run read for the document: its row and (``images``)
        the pixel hashes of the images its requests showed. A row that names its image by file
        path stays the same when the file is edited; the hashes do not."""
        def identity(row: Mapping[str, Any]) -> str:
            digests = image_digests(row.get("arguments")) if images else []
            return fingerprint({"doc": row.get("doc"), "images": digests}) if digests else fingerprint(row.get("doc"))

        return {int(r["doc_id"]): identity(r) for r in self.rows(task)}


def image_digests(value: Any) -> list[str]:
    """The pixel hashes of the images (``{"__image__": digest, ...}``) in a samples value, in order."""
    if isinstance(value, Mapping):
        if "__image__" in value:
            return [str(value["__image__"])]
        return [d for v in value.values() for d in image_digests(v)]
    if isinstance(value, list):
        return [d for v in value for d in image_digests(v)]
    return []


def load_run(folder: Path) -> Run:
    """An evalflow run folder or an lm-eval output folder (or the results_*.json file itself)."""
    folder = Path(folder)
    if not folder.exists():
        raise RunFolderError(f"{folder}: no such folder; give the run folder a run wrote (its `run folder:` line)")
    if folder.is_file() and folder.name.startswith("results_"):
        return _lm_eval(folder)
    if (folder / "results.json").is_file():
        results = _json(folder / "results.json")
        manifest = _json(folder / "manifest.json") if (folder / "manifest.json").is_file() else {}
        files = {p.name[len("samples_"):-len(".jsonl")]: p for p in folder.glob("samples_*.jsonl")}
        return Run(folder, "evalflow", results, files, manifest)
    found = sorted(folder.rglob("results_*.json")) if folder.is_dir() else []
    if found:
        return _lm_eval(found[-1])  # the latest: lm-eval names them by date
    raise RunFolderError(
        f"{folder}: neither an evalflow run folder (results.json; a folder without it did not finish) "
        "nor an lm-eval output folder (results_<date>.json); give the folder a run wrote"
    )


def _lm_eval(results_file: Path) -> Run:
    date = results_file.stem[len("results_"):]
    results = _json(results_file)
    files = {}
    for path in results_file.parent.glob(f"samples_*_{date}.jsonl"):
        files[path.name[len("samples_"):-len(f"_{date}.jsonl")]] = path
    return Run(results_file.parent, "lm-eval", results, files)


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise RunFolderError(f"{path}: not valid JSON ({exc})") from None


def metric_keys(entry: Mapping[str, Any], with_null: bool = False) -> Iterator[tuple[str, str]]:
    """(metric, filter) of each value in a results entry (``"acc,none"``), stderr keys skipped;
    ``with_null``: also results reported without a value (a judge metric none of whose verdicts parsed)."""
    for key, value in entry.items():
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if "," in key and "_stderr," not in key and (number or (with_null and value is None)):
            metric, filt = key.split(",", 1)
            yield metric, filt
