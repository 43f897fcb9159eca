"""Decode-step attention that reads a prefix shared by every row once per step, not once per row.

When every generation request of a run starts with the same few-shot examples (fixed exemplars
such as gsm8k-CoT's, any ``first_n`` sampler), the rows of a decode step all begin with the same
key/values. Plain attention over ``[prefix | own tokens]`` needs them copied into every row and
reads them once per row and step; at eight rows behind a 700-token prefix that is most of the
bytes a memory-bound step moves. Here the step's attention is split in two: every row's query
against the one shared prefix (a single pass over it), and each row's query against its own
columns (the decode slots, masked per row). Each part returns its softmax-weighted values and
log-sum-exp; merging them by those weights is the softmax over the concatenation, up to float
rounding. (Scoring passes are compute-bound: there the same split saves nothing, measured on
mmlu 5-shot, since every token still attends to the whole prefix.)

Transformers picks a model's attention function by name (``config._attn_implementation``), so
:func:`active` registers :data:`NAME` (mask creation as ``sdpa``'s) and switches a model using
``sdpa`` to it for the duration of a generation run. Called without ``shared_prefix`` — every
prefill pass, any other model call — the function is transformers' own ``sdpa`` attention.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

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
    configs = {id(m.config): m.config for m in model.modules() if getattr(getattr(m, "config", None), "_attn_implementation", None) == "sdpa"}
    for config in configs.values():
        config._attn_implementation = NAME
    try:
        yield
    finally:
        for config in configs.values():
            config._attn_implementation = "sdpa"


def attention(
    module: Any,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    shared_prefix: Any = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """Transformers' attention-function signature; ``shared_prefix`` (``kv.PrefixStates`` of one
    prefix) holds the key/values every row attends to before ``key``/``value``, which are the
    rows' own columns, masked by ``attention_mask`` ``[rows, 1, 1, columns]``. Query ``[rows,
    heads, 1, dim]``; returns ``[rows, 1, heads, dim]``."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    if shared_prefix is None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs)
    used = [k for k in UNSUPPORTED if kwargs.get(k) is not None]
    if used or query.shape[2] != 1:
        raise RuntimeError(f"shared-prefix attention got {used or 'a multi-token query'}; please report this model")
    rows, heads, _, dim = query.shape
    kv_heads = key.shape[1]
    group = heads // kv_heads  # head h reads kv head h // group, as transformers' repeat_kv lays them out
    scale = scaling if scaling is not None else dim**-0.5
    grouped = query.reshape(rows, kv_heads, group, dim)  # a kv head's queries side by side
    layer = module.layer_idx
    prefix_keys, prefix_values = shared_prefix.keys[layer], shared_prefix.values[layer]  # [1, kv_heads, P, dim]
    every_row = grouped.transpose(0, 1).reshape(1, kv_heads, rows * group, dim)
    shared_out, shared_lse = _softmax_part(every_row, prefix_keys, prefix_values, None, scale)
    shared_out = shared_out.reshape(kv_heads, rows, group, dim).transpose(0, 1)
    shared_lse = shared_lse.reshape(kv_heads, rows, group, 1).transpose(0, 1)
    own_out, own_lse = _softmax_part(grouped, key, value, attention_mask, scale)
    total = torch.logaddexp(shared_lse, own_lse)
    out = shared_out * torch.exp(shared_lse - total) + own_out * torch.exp(own_lse - total)
    return out.reshape(rows, heads, 1, dim).transpose(1, 2).contiguous(), None


def _softmax_part(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor | None, scale: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Softmax attention over these keys alone: (weighted values, log-sum-exp of the scores ``[..., 1]``).

    On a CPU, torch's flash kernel, which returns the log-sum-exp and never holds the whole score
    matrix; elsewhere the same in plain tensor operations."""
    if query.device.type == "cpu":
        out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(query, key, value, attn_mask=mask, scale=scale)
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
