"""`report`: one self-contained HTML page, loaded in a real headless browser (Debian's chromium):
no console errors with the network cut off, every chart drawn as SVG marks, and a screenshot that
shows the results table."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from evalflow.insight.report import build_report, document_view, expand, main, varying_setting
from tests.conftest import Runner

HEADER_RGB = (0x1F, 0x4E, 0x79)  # the results table's header colour (report_page.py)


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("chromium is not installed here (apt-get install chromium; .ci/run installs it)")
    return found


def browse(html: Path, *args: str) -> subprocess.CompletedProcess:
    """Chromium headless on the file, with every network request sent to a closed port."""
    return subprocess.run(
        [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--enable-logging=stderr",
         "--v=0", "--proxy-server=127.0.0.1:9", "--virtual-time-budget=20000", *args, html.as_uri()],
        capture_output=True, text=True, timeout=180,
    )


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
    rows = [[json.loads(line) for line in (sweep / job / "samples_toy_mc.jsonl").read_text().splitlines()]
            for job in ("0", "1")]
    expected = {a["doc_id"] for a, b in zip(*rows) if a["acc"] != b["acc"]}
    assert {d["doc_id"] for d in view["docs"] if d["disagree"]} == expected
    assert all(d["runs"][0]["scores"].startswith("acc=") for d in view["docs"])


def test_lm_eval_and_evalflow_runs_together(tmp_path: Path) -> None:
    from evalflow.insight.rescore import rescore

    lm_eval = Path(__file__).parent / "fixtures" / "lm_eval_arc_easy"
    (samples,) = lm_eval.rglob("samples_arc_easy_*.jsonl")
    rescore([samples], ["task=arc_easy", f"cache_dir={tmp_path / 'cache'}"], tmp_path / "rescored")
    runs = expand([lm_eval, tmp_path / "rescored"])
    assert [r.kind for r in runs] == ["lm-eval", "evalflow"] and varying_setting(runs) == (None, [])
    html = build_report([lm_eval, tmp_path / "rescored"])
    assert "Paired comparison" in html and "sweep" not in html and html.count('class="results"') == 2


def test_single_run_and_escaping(runner: Runner, toy_library: Path) -> None:
    data = toy_library.parent / "data" / "test.jsonl"
    data.write_text(data.read_text().replace("What is 1 plus 2?", "What is <script>alert(1)</script>?"))
    _, _, run = runner(limit=3)
    html = build_report([run])
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "Paired comparison" not in html and 'id="chart0"' in html and 'id="chart1"' not in html
