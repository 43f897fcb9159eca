"""The model protocol and its backends: what a model is to evalflow; hf, vLLM, served models, the dummy.

Lives here: ``protocol`` (``LanguageModel``), the model registry, lm-eval's token rules, one subpackage per backend.
May import ``errors`` … ``taskspec`` (the rooms below it in docs/architecture.md); never ``scale`` or a room above.
"""
