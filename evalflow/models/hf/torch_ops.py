"""The torch half of HFModel: batched forward passes, scoring and generation.

Imported only when a model is actually loaded (``evalflow.models.hf`` must stay importable
without torch). The two entry points take plain token lists and return plain Python values:

- :func:`continuation_logprobs` runs one batch of model inputs and returns, per row, the
  log-softmax at the positions that predict its continuation. A prefix-sharing or KV-reuse path
  replaces this function and nothing else.
- :func:`generate_batch` left-pads contexts and runs ``model.generate`` with lm-eval's stop rules.
"""

from __future__ import annotations

import contextlib
import inspect
import os
from collections.abc import Iterator, Sequence
from typing import Any

import torch
import torch.nn.functional as F
import transformers

from evalflow.models.hf.batching import ModelDims
from evalflow.models.lmeval_tokens import hf_generate_kwargs


def accepts_logits_to_keep(model: Any) -> bool:
    """Whether the model's forward can compute logits for the last N positions only."""
    try:
        return "logits_to_keep" in inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return False


def cache_argument(model: Any) -> str | None:
    """The name the model's forward takes its cache by (transformers renamed it in 5.x)."""
    try:
        params = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return None
    return next((name for name in ("cache", "past_key_values") if name in params), None)


def continuation_logprobs(
    model: Any,
    inputs: Sequence[Sequence[int]],
    contlens: Sequence[int],
    device: Any,
    keep_only_needed: bool,
    softmax_dtype: torch.dtype | None = None,
) -> list[torch.Tensor]:
    """One forward pass over right-padded ``inputs``; per row, log-probs ``[contlen, vocab]``.

    As lm-eval: inputs are right-padded with token 0 and fed without an attention mask (causal
    attention never looks right, so padding cannot change a row's scored positions), and the
    log-softmax is taken in the logits' dtype, or ``softmax_dtype`` (lm-eval's). ``keep_only_needed``
    asks the model for the logits of the last positions that any row scores (``logits_to_keep``):
    the same values, without a ``[batch, length, vocab]`` array for the context positions.
    """
    padlen = max(len(x) for x in inputs)
    batch = torch.zeros((len(inputs), padlen), dtype=torch.long)
    for i, row in enumerate(inputs):
        batch[i, : len(row)] = torch.tensor(list(row), dtype=torch.long)
    keep = max(padlen - (len(row) - c) for row, c in zip(inputs, contlens))
    kwargs = {"logits_to_keep": keep} if keep_only_needed else {}
    logits = model(batch.to(device), **kwargs).logits
    offset = logits.shape[1] - padlen  # negative when only the last `keep` positions came back
    out = []
    for i, (row, c) in enumerate(zip(inputs, contlens)):
        end = len(row) + offset
        out.append(F.log_softmax(logits[i, end - c : end], dim=-1, dtype=softmax_dtype))
    return out


def autocast_forward(model: Any, device: Any, dtype: torch.dtype) -> None:
    """lm-eval's ``mixed_precision_dtype``: every forward pass under ``torch.autocast`` to ``dtype``
    on the model's device type (lm-eval wraps its model calls and ``generate``; wrapping ``forward``
    covers both, the log-softmax outside it as in lm-eval)."""
    model.forward = torch.autocast(device_type=torch.device(device).type, dtype=dtype)(model.forward)


def score(logprobs: torch.Tensor, cont: Sequence[int]) -> tuple[float, bool]:
    """(sum of the continuation's log-probs, whether greedy decoding would produce it).

    ``logprobs`` may cover more positions than ``cont`` (a group's representative is the longest
    continuation); the continuation takes the last ``len(cont)`` of them, as lm-eval does.
    """
    lp = logprobs[-len(cont) :]
    target = torch.tensor(list(cont), dtype=torch.long, device=lp.device)
    greedy = bool((lp.argmax(dim=-1) == target).all())
    return float(lp.gather(1, target.unsqueeze(-1)).squeeze(-1).sum()), greedy


class StopOnSequence(transformers.StoppingCriteria):
    """lm-eval's ``MultiTokenEOSCriteria``: stop once every row's recent text holds ``sequence``.

    The last ``len(tokens(sequence)) + 2`` generated tokens are decoded, because a model may
    produce a stop string in another tokenization (``"\\n", "\\n"`` for ``"\\n\\n"``). The whole
    batch stops together once all rows have seen it; text after the stop is cut afterwards.
    """

    def __init__(self, sequence: str, tokenizer: Any, prompt_len: int, batch_size: int) -> None:
        self.sequence = sequence
        self.tokenizer = tokenizer
        self.prompt_len = prompt_len
        self.done = [False] * batch_size
        self.lookback = len(tokenizer.encode(sequence, add_special_tokens=False)) + 2

    def __call__(self, input_ids: torch.Tensor, scores: Any, **kwargs: Any) -> bool:
        recent = input_ids[:, self.prompt_len :][:, -self.lookback :]
        texts = self.tokenizer.batch_decode(recent)
        for i, done in enumerate(self.done):
            if not done:
                self.done[i] = self.sequence in texts[i]
        return False not in self.done


def generate_batch(
    model: Any,
    tokenizer: Any,
    contexts: Sequence[Sequence[int]],
    stops: Sequence[str],
    max_length: int,
    gen_kwargs: dict[str, Any],
    device: Any,
    cache: Any = None,
) -> list[list[int]]:
    """Generate after each left-padded context; returns each row's new tokens (padding included).

    ``max_length`` counts the padded context plus the new tokens, as ``model.generate`` does.
    ``cache`` (``kv.generation_cache``: the contexts' key/values, computed without padding)
    replaces transformers' own, so ``generate`` starts at the last context token.
    """
    padlen = max(len(c) for c in contexts)
    pad_id = tokenizer.pad_token_id
    ids = torch.full((len(contexts), padlen), pad_id, dtype=torch.long)
    mask = torch.zeros((len(contexts), padlen), dtype=torch.long)
    for i, ctx in enumerate(contexts):
        if ctx:
            ids[i, padlen - len(ctx) :] = torch.tensor(list(ctx), dtype=torch.long)
            mask[i, padlen - len(ctx) :] = 1
    criteria = transformers.StoppingCriteriaList([StopOnSequence(s, tokenizer, padlen, len(contexts)) for s in stops])
    extra = {str(cache_argument(model)): cache} if cache is not None else {}
    out = model.generate(
        input_ids=ids.to(device),
        attention_mask=mask.to(device),
        max_length=max_length,
        stopping_criteria=criteria,
        pad_token_id=pad_id,
        use_cache=True,
        **extra,
        **hf_generate_kwargs(gen_kwargs),
    )
    return [row[padlen:] for row in out.tolist()]


@contextlib.contextmanager
def seeded(seed: int, device: Any) -> Iterator[None]:
    """Run the block with torch's RNG seeded to ``seed``, restoring the global RNG afterwards.

    Sampled generation is seeded per request, so a sample does not depend on which other requests
    shared its batch or ran before it.
    """
    cuda = getattr(device, "type", str(device)) == "cuda" and torch.cuda.is_available()
    with torch.random.fork_rng(devices=[device] if cuda else []):
        torch.manual_seed(seed)
        yield


def free_memory_bytes(device: Any) -> int:
    """Memory available for activations: free CUDA memory, else the OS's MemAvailable."""
    if getattr(device, "type", str(device)) == "cuda" and torch.cuda.is_available():
        free, _ = torch.cuda.mem_get_info(device)
        return int(free)
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES"))


def model_dims(model: Any) -> ModelDims:
    """The sizes :func:`evalflow.models.hf.batching.auto_batch_size` needs, read from the config."""
    cfg = getattr(model.config, "text_config", None) or model.config
    hidden = int(getattr(cfg, "hidden_size", 0) or getattr(cfg, "n_embd", 0) or 1024)
    return ModelDims(
        vocab=int(getattr(cfg, "vocab_size", 0) or 32000),
        hidden=hidden,
        intermediate=int(getattr(cfg, "intermediate_size", 0) or 4 * hidden),
        layers=int(getattr(cfg, "num_hidden_layers", 0) or getattr(cfg, "n_layer", 0) or 24),
        heads=int(getattr(cfg, "num_attention_heads", 0) or getattr(cfg, "n_head", 0) or 16),
        dtype_bytes=int(torch.finfo(model.dtype).bits // 8) if model.dtype.is_floating_point else 4,
    )
