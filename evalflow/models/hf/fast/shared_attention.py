"""Decode-step attention: each key/value head read once per row, a shared prefix once per step.

A decode step is memory-bound: its cost is the bytes it moves. Two savings over transformers'
``sdpa`` attention:

- **Grouped queries.** With grouped-query attention (SmolLM2: 9 query heads over 3 key/value
  heads) and a mask (decode rows have different lengths), ``sdpa`` first copies every key/value
  head once per query head of its group (``repeat_kv``), so each step writes and reads the whole
  cache three times over. Here the group's queries are laid side by side as the query positions
  of their key/value head (``[rows, kv_heads, group, dim]``), so the kernel reads each head once.
- **A shared prefix.** When every generation request of a run starts with the same few-shot
  examples (fixed exemplars such as gsm8k-CoT's, any ``first_n`` sampler), the rows of a decode
  step all begin with the same key/values. Plain attention over ``[prefix | own tokens]`` needs
  them copied into every row and reads them once per row and step. Here the step's attention is
  split in two: every row's query against the one shared prefix (a single pass over it), and each
  row's query against its own columns (the decode slots, masked per row). Each part returns its
  softmax-weighted values and log-sum-exp; merging them by those weights is the softmax over the
  concatenation, up to float rounding. (Scoring passes are compute-bound: there the same split
  saves nothing, measured on mmlu 5-shot, since every token still attends to the whole prefix.)

Both are the same softmax as ``sdpa``'s up to float summation order. Transformers picks a model's
attention function by name (``config._attn_implementation``), so :func:`active` registers
:data:`NAME` (mask creation as ``sdpa``'s) and switches a model using ``sdpa`` to it for the
duration of a generation run; the decode loop marks its steps (``decode_step``), which may feed
a row several tokens (its draft tokens, ``lookup``). Any other pass (a prefill in the decode
loop) runs transformers' own ``sdpa`` attention, or, given the compiled kernel, that kernel with
causal visibility (``sdpa``'s CPU kernel reaches ~2/3 of the fp32 matrix-product speed there).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

NAME = "evalflow_shared_prefix"
UNSUPPORTED = ("softcap", "sinks", "s_aux", "position_bias")  # attention variants this split does not reproduce


def applies(model: Any) -> bool:
    """Whether the model runs transformers' ``sdpa`` attention, the one this function extends."""
    return getattr(model.config, "_attn_implementation", None) in ("sdpa", NAME)


@contextlib.contextmanager
def active(model: Any) -> Iterator[None]:
    """Run the block with the model's attention dispatched to :func:`attention` (then restored)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(NAME, attention)
    AttentionMaskInterface.register(NAME, sdpa_mask)
    configs = {
        id(m.config): m.config
        for m in model.modules()
        if getattr(getattr(m, "config", None), "_attn_implementation", None) == "sdpa"
    }
    for config in configs.values():
        config._attn_implementation = NAME
    try:
        yield
    finally:
        for config in configs.values():
            config._attn_implementation = "sdpa"


def query_group(model: Any) -> int:
    """Query heads per key/value head (grouped-query attention; 1 without it)."""
    config = getattr(model.config, "text_config", None) or model.config
    heads = int(config.num_attention_heads)
    return heads // int(getattr(config, "num_key_value_heads", None) or heads)


def grouped_mask(mask: torch.Tensor, group: int) -> torch.Tensor:
    """A decode step's mask ``[rows, tokens, columns]`` in :func:`attention`'s grouped query
    order, ``[rows, 1, group * tokens, columns]`` (query ``g * tokens + t`` is token ``t`` of the
    group's head ``g``), built once per step rather than once per layer; one token a row needs no
    copy (it broadcasts over the group)."""
    return (mask.repeat(1, group, 1) if mask.shape[1] > 1 else mask)[:, None]


def attention(
    module: Any,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    shared_prefix: Any = None,
    decode_step: bool = False,
    native: Any = None,
    visible: torch.Tensor | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """Transformers' attention-function signature. In a decode step (``decode_step``), the query
    ``[rows, heads, tokens, dim]`` (a row's next token and its draft tokens) attends to
    ``key``/``value`` (the rows' own columns, masked by ``attention_mask`` in grouped query order,
    :func:`grouped_mask`), after ``shared_prefix`` (``kv.PrefixStates`` of one prefix, the key/values every
    row attends to first) if given; returns ``[rows, tokens, heads, dim]``. With ``native`` (the
    compiled kernel, ``native_attention``) and ``visible`` (``[rows, group * tokens]``: the columns
    each grouped query sees, the same visibility as the mask), the rows' own columns go through
    that kernel. Any other pass (a prefill in the decode loop) is transformers' ``sdpa`` attention,
    or with ``native`` the kernel, causally (:func:`_causal_prefill`)."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    used = [k for k in UNSUPPORTED if kwargs.get(k) is not None]
    if not (decode_step or shared_prefix is not None) or used or dropout:
        if shared_prefix is not None:
            raise RuntimeError(f"shared-prefix attention got {used or 'dropout'}; please report this model")
        if native is not None and not (used or dropout):  # so a plain pass: a prompt's prefill
            prefilled = _causal_prefill(native, module, query, key, value, attention_mask, scaling)
            if prefilled is not None:
                return prefilled, None
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    rows, heads, tokens, dim = query.shape
    kv_heads = key.shape[1]
    group = heads // kv_heads
    scale = _scale(scaling, dim)
    grouped = _grouped(query, key)
    if attention_mask is not None and attention_mask.shape[-2] not in (1, group * tokens):
        raise RuntimeError(
            f"a decode step's mask has {attention_mask.shape[-2]} query rows, not {group} x {tokens} "
            "(grouped_mask); please report this bug"
        )
    own = native(grouped, key, value, visible, scale) if native is not None and visible is not None else None
    own_out, own_lse = own if own is not None else _softmax_part(grouped, key, value, attention_mask, scale)
    if shared_prefix is not None:
        layer = module.layer_idx
        prefix_keys, prefix_values = shared_prefix.keys[layer], shared_prefix.values[layer]  # [1, kv_heads, P, dim]
        every_row = grouped.transpose(0, 1).reshape(1, kv_heads, rows * group * tokens, dim)
        shared_out, shared_lse = _softmax_part(every_row, prefix_keys, prefix_values, None, scale)
        shared_out = shared_out.reshape(kv_heads, rows, group * tokens, dim).transpose(0, 1)
        shared_lse = shared_lse.reshape(kv_heads, rows, group * tokens, 1).transpose(0, 1)
        total = torch.logaddexp(shared_lse, own_lse)
        own_out = shared_out * torch.exp(shared_lse - total) + own_out * torch.exp(own_lse - total)
    return _ungrouped(own_out, query.shape), None


def _causal_prefill(
    native: Any,
    module: Any,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None,
    scaling: float | None,
) -> torch.Tensor | None:
    """A prompt's prefill through the compiled kernel (``native``): one row of a causal layer with
    no mask (transformers drops it when the pass is plainly causal, as ``sdpa``'s ``is_causal``
    reads it), so token ``t`` of ``T`` sees the columns up to its own, ``columns - T + t + 1``.
    None (transformers' ``sdpa`` runs instead) for anything else."""
    rows, heads, tokens, dim = query.shape
    if rows != 1 or mask is not None or not getattr(module, "is_causal", True):
        return None
    group = heads // key.shape[1]
    own = torch.arange(key.shape[2] - tokens + 1, key.shape[2] + 1).repeat(group)[None]  # grouped order: g * T + t
    done = native(_grouped(query, key), key, value, own, _scale(scaling, dim))
    return None if done is None else _ungrouped(done[0], query.shape)


def _scale(scaling: float | None, dim: int) -> float:
    """The scores' scale: the layer's own, else transformers' default ``1 / sqrt(dim)``."""
    return scaling if scaling is not None else dim**-0.5


def _grouped(query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    """``query`` ``[rows, heads, tokens, dim]`` as ``[rows, kv_heads, group * tokens, dim]``: a key/value
    head's queries side by side (head h reads kv head h // group, as transformers' repeat_kv lays them out)."""
    rows, heads, tokens, dim = query.shape
    return query.reshape(rows, key.shape[1], heads // key.shape[1] * tokens, dim)


def _ungrouped(out: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    """Grouped attention output back to transformers' layout ``[rows, tokens, heads, dim]`` (``shape``: the query's)."""
    rows, heads, tokens, dim = shape
    return out.reshape(rows, heads, tokens, dim).transpose(1, 2).contiguous()


def _softmax_part(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor | None, scale: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Softmax attention over these keys alone: (weighted values, log-sum-exp of the scores ``[..., 1]``).

    On a CPU, torch's flash kernel, which returns the log-sum-exp and never holds the whole score
    matrix; elsewhere the same in plain tensor operations."""
    if query.device.type == "cpu":
        out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            query, key, value, attn_mask=mask, scale=scale
        )
        return out, lse.unsqueeze(-1)
    return plain_softmax_part(query, key, value, mask, scale)


def plain_softmax_part(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor | None, scale: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`_softmax_part` in tensor operations, for devices without the CPU kernel."""
    scores = torch.matmul(query, key.transpose(-1, -2)).mul_(scale)
    if mask is not None:
        scores.add_(mask)
    lse = torch.logsumexp(scores, dim=-1, keepdim=True)
    return torch.matmul(scores.sub_(lse).exp_(), value), lse
