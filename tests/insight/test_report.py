"""`report`: one self-contained HTML page, loaded in a real headless browser (Debian's chromium):
no console errors with the network cut off, every chart drawn as SVG marks, a screenshot that
shows the results table, a task's documents decoded by the page's own script when opened; the
grouped paired table, sweep runs named by every varying setting, and what the page leaves out."""

from __future__ import annotations

import base64
import gzip
import json
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from evalflow.commands.report import main
from evalflow.insight.report_build import (
    build_report,
    document_view,
    expand,
    run_labels,
    shortest_tails,
    varying_setting,
    varying_settings,
)
from evalflow.insight.report_charts import charts
from evalflow.insight.report_tables import result_sections
from tests.support.browser import browse
from tests.support.runs import Runner

HEADER_RGB = (0x1F, 0x4E, 0x79)  # the results table's header colour (report_page.py)


@pytest.fixture
def sweep(runner: Runner, tmp_path: Path) -> Path:
    """A multirun-shaped folder: jobs 0 and 1 with their Hydra overrides (num_fewshot=0,1)."""
    folder = tmp_path / "multirun"
    for job, shots in enumerate((0, 1)):
        _, _, run = runner(limit=10, num_fewshot=shots, bootstrap_iters=100)
        shutil.copytree(run, folder / str(job))
        (folder / str(job) / ".hydra").mkdir()
        (folder / str(job) / ".hydra" / "overrides.yaml").write_text(f"- task=toy_mc\n- num_fewshot={shots}\n")
    return folder


def test_page_in_a_real_browser(sweep: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    assert main([str(sweep), f"out={out}"]) == 0
    html = out.read_text()
    assert not re.search(r"""<(script|link|img)[^>]+(src|href)=["']?https?:""", html)  # nothing fetched
    loaded = browse(out, "--dump-dom")
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    console = [line for line in loaded.stderr.splitlines() if ":CONSOLE" in line]
    assert console == []
    dom = loaded.stdout
    charts = re.findall(r'<div class="chart[^"]*" id="(chart\d+)"(.*?)</svg>', dom, flags=re.S)
    assert [c[0] for c in charts] == ["chart0", "chart1", "chart2"]  # bars, sweep line, paired differences
    for _, svg in charts:
        assert "<svg" in svg and re.search(r'class="mark-(rect|line|symbol|rule)', svg)
    assert "Metrics along the sweep of num_fewshot" in dom and "num_fewshot=1" in dom

    shot = tmp_path / "shot.png"
    taken = browse(out, f"--screenshot={shot}", "--window-size=1200,900")
    assert taken.returncode == 0 and shot.is_file()
    from PIL import Image

    image = Image.open(shot).convert("RGB")
    colours = image.getcolors(maxcolors=1 << 24) or []
    header = sum(n for n, rgb in colours if all(abs(a - b) <= 6 for a, b in zip(rgb, HEADER_RGB)))
    assert header > 2000  # the results tables' header rows are on screen


def test_sweep_setting_and_disagreements(sweep: Path) -> None:
    runs = expand([sweep])
    assert varying_setting(runs) == ("num_fewshot", [0, 1])
    (view,) = document_view(runs, ["a", "b"])
    rows = [
        [json.loads(line) for line in (sweep / job / "samples_toy_mc.jsonl").read_text().splitlines()]
        for job in ("0", "1")
    ]
    expected = {a["doc_id"] for a, b in zip(*rows) if a["acc"] != b["acc"]}
    assert {d["doc_id"] for d in view["docs"] if d["disagree"]} == expected
    assert all(d["runs"][0]["scores"].startswith("acc=") for d in view["docs"])


def test_lm_eval_and_evalflow_runs_together(tmp_path: Path) -> None:
    from evalflow.run.rescoring import rescore

    lm_eval = Path(__file__).parent / "fixtures" / "lm_eval_arc_easy"
    (samples,) = lm_eval.rglob("samples_arc_easy_*.jsonl")
    rescore([samples], ["task=arc_easy", f"cache_dir={tmp_path / 'cache'}"], tmp_path / "rescored")
    runs = expand([lm_eval, tmp_path / "rescored"])
    assert [r.kind for r in runs] == ["lm-eval", "evalflow"] and varying_setting(runs) == (None, [])
    html = build_report([lm_eval, tmp_path / "rescored"])
    assert "Paired comparison" in html and "sweep" not in html
    assert html.count('class="results"') == 1  # one table (arc_easy is in no group), A and B side by side


def test_single_run_and_escaping(runner: Runner, toy_library: Path, tmp_path: Path) -> None:
    data = toy_library.parent / "data" / "test.jsonl"
    data.write_text(data.read_text().replace("What is 1 plus 2?", "What is <script>alert(1)</script>?"))
    _, _, run = runner(limit=3)
    html = build_report([run])
    assert "alert(1)" not in html  # the prompts are only in the task's compressed blob
    # one chart at most: the bars (here every bar is 0 on 3 documents, so the title says so instead)
    assert "Paired comparison" not in html and 'id="chart1"' not in html
    assert 'id="chart0"' in html or "all values 0 (acc,none)" in html
    blob = re.search(r'<script type="application/gzip\+base64" id="blob0">([^<]*)</script>', html)
    assert blob is not None
    docs = json.loads(gzip.decompress(base64.b64decode(blob.group(1))))["docs"]
    assert [d["doc_id"] for d in docs] == [0, 1, 2] and "<script>alert(1)</script>" in docs[0]["prompt"]
    out = tmp_path / "single.html"
    out.write_text(html)
    loaded = browse(out, "--dump-dom", fragment="docs-toy_mc")
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    assert "<pre>Question: What is &lt;script&gt;alert(1)&lt;/script&gt;?" in loaded.stdout  # text, not markup


class Rows(HTMLParser):
    """Each table row of a page: (inside a folded <details>?, the row's class, its cells' text)."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[tuple[bool, str, list[str]]] = []
        self.folded = 0
        self.cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "details":
            self.folded += 1
        elif tag == "tr":
            self.rows.append((self.folded > 0, dict(attrs).get("class") or "", []))
        elif tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "details":
            self.folded -= 1
        elif tag in ("td", "th") and self.cell is not None and self.rows:
            self.rows[-1][2].append("".join(self.cell).strip())
            self.cell = None

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell.append(data)


def parse_rows(html: str) -> list[tuple[bool, str, list[str]]]:
    parser = Rows()
    parser.feed(html)
    return parser.rows


@pytest.fixture
def group_pair(runner: Runner, toy_library: Path, tmp_path: Path) -> tuple[Path, Path]:
    """A toy_group run (toy_mc + toy_gen, 10 documents each) and a copy of it in which every toy_mc
    document is answered right: its toy_mc and group acc differ from A's with a tiny p."""
    (toy_library / "toy_group.yaml").write_text(
        "group: toy_group\ntask:\n  - toy_mc\n  - toy_gen\naggregate_metric_list:\n  - metric: acc\n"
        "metadata:\n  version: 1\n"
    )
    _, _, a = runner("toy_group", limit=10)
    b = tmp_path / "all_right"
    shutil.copytree(a, b)
    samples = b / "samples_toy_mc.jsonl"
    rows = [{**json.loads(line), "acc": 1.0} for line in samples.read_text().splitlines()]
    samples.write_text("".join(json.dumps(r) + "\n" for r in rows))
    results = json.loads((b / "results.json").read_text())
    for name in ("toy_mc", "toy_group"):
        results["results"][name]["acc,none"] = 1.0
    (b / "results.json").write_text(json.dumps(results))
    return a, b


def test_grouped_comparison_table(group_pair: tuple[Path, Path]) -> None:
    a, b = group_pair
    runs = expand([a, b])
    sections = result_sections(runs, ["A", "B"], [])
    assert [(s.title, [ln.task for ln in s.head], [ln.task for ln in s.folded]) for s in sections] == [
        ("toy_group", ["toy_group"], ["toy_mc", "toy_gen"])
    ]
    rows = parse_rows(build_report([a, b]))
    header = next(cells for _, _, cells in rows if cells[:3] == ["Task", "Filter", "Metric"])
    assert header == [
        "Task",
        "Filter",
        "Metric",
        f"A: {a.name}",
        f"B: {b.name}",
        "B − A",
        "95% CI",
        "p",
        "Test",
        "Docs",
        "Detectable",
    ]  # compare()'s smallest difference the paired documents can show
    table = {(cells[0], cells[2]): (folded, cls, cells) for folded, cls, cells in rows if len(cells) == len(header)}
    folded, cls, mc = table[("toy_mc", "acc ↑")]
    a_acc = float(mc[3].split(" ± ")[0])
    assert folded and mc[4].startswith("1.0000") and mc[5] == f"{1 - a_acc:+.4f}"
    assert mc[6].startswith("[+") and mc[7].endswith(" *") and float(mc[7][:-2]) < 0.05 and mc[8] == "mcnemar"
    assert cls == "significant better" and 0 < float(mc[10]) < 1
    folded, cls, gen = table[("toy_gen", "exact_match ↑")]  # the same answers in both runs
    assert folded and cls == "" and gen[5] == "+0.0000" and gen[7] == "1"
    folded, cls, group = table[("toy_group (group)", "acc ↑")]
    assert not folded and cls == "significant better" and group[9] == "10"
    assert "2 subtasks, 1 row(s) marked *" in build_report([a, b])


def test_documents_decoded_on_demand_in_a_real_browser(group_pair: tuple[Path, Path], tmp_path: Path) -> None:
    a, b = group_pair
    out = tmp_path / "pair.html"
    assert main([str(a), str(b), f"out={out}"]) == 0
    html = out.read_text()
    assert 'class="docs"' not in html and html.count('type="application/gzip+base64"') == 2  # nothing rendered yet
    loaded = browse(out, "--dump-dom", fragment="docs-toy_mc")  # the link to a task opens it
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    assert [line for line in loaded.stderr.splitlines() if ":CONSOLE" in line] == []
    shown = [(cls, cells) for _, cls, cells in parse_rows(loaded.stdout) if cls in ("agree", "disagree")]
    samples = {int(r["doc_id"]): r for r in map(json.loads, (a / "samples_toy_mc.jsonl").read_text().splitlines())}
    assert [int(cells[0]) for _, cells in shown] == sorted(samples)  # toy_mc's rows, toy_gen still closed
    for cls, cells in shown:
        doc = samples[int(cells[0])]
        assert cells[1] == doc["arguments"]["gen_args_0"]["arg_0"] and cells[2] == str(doc["target"])
        assert cells[5] == f"acc={doc['acc']:.4g}" and cells[8] == "acc=1"
        assert cls == ("agree" if doc["acc"] == 1 else "disagree")


def sweep_cli(tmp_path: Path, toy_library: Path, *overrides: str) -> Path:
    """A sweep as a user starts it: ``python -m evalflow -m ...`` over the toy tasks, dummy model."""
    folder = tmp_path / "sweep"
    command = [
        sys.executable,
        "-m",
        "evalflow",
        "-m",
        "model=dummy",
        "limit=5",
        "bootstrap_iters=0",
        f"include_path=[{toy_library}]",
        f"cache_dir={tmp_path / 'cache'}",
        f"hydra.sweep.dir={folder}",
        *overrides,
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    return folder


def test_sweep_runs_named_by_every_setting_one_line_each(tmp_path: Path, toy_library: Path) -> None:
    runs = expand([sweep_cli(tmp_path, toy_library, "task=toy_mc", "model.salt=a,b", "num_fewshot=0,1")])
    varying = varying_settings(runs)
    assert varying == {"model.salt": ["a", "a", "b", "b"], "num_fewshot": [0, 1, 0, 1]}
    labels = run_labels(runs, varying)
    assert labels == [
        "model.salt=a num_fewshot=0",
        "model.salt=a num_fewshot=1",
        "model.salt=b num_fewshot=0",
        "model.salt=b num_fewshot=1",
    ]
    axis, _ = varying_setting(runs)
    assert axis == "num_fewshot"
    specs = dict(charts(runs, labels, varying, axis, []))
    line = specs["Metrics along the sweep of num_fewshot, one line per model.salt"]
    points: dict[str, list[tuple[str, int]]] = {}
    for row in line["data"]["values"]:
        points.setdefault(row["series"], []).append((row["run"].split()[0], row["num_fewshot"]))
    assert points == {
        "toy_mc acc,none model.salt=a": [("model.salt=a", 0), ("model.salt=a", 1)],
        "toy_mc acc,none model.salt=b": [("model.salt=b", 0), ("model.salt=b", 1)],
    }


def test_task_by_shot_sweep_says_what_it_leaves_out(tmp_path: Path, toy_library: Path) -> None:
    folder = sweep_cli(tmp_path, toy_library, "task=toy_mc,toy_gen", "num_fewshot=0,1")
    html = build_report([folder], max_docs=3)
    mc, gen = (
        "task=toy_mc num_fewshot=0, task=toy_mc num_fewshot=1",
        "task=toy_gen num_fewshot=0, task=toy_gen num_fewshot=1",
    )
    assert f"toy_mc is only in {mc} (— in the other runs" in html and f"toy_gen is only in {gen} (—" in html
    assert f"toy_gen is only in {gen}: its documents show those runs" in html
    assert "toy_mc: the first 3 of 5 documents are embedded" in html
    views = document_view(expand([folder]), run_labels(expand([folder]), varying_settings(expand([folder]))), 3)
    assert [(v["task"], v["runs"], len(v["docs"])) for v in views] == [("toy_mc", [0, 1], 3), ("toy_gen", [2, 3], 3)]
    values = {tuple(cells[3:7]) for _, _, cells in parse_rows(html) if cells and cells[0] == "toy_gen"}
    assert values and all(v[0] == v[1] == "—" and v[2] != "—" for v in values)  # toy_gen only in runs 3, 4


def test_docs_option_is_checked(tmp_path: Path) -> None:
    from evalflow.errors import ConfigError

    with pytest.raises(ConfigError, match=r"docs=some: docs takes a whole number of documents embedded per task"):
        main([str(tmp_path), "docs=some"])
    with pytest.raises(
        ConfigError,
        match=r"unknown option 'limit='\. usage: python -m evalflow report RUN\.\.\. "
        r"\[out=\.\.\.\] \[docs=\.\.\.\]",
    ):
        main([str(tmp_path), "limit=3"])


def _with_overrides(runner: Runner, tmp_path: Path, name: str, overrides: list[str], config: str = "") -> Path:
    """A run folder as the command line leaves it: its overrides (and, given, its composed config)."""
    _, _, run = runner(limit=5)
    folder = tmp_path / name
    shutil.copytree(run, folder)
    (folder / ".hydra").mkdir()
    (folder / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
    if config:
        (folder / ".hydra" / "config.yaml").write_text(config)
    return folder


def test_runs_are_not_named_by_settings_that_cannot_change_results(runner: Runner, tmp_path: Path) -> None:
    """explain, batch_size, workers... (the schema's inert settings) and Hydra's own keys differ
    between these runs, and nothing else: the runs are named by their folders."""
    a = _with_overrides(runner, tmp_path, "a", ["task=toy_mc"])
    b = _with_overrides(
        runner,
        tmp_path,
        "b",
        [
            "task=toy_mc",
            "explain=true",
            "batch_size=8",
            "workers=2",
            "chunk_size=3",
            "hydra/callbacks=wandb",
            "hydra.job.chdir=true",
        ],
    )
    runs = expand([a, b])
    assert varying_settings(runs) == {}
    assert run_labels(runs, {}) == ["a", "b"]


def test_a_setting_one_run_left_unset_reads_as_its_value(runner: Runner, tmp_path: Path) -> None:
    """Unset on a command line: as B's composed config has it (model.salt), else the schema's default
    (seed) or, for a key the schema does not declare either, "unset" (C: no config.yaml)."""
    a = _with_overrides(runner, tmp_path, "a", ["seed=7", "model.salt=x"])
    b = _with_overrides(runner, tmp_path, "b", [], config="model:\n  type: dummy\n  salt: y\nseed: 1234\n")
    c = _with_overrides(runner, tmp_path, "c", [])
    varying = varying_settings(expand([a, b, c]))
    assert varying == {"seed": [7, 1234, 1234], "model.salt": ["x", "y", "unset"]}
    assert run_labels(expand([a, b]), varying_settings(expand([a, b]))) == [
        "seed=7 model.salt=x",
        "seed=1234 model.salt=y",
    ]


def test_runs_differing_by_a_path_are_named_by_its_shortest_distinguishing_tail(runner: Runner, tmp_path: Path) -> None:
    """Regression: runs were labelled `model.pretrained=/tmp/…/tiny-vlm`, the whole path; now by the
    fewest trailing components that tell them apart, the full path beside the run's folder."""
    a = _with_overrides(runner, tmp_path, "a", ["model.pretrained=/tmp/pytest-1/x/tiny-vlm"])
    b = _with_overrides(runner, tmp_path, "b", ["model.pretrained=/tmp/pytest-1/y/tiny-vlm"])
    c = _with_overrides(runner, tmp_path, "c", ["model.pretrained=/tmp/pytest-1/y/other"])
    runs = expand([a, b, c])
    assert run_labels(runs, varying_settings(runs)) == [
        "model.pretrained=x/tiny-vlm",
        "model.pretrained=y/tiny-vlm",
        "model.pretrained=other",
    ]
    assert run_labels(expand([a, c]), varying_settings(expand([a, c]))) == [
        "model.pretrained=tiny-vlm",
        "model.pretrained=other",
    ]
    html = build_report([a, c])
    assert "<b>model.pretrained=tiny-vlm</b>: " in html and "model.pretrained=/tmp/pytest-1/x/tiny-vlm)" in html
    assert (
        shortest_tails(["a", "b"]) == ["a", "b"]
        and shortest_tails(["/m/", "/n/m"]) == ["/m/", "n/m"]
        and shortest_tails(["/a", "/a"]) == ["a", "a"]
    )


def test_an_all_zero_bar_chart_says_so_instead_of_an_empty_box(runner: Runner, tmp_path: Path) -> None:
    """Regression: a metric whose every bar is 0 (a random tiny model) drew an empty box; now the
    chart's title says "all values 0" and no chart is drawn when nothing else is left."""
    _, _, run = runner(limit=5)
    zero = tmp_path / "zero"
    shutil.copytree(run, zero)
    results = json.loads((zero / "results.json").read_text())
    for key in [k for k in results["results"]["toy_mc"] if k.startswith("acc")]:
        results["results"]["toy_mc"][key] = 0.0
    (zero / "results.json").write_text(json.dumps(results))
    runs = expand([zero])
    specs = charts(runs, ["zero"], {}, None, [])
    assert [(title, spec) for title, spec in specs] == [("Each metric across runs: all values 0 (acc,none)", None)]
    html = build_report([zero])
    assert "<h2>Each metric across runs: all values 0 (acc,none)</h2>" in html and 'id="chart0"' not in html
    both = dict(charts(expand([run, zero]), ["run", "zero"], {}, None, []))
    assert list(both) == ["Each metric with its stderr, across runs"]  # one non-zero bar: drawn
