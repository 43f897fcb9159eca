"""vLLM in-process (``model=vllm``): lm-eval 0.4.13's ``VLLM`` semantics (``requests``), the class
evalflow builds (``model``: torch- and vllm-free until it loads), the calls into vLLM (``engine``) and
the CPU build's side venv (``cpu_venv``); ``vllm_vlm`` is lm-eval's ``VLLM_VLM`` (images) on the same code."""
