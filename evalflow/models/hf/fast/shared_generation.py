"""The fast engine's generation: greedy continuous batching, and a shared prefix run once.

:meth:`FastGeneration.answer_group` is the fast engine's
:attr:`evalflow.models.hf.generate.GenerationSetup.answer_group`: it gets a kwargs group as the
reference path prepared it (lm-eval's order, stops and left truncation) and answers it

- greedy (``do_sample`` false, no other sampling kwargs): in evalflow's decode loop (``decode``),
  where a row leaves the batch as soon as it stops and the next request takes its place;
- otherwise: in lm-eval's batches (``generate.generate_batches``), each batch starting
  ``model.generate`` from the key/values of the prefix its contexts share (gsm8k's ``first_n``
  few-shot examples give every document the same five), run once and kept in the model's prefix
  memo across batches. The batch is laid out ``[prefix | left padding | own tokens]`` with the
  padding masked, so each row sees exactly its own context at its own positions, with the same
  padded length (hence the same ``max_length``) as without sharing.

Each request's text is the reference path's (``tests/models/test_hf_engine.py``,
``test_hf_generate.py``, ``test_hf_stream.py``): greedy tokens are the same function of the row's
own context; the rows it shares a step with change float summation order only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from evalflow.core.records import Request
from evalflow.models.hf.fast.prefix import PrefixMemo, common_prefix_len, plan_families
from evalflow.models.hf.generate import Answers, GenerationSetup, Group, final_answer, generate_batches
from evalflow.models.lmeval_tokens import hf_generate_kwargs


@dataclass(frozen=True)
class FastGeneration:
    """The fast generation paths of one loaded model, as its load-time checks left them."""

    continuous: bool  # greedy groups run in the decode loop
    kv_works: bool  # the model runs with evalflow's caches, masks and positions (the self-check passed)
    share_prefixes: bool  # key/value reuse of shared prefixes is on and passed the self-check
    min_prefix: int  # shorter shared prefixes are run with their documents
    memo: PrefixMemo[Any]  # of kv.PrefixStates, shared with scoring
    draft_tokens: int  # per row and decode step, copied from the row's own text (``lookup``); 0: none
    native_attention: bool  # decode steps' attention in the compiled kernel where it applies
    decode_slots_for: Callable[[int], int]  # sequence length -> rows per continuous-batching step

    def answer_group(self, setup: GenerationSetup, requests: Sequence[Request], group: Group) -> Answers:
        """The group's answers: greedy in the decode loop, else lm-eval's batches after a shared prefix."""
        if self.greedy(group):
            return self._continuous(setup, group)
        if not self.share_prefixes:
            return generate_batches(setup, requests, group)
        family = self.family_prefixes(group.encoded)

        def cache_for(batch: list[int], max_length: int, call_kwargs: dict[str, Any]) -> Any:
            if not _one_sequence_per_row(call_kwargs):
                return None
            from evalflow.models.hf.fast import kv

            contexts = [group.encoded[i] for i in batch]
            prefix = self.batch_prefix(setup, contexts, [family[i] for i in batch])
            return kv.generation_cache(setup.model, contexts, max_length, prefix, setup.device)

        return generate_batches(setup, requests, group, cache_for)

    def greedy(self, group: Group) -> bool:
        """Whether the decode loop answers this group (greedy, and the model runs evalflow's caches)."""
        return self.continuous and self.kv_works and hf_generate_kwargs(group.kwargs) == {"do_sample": False}

    def _continuous(self, setup: GenerationSetup, group: Group) -> Answers:
        """Greedy generation with continuous batching (``decode``): rows leave as soon as they stop."""
        import torch

        from evalflow.models.hf.fast import decode

        slots = self.decode_slots_for(max(len(c) for c in group.encoded) + group.max_gen_toks)
        stop = decode.StopWatch(list(group.until), setup.tokenizer)
        with torch.inference_mode():
            new_tokens = decode.greedy_until(
                setup.model,
                self.decode_jobs(setup, group.encoded),
                slots,
                group.max_gen_toks,
                stop,
                eos_ids(setup),
                setup.device,
                self.draft_tokens,
                self.native_attention,
            )
        return [(i, final_answer(setup, toks, group.until, len(group.encoded[i]))) for i, toks in enumerate(new_tokens)]

    def decode_jobs(self, setup: GenerationSetup, encoded: list[list[int]]) -> list[Any]:
        """A ``decode.Job`` per context: its tokens and the memoized key/values of its family's prefix."""
        from evalflow.models.hf.fast import decode

        family = self.family_prefixes(encoded)
        return [decode.Job(tuple(ctx), self.batch_prefix(setup, [ctx], [n])) for ctx, n in zip(encoded, family)]

    def family_prefixes(self, encoded: list[list[int]]) -> list[int]:
        """Per context, the length of the prefix it shares with other contexts of the group (0: none).

        Planned over the whole group, so batches of one request still find the shared prefix.
        """
        if not self.share_prefixes:
            return [0] * len(encoded)
        families, _ = plan_families(encoded, [len(c) - 1 for c in encoded], self.min_prefix)
        out = [0] * len(encoded)
        for fam in families:
            for i in fam.rows:
                out[i] = fam.prefix_len
        return out

    def batch_prefix(self, setup: GenerationSetup, contexts: list[list[int]], family_prefix: list[int]) -> Any:
        """The key/values of the prefix every context of the batch starts with, or None to run whole."""
        from evalflow.models.hf.fast import kv

        n = min(family_prefix)
        for ctx in contexts[1:]:
            n = min(n, common_prefix_len(contexts[0], ctx))
        if n < self.min_prefix:
            return None
        prefix = contexts[0][:n]
        found = self.memo.covering(prefix, self.min_prefix)
        if found is not None:
            states, m = found
            return states.head(m)
        states = kv.prefix_states(setup.model, [prefix], setup.device).one(0)
        self.memo.put(prefix, states)
        return states


def eos_ids(setup: GenerationSetup) -> set[int]:
    """The token ids that end a greedy row (the model's generation config)."""
    eos = setup.model.generation_config.eos_token_id
    return set(eos if isinstance(eos, list) else [] if eos is None else [eos])


def _one_sequence_per_row(gen_kwargs: dict[str, Any]) -> bool:
    """Beam search and several returned sequences reorder and repeat cache rows, which only
    transformers' own cache supports; evalflow's generation cache serves one sequence per row."""
    return int(gen_kwargs.get("num_beams", 1) or 1) == 1 and int(gen_kwargs.get("num_return_sequences", 1) or 1) == 1
