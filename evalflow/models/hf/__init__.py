"""Hugging Face causal LMs answering lm-eval 0.4.13's three request types (``model.type: hf``).

:class:`HFModel` (``model.py``) is the entry point; the modules beside it are its parts, listed in
its docstring. Importing this package imports neither torch nor transformers.

    from evalflow.models.hf import HFModel
"""

from evalflow.models.hf.hf_model import HFModel

__all__ = ["HFModel"]
