"""The README's offline vision recipe, end to end: ``make-tiny-vlm DIR`` builds a tiny random LLaVA
(no download: a byte-level tokenizer built in), and ``model=hf_multimodal model.pretrained=DIR
task=shapes_vqa`` runs the built-in image task on it (pictures drawn from its rows with Pillow)."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest

from evalflow.commands import make_tiny_vlm
from evalflow.errors import ConfigError, TaskError
from evalflow.models.hf import device
from evalflow.models.hf.vlm import tiny_vlm
from tests.support.paths import ROOT
from tests.support.runs import stage_hits


def test_make_tiny_vlm_then_run_shapes_vqa(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from evalflow.config.compose import compose_settings
    from evalflow.run.phases import run

    folder = tmp_path / "tiny-vlm"
    warned: list[logging.LogRecord] = []
    catch = logging.Handler(logging.WARNING)
    catch.emit = warned.append  # type: ignore[method-assign]
    logging.getLogger("transformers").addHandler(catch)
    try:
        assert make_tiny_vlm.main([str(folder)]) == 0
    finally:
        logging.getLogger("transformers").removeHandler(catch)
    assert not [r.getMessage() for r in warned if "torchvision" in r.getMessage()]  # Pillow's processor, built directly
    printed = capsys.readouterr().out
    assert f"model=hf_multimodal model.pretrained={folder} task=shapes_vqa" in printed
    assert (folder / "config.json").is_file() and (folder / "tokenizer.json").is_file()

    def once(name: str) -> tuple[dict, dict, Path]:
        settings = compose_settings(
            task="shapes_vqa",
            preset="hf_multimodal",
            overrides=[f"model.pretrained={folder}"],
            values={"cache_dir": str(tmp_path / "cache"), "limit": 3, "bootstrap_iters": 0},
        )
        results = run(settings, tmp_path / name)
        return results, json.loads((tmp_path / name / "manifest.json").read_text()), tmp_path / name

    results, manifest, out = once("run1")
    where = device.resolve("auto", device.seen()).used  # the preset's model.device=auto, on this machine
    assert manifest["inference"] == {"requests": 3, "computed": 3, "cached": 0, "model": {"device": where}}
    assert 0.0 <= results["results"]["shapes_vqa"]["exact_match,first-word"] <= 1.0
    rows = [json.loads(line) for line in (out / "samples_shapes_vqa.jsonl").read_text().splitlines()]
    visual = rows[0]["arguments"]["gen_args_0"]["arg_2"]["visual"]
    assert [(v["width"], v["height"], v["mode"]) for v in visual] == [(64, 64, "RGB")]
    assert rows[0]["arguments"]["gen_args_0"]["arg_0"] == "<image>What colour is the shape? Answer in one word:"
    again, manifest2, _ = once("run2")
    assert all(stage_hits(manifest2).values()) and again["results"] == results["results"]


def test_the_pictures_are_drawn_the_same_every_time() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("shapes_images_test", ROOT / "tasks" / "vision" / "shapes_images.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    first = module.doc_to_image({"digit": "8", "shape": "triangle", "colour": "yellow"})[0]
    assert first.tobytes() == module.draw(8, "triangle", "yellow").tobytes()
    assert first.tobytes() != module.draw(3, "triangle", "yellow").tobytes()  # the digit is in the pixels
    assert first.getpixel((32, 50)) == module.COLOURS["yellow"]  # inside the triangle, below the digit


def test_without_pillow_the_extra_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from evalflow.taskspec.format.installed import code_fingerprint
    from evalflow.taskspec.format.spec import FunctionRef
    from evalflow.taskspec.format.taskcode import resolve_function

    monkeypatch.setattr(tiny_vlm.importlib.util, "find_spec", lambda name, *a: None)
    with pytest.raises(ConfigError, match=r"needs Pillow.*evalflow's vision extra.*\[vision\]"):
        tiny_vlm.require_pillow("make-tiny-vlm")
    monkeypatch.undo()
    copy = tmp_path / "shapes_images.py"  # a fresh path: not the module another test imported
    shutil.copy(ROOT / "tasks" / "vision" / "shapes_images.py", copy)
    monkeypatch.setitem(__import__("sys").modules, "PIL", None)  # `from PIL import ...` fails as if missing
    with pytest.raises(TaskError, match=r"'PIL'.*evalflow\[vision\]"):
        resolve_function(FunctionRef(str(copy), "doc_to_image", code_fingerprint(str(copy))))


def test_a_text_model_refused_by_the_preset_name_typed(tmp_path: Path) -> None:
    """``model=smollm2 task=shapes_vqa`` names smollm2 (the preset typed), not its type hf."""
    from evalflow.config.compose import typed_preset
    from evalflow.run.phases import evaluate

    with pytest.raises(ConfigError, match="model 'smollm2' takes text only"):
        evaluate(task="shapes_vqa", model="smollm2", cache_dir=str(tmp_path / "cache"))
    assert typed_preset(["model=smollm2", "task=shapes_vqa"]) == "smollm2"
    assert typed_preset(["model=smollm2", "model.type=pkg.mod:Class"]) is None  # no longer that preset's model
    assert typed_preset(["task=shapes_vqa"]) is None
