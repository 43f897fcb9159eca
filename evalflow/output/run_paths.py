"""Every file name and path of a run folder, evalflow's and lm-eval's, spelled here and nowhere else.

evalflow's run folder (written by :mod:`evalflow.output.run_folder`)::

    <folder>/results.json                 written last: its presence means the run finished
    <folder>/manifest.json                what ran and why (explain, compare)
    <folder>/samples_<task>.jsonl         per-document records (log_samples=true)
    <folder>/.hydra/config.yaml           the snapshot: the composed config that reproduces the run
    <folder>/.hydra/overrides.yaml        (and Hydra's hydra.yaml, for a command-line run)
    <folder>/events.jsonl                 the run's progress while it runs: start, progress, end (output/events.py)
    <folder>/gate.json                    a sequential gate's record: order seed, rounds, verdict
    <folder>/.gate_rounds/<k>/            the gate's round runs while it runs (the last becomes <folder>)
    <sweep>/multirun.yaml                 Hydra's record of a multirun sweep, beside its job folders <sweep>/<n>/

The run's log beside them is named by Hydra from the job's name (``hydra.job.name`` in
conf/config.yaml: ``cli.log``); evalflow never opens it by name. lm-eval 0.4.x's output folder
(``loggers/evaluation_tracker.py``; written by :mod:`evalflow.lmeval_compat.layout`, read back as
one shape with evalflow's by :func:`evalflow.output.run_folder.load_run`)::

    <output_path>/<model_name_sanitized>/results_<date>.json
    <output_path>/<model_name_sanitized>/samples_<task>_<date>.jsonl

or, when ``output_path`` ends in ``.json``, ``<stem>_<date>.json`` beside it and the samples in its
folder; ``<date>`` is ``datetime.now().isoformat()`` with ``-`` for ``:``.
``tests/output/test_run_folder_names.py`` fails when another module spells one of these names.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

RESULTS = "results.json"
MANIFEST = "manifest.json"
SNAPSHOT = ".hydra"  # Hydra's folder name (hydra.output_subdir); evaluate() writes the same files
SNAPSHOT_CONFIG = "config.yaml"
SNAPSHOT_OVERRIDES = "overrides.yaml"
SNAPSHOT_HYDRA = "hydra.yaml"  # Hydra's own settings; a run started from Python has none

_SAMPLES, _JSONL = "samples_", ".jsonl"
SAMPLES_GLOB = f"{_SAMPLES}*{_JSONL}"
_LMEVAL_RESULTS, _JSON = "results_", ".json"


EVENTS = "events.jsonl"  # written from a run's start: a folder with it and no results.json is running or failed
GATE_RECORD = "gate.json"
_GATE_ROUNDS = ".gate_rounds"


def gate_record_file(folder: Path) -> Path:
    """The sequential gate's record in the candidate's run folder (``python -m evalflow gate``)."""
    return Path(folder) / GATE_RECORD


def gate_rounds_dir(folder: Path) -> Path:
    """Where the gate's round runs are written while it runs; removed when it ends."""
    return Path(folder) / _GATE_ROUNDS


def events_file(folder: Path) -> Path:
    """The run's progress events (JSON lines), appended while it runs (:mod:`evalflow.output.events`)."""
    return Path(folder) / EVENTS


def results_file(folder: Path) -> Path:
    return Path(folder) / RESULTS


def manifest_file(folder: Path) -> Path:
    return Path(folder) / MANIFEST


def samples_name(task: str) -> str:
    """The file name of a task's per-document records in an evalflow run folder."""
    return f"{_SAMPLES}{task}{_JSONL}"


def samples_file(folder: Path, task: str) -> Path:
    return Path(folder) / samples_name(task)


def samples_files(folder: Path) -> dict[str, Path]:
    """task -> samples file, of the samples files in an evalflow run folder."""
    return {p.name[len(_SAMPLES) : -len(_JSONL)]: p for p in Path(folder).glob(SAMPLES_GLOB)}


def samples_stem(path: Path) -> str:
    """What a samples file's name holds between ``samples_`` and its extension: ``<task>``
    (evalflow's) or ``<task>_<date>`` (lm-eval's); ``""`` for a file not named as samples."""
    name = Path(path).name
    return name[len(_SAMPLES) :].rsplit(".", 1)[0] if name.startswith(_SAMPLES) else ""


SWEEP_RECORD = "multirun.yaml"  # Hydra writes it into a multirun sweep's folder, above the job folders


def sweep_record_file(sweep: Path) -> Path:
    """Hydra's record of the multirun sweep whose job folders lie in ``sweep``."""
    return Path(sweep) / SWEEP_RECORD


def snapshot_dir(folder: Path) -> Path:
    return Path(folder) / SNAPSHOT


def snapshot_config(folder: Path) -> Path:
    """The composed config a run used: ``--config-dir FOLDER/.hydra --config-name config`` reruns it."""
    return snapshot_dir(folder) / SNAPSHOT_CONFIG


def snapshot_overrides(folder: Path) -> Path:
    return snapshot_dir(folder) / SNAPSHOT_OVERRIDES


def snapshot_hydra(folder: Path) -> Path:
    return snapshot_dir(folder) / SNAPSHOT_HYDRA


# --- lm-eval's layout --------------------------------------------------------------------------

LMEVAL_RESULTS_GLOB = f"{_LMEVAL_RESULTS}*{_JSON}"


def lmeval_date_id(now: datetime) -> str:
    """lm-eval's ``<date>`` in its file names: the ISO time with ``-`` for ``:``."""
    return now.isoformat().replace(":", "-")


def lmeval_results_name(date_id: str) -> str:
    return f"{_LMEVAL_RESULTS}{date_id}{_JSON}"


def lmeval_samples_name(task: str, date_id: str) -> str:
    return f"{_SAMPLES}{task}_{date_id}{_JSONL}"


def is_lmeval_results(path: Path) -> bool:
    """Whether ``path`` is named as lm-eval's results file (``results_<date>.json``)."""
    return Path(path).name.startswith(_LMEVAL_RESULTS)


def lmeval_output_files(output_path: Path, model_folder: str, date_id: str) -> tuple[Path, Path]:
    """(the results file, the folder of the samples files) lm-eval writes for ``--output_path``:
    under ``<output_path>/<model_folder>/``, or beside ``output_path`` when it names a ``.json`` file."""
    output_path = Path(output_path)
    if output_path.suffix == _JSON:
        return output_path.with_name(f"{output_path.stem}_{date_id}{_JSON}"), output_path.parent
    folder = output_path / model_folder
    return folder / lmeval_results_name(date_id), folder


def lmeval_samples_files(results: Path) -> dict[str, Path]:
    """task -> samples file, of the samples files lm-eval wrote beside its results file ``results``."""
    date_id = Path(results).stem[len(_LMEVAL_RESULTS) :]
    tail = f"_{date_id}{_JSONL}"
    return {p.name[len(_SAMPLES) : -len(tail)]: p for p in Path(results).parent.glob(f"{_SAMPLES}*{tail}")}


# The layouts as messages spell them.
SAMPLES_PATTERN = samples_name("<task>")
LMEVAL_RESULTS_PATTERN = lmeval_results_name("<date>")
LMEVAL_SAMPLES_PATTERN = lmeval_samples_name("<task>", "<date>")
