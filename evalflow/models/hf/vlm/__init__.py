"""Vision-language models (``model.type: hf_multimodal``, docs/vision.md): ``vlm`` (the model
class, keyed by its own modules), ``vlm_passes`` (its forward passes), ``prompts`` (lm-eval's
prompt and image rules, shared with ``vllm_vlm``), and ``tiny_vlm``/``tiny_idefics3`` (random
tiny checkpoints for tests and demos; vLLM's CPU build loads the second)."""
