"""Images through the DAG: keyed by their pixels, stored once, sent to the model as PIL images."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import images
from tests.support.models import CountingModel, VisionCountingModel
from tests.support.runs import Runner, stage_hits

VISION = "tests.support.models:VisionCountingModel"


@pytest.fixture
def vrunner(vqa_library: Path, tmp_path: Path) -> Runner:
    VisionCountingModel.reset()
    return Runner(vqa_library, tmp_path / "cache", tmp_path / "outputs")


def test_images_reach_the_model_and_a_second_run_is_fully_cached(vrunner: Runner) -> None:
    first, m1, folder = vrunner("toy_vqa", model=VISION)
    assert m1["inference"] == {"requests": 6, "computed": 6, "cached": 0}
    seen = VisionCountingModel.images_seen
    assert len(seen) == 6 and all(im.size == (32, 32) and im.mode == "RGB" for im in seen)
    assert [im.tobytes() for im in seen[:1]] != [im.tobytes() for im in seen[1:2]]  # each document's own pixels
    samples = (folder / "samples_toy_vqa.jsonl").read_text()
    assert "32x32:" in samples
    second, m2, _ = vrunner("toy_vqa", model=VISION)
    assert stage_hits(m2) == dict.fromkeys(stage_hits(m1), True)
    assert CountingModel.calls_total == 0 and second["results"] == first["results"]


def test_one_changed_image_reruns_exactly_its_document(vrunner: Runner, vqa_library: Path, tmp_path: Path) -> None:
    vrunner("toy_vqa", model=VISION)
    data = images.rows(6)
    data[3]["image"] = images.draw(9, "square", "blue")  # one document's image, nothing else
    images.write_parquet(data, tmp_path / "test.parquet")
    _, manifest, _ = vrunner("toy_vqa", model=VISION)
    assert not stage_hits(manifest)["load_docs"]  # the data's bytes changed
    assert manifest["inference"] == {"requests": 6, "computed": 1, "cached": 5}
    assert [r.args[0] for r in CountingModel.requests_seen] == ["<image>What colour is the shape? Answer:"]


def test_images_are_stored_once_and_requests_hold_references(vrunner: Runner, tmp_path: Path) -> None:
    from evalflow.cache.store import CacheStore
    from evalflow.core.records import ImageRef

    data = images.rows(6)
    data[4]["image"] = data[1]["image"].copy()  # the same pixels in two documents
    images.write_parquet(data, tmp_path / "test.parquet")
    vrunner("toy_vqa", model=VISION)
    store = CacheStore(tmp_path / "cache")
    try:
        keys = list(store.raw.iterkeys())
        image_keys = [k for k in keys if k.startswith("image:")]
        assert len(image_keys) == 5  # six documents, five distinct images
        instances = next(store.get(k) for k in keys if k.startswith("instances:"))
    finally:
        store.close()
    visuals = [inst.request.args[2]["visual"] for inst in instances]
    assert all(len(v) == 1 and isinstance(v[0], ImageRef) for v in visuals)
    assert visuals[1][0] == visuals[4][0] and len({v[0].digest for v in visuals}) == 5


def test_a_text_only_model_is_refused_before_any_call(vrunner: Runner) -> None:
    from evalflow.errors import ConfigError

    with pytest.raises(ConfigError) as err:
        vrunner("toy_vqa")  # the counting (text-only) model
    message = str(err.value)
    assert "toy_vqa" in message and "toy_vqa.yaml" in message
    assert "hf_multimodal" in message and "openai_chat" in message
    assert CountingModel.calls_total == 0


def test_image_log_likelihoods_are_refused_for_hf_multimodal_before_loading() -> None:
    from evalflow.errors import ConfigError
    from evalflow.models.hf.vlm.vlm import HFMultimodalModel
    from evalflow.models.modality import refuse_unanswerable
    from evalflow.taskspec.format.spec import TaskConfig

    mc = TaskConfig(task="vqa_mc", output_type="multiple_choice", doc_to_image="image", source="vqa_mc.yaml")
    with pytest.raises(ConfigError, match="vqa_mc.*loglikelihood requests with images"):
        refuse_unanswerable([mc], HFMultimodalModel, "hf_multimodal")
    text = TaskConfig(task="plain", output_type="multiple_choice")
    refuse_unanswerable([text], CountingModel, "counting")  # text tasks are never refused


def test_an_edited_image_file_reruns_exactly_its_document(tmp_path: Path) -> None:
    """Rows name their images by file path: the files' bytes key the data, so editing one file
    re-runs exactly that document's request, and editing an unrelated file re-runs nothing."""
    library, pictures = images.path_image_task(tmp_path)
    (tmp_path / "unrelated.png").write_bytes(b"not named by any row")
    VisionCountingModel.reset()
    run = Runner(library, tmp_path / "cache", tmp_path / "outputs")
    _, m1, _ = run("toy_paths", model=VISION)
    assert m1["inference"] == {"requests": 6, "computed": 6, "cached": 0}
    (tmp_path / "unrelated.png").write_bytes(b"changed, and still named by no row")
    _, m2, _ = run("toy_paths", model=VISION)
    assert all(stage_hits(m2).values()) and CountingModel.calls_total == 0
    images.draw(9, "square", "blue").save(pictures / "3.png")  # one document's image file, nothing else
    _, m3, _ = run("toy_paths", model=VISION)
    assert not stage_hits(m3)["load_docs"]
    assert m3["inference"] == {"requests": 6, "computed": 1, "cached": 5}
    assert [im.tobytes() for im in VisionCountingModel.images_seen[-1:]] == [images.draw(9, "square", "blue").tobytes()]
