"""The HF backend's speed engine (``model.engine=fast``, the default): CPU and batching machinery
that computes the reference path's answers faster, never different ones.

Kept out of the HF answers' cache key (``HFModel.CODE`` names the semantic modules only, and none of
them imports this package): the claim that lets it stay out is a test, ``tests/models/test_hf_engine.py``
(each path here gives the reference path's answers: greedy text identical, log-likelihoods within the
parity tolerance), with each path's own tests (``hf_model.SEMANTICS`` lists them).
``fast_engine`` is the one module ``HFModel`` imports, only when the fast engine runs; ``probes``
checks at load that the private torch/transformers APIs these modules use are still there, and
turns a path off (back to the reference path, one logged line) when one is gone.

- ``shared_scoring``, ``shared_generation``: the orchestration plugged into the reference passes
  (``score``, ``generate``);
- ``prefix``, ``pack``: which tokens to share; ``kv``: packed passes and reused key/values;
- ``decode``: greedy continuous batching, with ``lookup`` (draft tokens), ``shared_attention``
  (rows behind one few-shot prefix) and ``native_attention`` (``native/decode_attention.c``);
- ``stream``: one decode loop fed chunk after chunk; ``packed_linear``: oneDNN linear layers.
"""
