"""Vision-language models (``model.type: hf_multimodal``, docs/vision.md): ``vlm`` (the model
class, keyed by its own modules), ``vlm_passes`` (its forward passes) and ``tiny_vlm`` (a random
tiny checkpoint for tests and demos)."""
