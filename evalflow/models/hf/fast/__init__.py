"""The HF backend's speed engine (``model.engine=fast``, the default): CPU and batching machinery
that computes the reference path's answers faster, never different ones.

Kept out of the HF answers' cache key (``HFModel.CODE`` names the semantic modules only): the claim
that lets it stay out is a test, ``tests/models/test_hf_engine.py`` (each path here gives the
reference path's answers: greedy text identical, log-likelihoods within the parity tolerance).
``probes`` checks at load that the private torch/transformers APIs these modules use are still
there, and turns a path off (back to the reference path, one logged line) when one is gone.

- ``prefix``, ``pack``: which tokens to share; ``kv``: packed passes and reused key/values;
- ``decode``: greedy continuous batching, with ``lookup`` (draft tokens), ``shared_attention``
  (rows behind one few-shot prefix) and ``native_attention`` (``native/decode_attention.c``);
- ``stream``: one decode loop fed chunk after chunk; ``packed_linear``: oneDNN linear layers.
"""
