"""Key/value reuse: run a shared prefix once, then score or generate from its cached key/values.

The torch half of prefix sharing (``prefix`` plans it), built on ``torch_ops``'s plain passes. Each
step is one forward pass:

- :func:`prefix_states`: right-padded prefixes of several families, no attention mask (causal
  attention never looks right, so padding cannot reach a real position, as in lm-eval's scoring
  pass); keeps the key/values of every layer.
- :func:`suffix_logprobs`: every row's own tokens, attending to its family's prefix through a
  cache layer (:class:`PrefixedLayer`) that hands each layer ``[prefix of the row's family, new
  key/values]`` without storing it. Families of different lengths share one pass: the gap after a
  shorter prefix is masked, and positions continue from the row's own prefix length.
- :func:`generation_cache`: a cache for ``model.generate`` that fills a buffer allocated once
  (:class:`GrowingLayer`) instead of concatenating at every step, optionally already holding a
  prefix shared by every row of the batch, so ``generate`` runs only the documents' own tokens.

Equal to the plain computation up to float summation order (1e-5 on a tiny Llama in the tests).
:func:`supports_kv_reuse` decides from the model's signature and layer types whether these paths
apply; :func:`kv_reuse_error` checks them numerically on the loaded model, once.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from transformers.cache_utils import Cache, DynamicLayer

from evalflow.models.hf.fast.pack import PackedRow, Segment, pack, tree
from evalflow.models.hf.torch_ops import cache_argument, continuation_logprobs


@dataclass(frozen=True)
class PrefixStates:
    """Key/values of prefixes, per layer ``[prefixes, kv_heads, longest, head_dim]``.

    Prefix ``i`` is valid for its first ``lengths[i]`` positions; beyond that the tensors hold the
    states of padding, which every later pass masks out.
    """

    keys: tuple[torch.Tensor, ...]
    values: tuple[torch.Tensor, ...]
    lengths: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (*self.keys, *self.values))

    def one(self, i: int, n: int | None = None) -> PrefixStates:
        """Prefix ``i`` alone, cut to its first ``n`` tokens (a prefix's prefix needs no new pass).

        Copied, so that keeping it (in a memo) does not keep the whole batch's tensors alive.
        """
        n = self.lengths[i] if n is None else n
        return PrefixStates(
            tuple(k[i : i + 1, :, :n].clone() for k in self.keys),
            tuple(v[i : i + 1, :, :n].clone() for v in self.values),
            (n,),
        )

    def head(self, n: int) -> PrefixStates:
        """The first ``n`` tokens of a single-prefix state (views, no copy)."""
        return PrefixStates(tuple(k[:, :, :n] for k in self.keys), tuple(v[:, :, :n] for v in self.values), (n,))


def supports_kv_reuse(model: Any) -> bool:
    """Whether prefix sharing applies: a decoder with full attention in every layer whose forward
    takes a cache, positions and a 2D mask. Sliding-window or recurrent layers keep the plain path."""
    config = model.config
    cfg = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
    try:
        params = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return False
    if getattr(cfg, "is_encoder_decoder", False) or cache_argument(model) is None:
        return False
    if not {"position_ids", "attention_mask"} <= set(params):
        return False
    layer_types = getattr(cfg, "layer_types", None)
    if layer_types is not None:
        return all(t == "full_attention" for t in layer_types)
    return not getattr(cfg, "sliding_window", None) or getattr(cfg, "use_sliding_window", True) is False


class PrefixedLayer(DynamicLayer):
    """One layer's cache for a pass over suffixes: row ``r`` first sees prefix ``family[r]``.

    ``update`` returns the prefix and the new key/values side by side and stores nothing: the pass
    needs them once, and not keeping them bounds memory to one layer's expansion at a time.
    """

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, family: torch.Tensor) -> None:
        super().__init__()
        self.prefix_keys, self.prefix_values, self.family = keys, values, family
        self.is_initialized = True

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return self._joined(self.prefix_keys, key_states), self._joined(self.prefix_values, value_states)

    def _joined(self, prefix: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
        rows, heads, length, dim = new.shape
        out = new.new_empty((rows, heads, prefix.shape[-2] + length, dim))
        out[:, :, : prefix.shape[-2]] = prefix if prefix.shape[0] == 1 else prefix[self.family]
        out[:, :, prefix.shape[-2] :] = new
        return out

    def get_seq_length(self) -> int:
        return int(self.prefix_keys.shape[-2])

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.get_seq_length() + query_length, 0


def right_padded(rows: Sequence[Sequence[int]]) -> torch.Tensor:
    """Token rows padded on the right with token 0 (never attended: causal attention looks left)."""
    batch = torch.zeros((len(rows), max(len(r) for r in rows)), dtype=torch.long)
    for i, row in enumerate(rows):
        batch[i, : len(row)] = torch.tensor(list(row), dtype=torch.long)
    return batch


def prefix_states(model: Any, prefixes: Sequence[Sequence[int]], device: Any) -> PrefixStates:
    """Run prefixes (one batch, right-padded, no mask) and keep their key/values."""
    kwargs: dict[str, Any] = {"use_cache": True}
    if "logits_to_keep" in inspect.signature(model.forward).parameters:
        kwargs["logits_to_keep"] = 1  # the logits of a prefix are never scored
    out = model(right_padded(prefixes).to(device), **kwargs)
    cache = getattr(out, "cache", None) or out.past_key_values
    return PrefixStates(
        tuple(layer.keys for layer in cache.layers),
        tuple(layer.values for layer in cache.layers),
        tuple(len(p) for p in prefixes),
    )


def packed_logprobs(
    model: Any, rows: Sequence[PackedRow], states: PrefixStates | None, device: Any, exact_keep: bool
) -> dict[int, torch.Tensor]:
    """One pass over packed rows; per scored caller row, the log-softmax ``[scored, vocab]``.

    Row ``r`` continues prefix ``rows[r].prefix`` of ``states`` (if any). ``exact_keep`` asks the
    model for the logits of the scored positions only (a 2D boolean ``logits_to_keep``); without
    it all positions' logits are computed and the scored ones picked.
    """
    ids, positions, allowed, keep, spans = _layout(rows, states)
    dtype = model.dtype if model.dtype.is_floating_point else torch.float32
    mask = torch.zeros(allowed.shape, dtype=dtype).masked_fill_(~allowed, torch.finfo(dtype).min)[:, None]
    kwargs: dict[str, Any] = {}
    if states is not None:
        family = torch.tensor([max(0, r.prefix) for r in rows], dtype=torch.long, device=device)
        cache = Cache(layers=[PrefixedLayer(k, v, family) for k, v in zip(states.keys, states.values)])
        kwargs = {str(cache_argument(model)): cache, "use_cache": True}
    if exact_keep:
        kwargs["logits_to_keep"] = keep.to(device)
    logits = model(ids.to(device), attention_mask=mask.to(device), position_ids=positions.to(device), **kwargs).logits
    out: dict[int, torch.Tensor] = {}
    if exact_keep:  # flattened row-major: a span's positions are consecutive in the output
        flat = keep.view(-1).cumsum(0).view(keep.shape) - 1
        for caller, r, start, end in spans:
            first = int(flat[r, start])
            out[caller] = F.log_softmax(logits[first : first + end - start], dim=-1)
    else:
        for caller, r, start, end in spans:
            out[caller] = F.log_softmax(logits[r, start:end], dim=-1)
    return out


def _layout(
    rows: Sequence[PackedRow], states: PrefixStates | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, list[tuple[int, int, int, int]]]:
    """Token ids, positions, visibility ``[row, query, cached + width]``, scored positions, spans.

    A segment sees its own earlier tokens and everything its parent's last token sees, parent
    included; a root sees the first ``length`` cached positions of its row's prefix. Padding sees
    only itself, so no query row is empty and nothing real ever sees padding.
    """
    width = max(r.width for r in rows)
    cached = int(states.keys[0].shape[-2]) if states is not None else 0
    ids = torch.zeros((len(rows), width), dtype=torch.long)
    positions = torch.zeros((len(rows), width), dtype=torch.long)
    allowed = torch.zeros((len(rows), width, cached + width), dtype=torch.bool)
    keep = torch.zeros((len(rows), width), dtype=torch.bool)
    spans: list[tuple[int, int, int, int]] = []
    for r, row in enumerate(rows):
        base = states.lengths[row.prefix] if states is not None and row.prefix >= 0 else 0
        bounds: list[tuple[int, int]] = []
        start = 0
        for seg in row.segments:
            end = start + len(seg.tokens)
            ids[r, start:end] = torch.tensor(seg.tokens, dtype=torch.long)
            if seg.parent >= 0:
                last = bounds[seg.parent][1] - 1
                allowed[r, start:end] = allowed[r, last]
                first = int(positions[r, last]) + 1
            else:
                allowed[r, start:end, :base] = True
                first = base
            positions[r, start:end] = torch.arange(first, first + end - start)
            allowed[r, start:end, cached + start : cached + end] |= torch.ones(
                end - start, end - start, dtype=torch.bool
            ).tril()
            for caller, n in seg.scored:
                keep[r, end - n : end] = True
                spans.append((caller, r, end - n, end))
            bounds.append((start, end))
            start = end
        pad = torch.arange(start, width)
        allowed[r, pad, cached + pad] = True
    return ids, positions, allowed, keep, spans


class GrowingLayer(DynamicLayer):
    """A generation cache layer that writes into a buffer sized for the whole generation.

    ``DynamicLayer`` concatenates at every step, copying the whole cache each time; this one
    allocates ``capacity`` positions once and returns views of the filled part, so attention sees
    exactly the same keys and values without the copies.
    """

    def __init__(self, capacity: int) -> None:
        super().__init__()
        self.capacity = capacity
        self.filled = 0
        self.key_buffer: torch.Tensor | None = None
        self.value_buffer: torch.Tensor | None = None

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        new = key_states.shape[-2]
        keys = self._room(self.key_buffer, key_states, new)
        values = self._room(self.value_buffer, value_states, new)
        keys[:, :, self.filled : self.filled + new] = key_states
        values[:, :, self.filled : self.filled + new] = value_states
        self.key_buffer, self.value_buffer = keys, values
        self.filled += new
        self.keys, self.values = keys[:, :, : self.filled], values[:, :, : self.filled]
        self.is_initialized = True
        return self.keys, self.values

    def _room(self, buffer: torch.Tensor | None, states: torch.Tensor, new: int) -> torch.Tensor:
        """The buffer, reallocated (filled part copied) if it cannot take ``new`` more positions."""
        if buffer is not None and self.filled + new <= buffer.shape[-2]:
            return buffer
        batch, heads, _, dim = states.shape
        grown = states.new_empty((batch, heads, max(self.capacity, self.filled + new), dim))
        if buffer is not None:
            grown[:, :, : self.filled] = buffer[:, :, : self.filled]
        return grown

    def get_seq_length(self) -> int:
        return self.filled

    def states(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """The keys and values so far; None before the first ``update`` (a one-token context
        runs nothing before its last token)."""
        return None if self.keys is None or self.values is None else (self.keys, self.values)

    def place(self, row: int, rows: int, column: int, keys: torch.Tensor, values: torch.Tensor) -> None:
        """Copy one row's ``keys`` and ``values`` into row ``row`` of ``rows``, from ``column`` on;
        the columns before stay zero (padding, masked), and the cache counts as filled to the end."""
        key_buffer, value_buffer = self.key_buffer, self.value_buffer
        if key_buffer is None or value_buffer is None:  # allocated together, at the first row
            batch_shape = (rows, keys.shape[1], self.capacity, keys.shape[-1])
            key_buffer, value_buffer = keys.new_zeros(batch_shape), values.new_zeros(batch_shape)
            self.key_buffer, self.value_buffer = key_buffer, value_buffer
        end = column + keys.shape[-2]
        key_buffer[row, :, column:end] = keys[0]
        value_buffer[row, :, column:end] = values[0]
        self.filled = max(self.filled, end)
        self.keys, self.values = key_buffer[:, :, : self.filled], value_buffer[:, :, : self.filled]
        self.is_initialized = True


def num_layers(model: Any) -> int:
    """The decoder's layer count: one cache layer each."""
    config = model.config
    cfg = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
    return int(cfg.num_hidden_layers)


def _growing_layers(model: Any, capacity: int) -> list[GrowingLayer]:
    return [GrowingLayer(capacity) for _ in range(num_layers(model))]


def generation_cache(
    model: Any,
    contexts: Sequence[Sequence[int]],
    capacity: int,
    prefix: PrefixStates | None,
    device: Any,
    attention: dict[str, Any] | None = None,
) -> Cache:
    """A cache for ``generate`` over left-padded ``contexts``, holding all but their last token:
    :func:`generation_layers` as a transformers ``Cache``."""
    return Cache(layers=list(generation_layers(model, contexts, capacity, prefix, device, attention)))


def generation_layers(
    model: Any,
    contexts: Sequence[Sequence[int]],
    capacity: int,
    prefix: PrefixStates | None,
    device: Any,
    attention: dict[str, Any] | None = None,
) -> list[GrowingLayer]:
    """The layers of a cache for ``generate`` over left-padded ``contexts``, all but their last token.

    Each context runs alone (no padding to compute, no mask, so the causal kernel skips the
    masked half), after ``prefix`` if given (the first ``prefix.lengths[0]`` tokens of every
    context, not run again); its key/values are then laid out left-padded to the longest context,
    the padding columns zero and masked by the caller's attention mask. ``generate`` thus starts
    at the last context token, with room for ``capacity`` positions in all. ``attention``: extra
    keyword arguments for the attention function (the decode loop's compiled kernel, ``native``).
    """
    padlen = max(len(c) for c in contexts)
    shared = prefix.lengths[0] if prefix is not None else 0
    layers = _growing_layers(model, capacity)
    for i, ctx in enumerate(contexts):
        row = _growing_layers(model, len(ctx))
        if prefix is not None:
            for layer, k, v in zip(row, prefix.keys, prefix.values):
                layer.update(k, v)
        own = list(ctx[shared:-1])
        if own:
            positions = torch.arange(shared, len(ctx) - 1, device=device)[None]
            kwargs = {str(cache_argument(model)): Cache(layers=list(row)), "use_cache": True, **(attention or {})}
            if "logits_to_keep" in inspect.signature(model.forward).parameters:
                kwargs["logits_to_keep"] = 1
            model(torch.tensor([own], dtype=torch.long, device=device), position_ids=positions, **kwargs)
        for target, source in zip(layers, row):
            states = source.states()
            if states is not None:  # a one-token context has nothing before its last token
                target.place(i, len(contexts), padlen - len(ctx), *states)
    return layers


def exact_keep_supported(model: Any) -> bool:
    """Whether the model takes a boolean ``[batch, length]`` ``logits_to_keep`` (transformers 5)."""
    import transformers.modeling_utils as mu

    try:
        params = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return False
    return "logits_to_keep" in params and hasattr(mu, "slice_logits_to_keep")


def kv_reuse_error(model: Any, device: Any, exact_keep: bool) -> float:
    """Largest |difference| between packed/prefix-cached and plain log-probs on a made-up input.

    A tree with two branches next to a lone row, and rows continuing two cached prefixes of
    different lengths, exercise the mask, the positions and the cache; a model whose attention
    ignores any of them shows differences of order 1.
    """
    config = model.config
    vocab = int((config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config).vocab_size)
    seq = [(7 * i + 3) % vocab for i in range(16)]
    wholes = [seq[:9], seq[:12], seq[3:10], seq[:8] + seq[12:15], seq[2:11] + seq[13:16]]
    scored = [2, 3, 2, 2, 3]
    trees = [tree(seq[:6], [(seq[6:9], 0, 2), (seq[6:12], 1, 3)]), tree(seq[3:10], [], row=2, scored=2)]
    cached = [
        PackedRow((Segment(tuple(seq[12:15]), -1, ((3, 2),)),), prefix=0),
        PackedRow((Segment(tuple(seq[13:16]), -1, ((4, 3),)),), prefix=1),
    ]
    with torch.inference_mode():
        got = packed_logprobs(model, pack(trees, width=32), None, device, exact_keep)
        states = prefix_states(model, [seq[:8], seq[2:11]], device)
        got.update(packed_logprobs(model, cached, states, device, exact_keep))
        plain = continuation_logprobs(model, wholes, scored, device, False)
    return max(float((got[i] - plain[i]).abs().max()) for i in range(len(wholes)))
