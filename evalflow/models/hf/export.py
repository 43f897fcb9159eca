"""A GGUF file as a transformers model folder (``python -m evalflow gguf-to-hf``), for engines that
load only that layout: vLLM, and any tool that reads ``save_pretrained``'s files.

transformers dequantizes a GGUF file when it loads it (SmolLM2's Q4_1 becomes fp32 weights);
``save_pretrained`` refuses such a model while it still carries the GGUF quantizer and
``quantization_config``, so both are dropped: the folder holds the dequantized weights, which are what
evalflow's ``hf`` backend computes with, so the two backends score the same numbers.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from evalflow.errors import ModelError


def gguf_to_folder(folder: str, gguf_file: str, out: Path, dtype: str = "float32") -> Path:
    """Write ``folder/gguf_file`` to ``out`` as safetensors weights, config and tokenizer files."""
    source = Path(folder) / gguf_file
    if not source.is_file():
        raise ModelError(f"gguf-to-hf: {source} is not a file; give the folder that holds the GGUF file and its name.")
    if out.exists() and any(out.iterdir()):
        raise ModelError(f"gguf-to-hf: {out} exists and is not empty; give a new folder (nothing was written).")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=gguf_file)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=gguf_file, dtype=getattr(torch, dtype))
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    # the weights are dequantized already: nothing of GGUF is left to save. from_pretrained sets both
    # attributes undeclared, so mypy sees nn.Module's __setattr__, typed for tensors and modules only
    model.hf_quantizer = None  # type: ignore[assignment]  # an undeclared attribute (above)
    model.is_quantized = False  # type: ignore[assignment]  # an undeclared attribute (above)
    partial = out.with_name(out.name + ".partial")  # renamed when complete: a folder at OUT is never half-written
    shutil.rmtree(partial, ignore_errors=True)
    model.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    if out.exists():
        out.rmdir()
    partial.rename(out)
    return out
