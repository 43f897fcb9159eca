"""hf-multimodal runs write lm-eval's hf fields (HFMultimodalLM is an HFLM): the processor's
tokenizer tokens, eot_token_id, max_length and the model fields of ``get_model_info``."""

from __future__ import annotations

from pathlib import Path

from evalflow.output.model_info import lm_eval_fields


def test_hf_multimodal_writes_the_tokenizer_and_model_fields(tiny_vlm_dir: Path) -> None:
    from lm_eval.models.utils import configure_pad_token
    from transformers import AutoProcessor

    tok = configure_pad_token(AutoProcessor.from_pretrained(str(tiny_vlm_dir)).tokenizer)
    top, config = lm_eval_fields({"type": "hf_multimodal", "pretrained": str(tiny_vlm_dir), "dtype": "float32"})
    assert top["tokenizer_eos_token"] == [tok.eos_token, str(tok.eos_token_id)]
    assert top["tokenizer_pad_token"] == [tok.pad_token, str(tok.pad_token_id)]
    assert top["eot_token_id"] == tok.eos_token_id and isinstance(top["max_length"], int)
    assert set(config) == {"model_num_parameters", "model_dtype", "model_revision", "model_sha"}
    assert config["model_dtype"] == "torch.float32" and config["model_num_parameters"] > 0
