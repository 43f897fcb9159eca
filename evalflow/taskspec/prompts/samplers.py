"""Which documents become few-shot examples: lm-eval 0.4.13's samplers and few-shot settings.

lm-eval draws examples from ONE ``random.Random(fewshot_random_seed)`` per task, consumed in
document order (``lm_eval/api/samplers.py``). The samplers here work on *indices* into the pool
rather than on the documents: ``random.sample`` picks the same positions for any population of the
same length, so the stream and the draws are identical, and the drawn ids can be recorded.

``fewshot_config.fewshot_indices`` narrows the pool to the listed positions. lm-eval 0.4.13 accepts
the key but never hands it to its sampler (no shipped task sets it); evalflow applies it, for both
samplers, since ignoring a setting silently is worse than the one deviation.

The sampler is the one stateful object of the prompt stage, on purpose: the state *is* lm-eval's
stream. It lives only inside one call of :func:`evalflow.taskspec.prompts.fewshot_context.build_contexts`.

>>> pool = [{"q": str(i)} for i in range(10)]
>>> make_sampler("default", pool, seed=1234).sample(3)
(7, 1, 0)
>>> make_sampler("first_n", pool, seed=None).sample(2, eval_doc={"q": "0"})
(1, 2)
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evalflow.errors import ConfigError, TaskError, closest
from evalflow.taskspec.format.spec import TaskConfig

Doc = Mapping[str, Any]
DEFAULT_FEWSHOT_SEED = 1234  # lm-eval's DEFAULT_OTHER_SEED, its default fewshot_random_seed


class ContextSampler:
    """lm-eval's ``default`` sampler: a seeded random draw, excluding the evaluated document.

    With ``eval_doc`` it draws ``n + 1`` positions and drops every drawn document *equal* to the
    evaluated one (lm-eval compares rows, not positions), keeping the first ``n``; if duplicates of
    the row left fewer than ``n`` it redraws from the pool without them, as lm-eval does.
    """

    def __init__(self, pool: Sequence[Doc], *, seed: int | None, indices: Sequence[int] | None = None):
        self.pool = pool
        self.seed = seed
        # fewshot_indices narrow the pool; ids reported are still positions in the full pool
        self.ids: list[int] = list(indices) if indices else list(range(len(pool)))
        self._rnd: random.Random | None = None

    def _random(self) -> random.Random:
        if self._rnd is None:
            if self.seed is None:
                raise ConfigError(
                    "random few-shot sampling needs a seed: set fewshot_seed to an integer (lm-eval's "
                    f"default is {DEFAULT_FEWSHOT_SEED}); evalflow never draws examples unseeded, as "
                    "the cached prompts would not be reproducible"
                )
            self._rnd = random.Random(self.seed)
        return self._rnd

    def sample(self, n: int, eval_doc: Doc | None = None) -> tuple[int, ...]:
        """Ids (positions in the pool) of ``n`` examples for the next evaluated document."""
        if n <= 0:
            return ()
        rnd = self._random()
        if not eval_doc:
            return tuple(self._draw(rnd, self.ids, n))
        drawn = self._draw(rnd, self.ids, n + 1)
        kept = [i for i in drawn if self.pool[i] != eval_doc][:n]
        if len(kept) < n:
            others = [i for i in self.ids if self.pool[i] != eval_doc]
            kept = self._draw(rnd, others, n)
        return tuple(kept)

    def _draw(self, rnd: random.Random, ids: list[int], k: int) -> list[int]:
        if k > len(ids):
            raise TaskError(
                f"few-shot sampling needs {k} documents (num_fewshot plus one when the evaluated "
                f"document may be drawn) but the few-shot pool has {len(ids)}. Lower num_fewshot "
                "or point fewshot_split at a larger split."
            )
        return rnd.sample(ids, k)


class FirstNSampler(ContextSampler):
    """lm-eval's ``first_n``: the first ``n`` pool documents in order (MMLU's canonical dev shots)."""

    def sample(self, n: int, eval_doc: Doc | None = None) -> tuple[int, ...]:
        if n <= 0:
            return ()
        ids = [i for i in self.ids if self.pool[i] != eval_doc] if eval_doc is not None else self.ids
        if n > len(ids):
            raise TaskError(
                f"the first_n sampler was asked for {n} few-shot examples but only {len(ids)} are "
                "available. Lower num_fewshot or use a larger fewshot split."
            )
        return tuple(ids[:n])


SAMPLERS: dict[str, type[ContextSampler]] = {"default": ContextSampler, "first_n": FirstNSampler}


def make_sampler(
    name: str, pool: Sequence[Doc], *, seed: int | None, indices: Sequence[int] | None = None
) -> ContextSampler:
    """The sampler registered under ``name`` (a task's ``fewshot_config.sampler``)."""
    if name not in SAMPLERS:
        raise TaskError(
            f"fewshot_config.sampler '{name}' is not a known sampler; {closest(name, SAMPLERS)} "
            "Fix the sampler name in the task YAML."
        )
    if indices is not None:
        bad = [i for i in indices if not isinstance(i, int) or not 0 <= i < len(pool)]
        if bad:
            raise TaskError(
                f"fewshot_config.fewshot_indices {bad[:5]} are not positions in the few-shot pool of "
                f"{len(pool)} documents. Use indices from 0 to {len(pool) - 1}."
            )
    return SAMPLERS[name](pool, seed=seed, indices=indices)


@dataclass(frozen=True)
class FewshotOptions:
    """A task's effective ``fewshot_config``: its own keys over the task's values (lm-eval's
    ``FewshotConfig.from_dict``), so few-shot examples can be formatted unlike the question."""

    sampler: str
    split: str | None
    process_docs: Any
    fewshot_indices: tuple[int, ...] | None
    samples: Any
    doc_to_text: Any
    doc_to_choice: Any
    doc_to_target: Any
    gen_prefix: str | None
    fewshot_delimiter: str
    target_delimiter: str


FEWSHOT_CONFIG_KEYS = (  # every key a fewshot_config may hold, in the order lm-eval prints them
    "sampler",
    "split",
    "process_docs",
    "fewshot_indices",
    "samples",
    "doc_to_text",
    "doc_to_choice",
    "doc_to_target",
    "gen_prefix",
    "fewshot_delimiter",
    "target_delimiter",
)


def fewshot_options(task: TaskConfig) -> FewshotOptions:
    """Merge ``task.fewshot_config`` over the task fields it inherits from."""
    cfg = dict(task.fewshot_config or {})
    unknown = [k for k in cfg if k not in FEWSHOT_CONFIG_KEYS]
    if unknown:
        raise TaskError(
            f"task '{task.task}' ({task.source}): unknown fewshot_config key '{unknown[0]}'; "
            f"{closest(unknown[0], FEWSHOT_CONFIG_KEYS)} Fix or remove the key."
        )
    inherited = {
        "split": task.fewshot_split,
        "process_docs": task.process_docs,
        "fewshot_delimiter": task.fewshot_delimiter,
        "target_delimiter": task.target_delimiter,
        "gen_prefix": task.gen_prefix,
        "doc_to_text": task.doc_to_text,
        "doc_to_choice": task.doc_to_choice,
        "doc_to_target": task.doc_to_target,
        "sampler": "default",
        "fewshot_indices": None,
        "samples": None,
    }
    merged = {**inherited, **cfg}
    for key in ("fewshot_delimiter", "target_delimiter"):  # null in the YAML means "inherit"
        if merged[key] is None:
            merged[key] = inherited[key]
    indices = merged["fewshot_indices"]
    merged["fewshot_indices"] = tuple(indices) if indices is not None else None
    if isinstance(merged["samples"], list):
        merged["samples"] = tuple(merged["samples"])
    return FewshotOptions(**merged)


def fewshot_source(task: TaskConfig) -> tuple[str, Any] | None:
    """Where few-shot examples come from, in lm-eval's order.

    ``("split", name)`` for ``fewshot_config.split`` / ``fewshot_split``; ``("samples", value)``
    for ``fewshot_config.samples`` (a list of documents or a !function returning one); else the
    first of training, validation and test split that the task defines; ``None`` if none is.
    """
    opts = fewshot_options(task)
    if opts.split is not None:
        return ("split", opts.split)
    if opts.samples is not None:
        return ("samples", opts.samples)
    for split in (task.training_split, task.validation_split, task.test_split):
        if split is not None:
            return ("split", split)
    return None


def excludes_eval_doc(task: TaskConfig) -> bool:
    """Whether the evaluated document is removed from its own few-shot draw.

    lm-eval 0.4.13 excludes it exactly when ``fewshot_config.split == test_split``, so also when
    both are unset (tasks evaluated on validation that draw from the training split, such as
    winogrande and boolq), and not when the pool falls back to the test split without naming it.
    """
    return fewshot_options(task).split == task.test_split


def fewshot_warnings(task: TaskConfig, fewshot_split: str | None, num_fewshot: int) -> list[str]:
    """lm-eval's warnings about where few-shot examples come from (``api/task.py``
    ``fewshot_docs``), plus one for a split the task names but the data lacks, which evalflow skips
    where lm-eval would fail. ``fewshot_split`` is the split the examples really came from."""
    opts = fewshot_options(task)
    if num_fewshot <= 0 or opts.split is not None or opts.samples is not None:
        return []
    name = task.task
    out = [f"[Task: {name}] num_fewshot > 0 but fewshot_split is None. using preconfigured rule."]
    declared = next((s for s in (task.training_split, task.validation_split) if s is not None), None)
    if declared is not None and fewshot_split != declared:
        evaluated = ", the split being evaluated" if fewshot_split == task.eval_split else ""
        out.append(
            f"[Task: {name}] the task draws few-shot examples from split '{declared}', which the data does not "
            f"have; they come from split '{fewshot_split}' instead{evaluated}. Set fewshot_split (or add the split's "
            "file to the data map) to choose where they come from."
        )
    if fewshot_split is not None and fewshot_split == task.test_split:
        out.append(
            f"[Task: {name}] has_training_docs and has_validation_docs are False, using test_docs as "
            "fewshot_docs but this is not recommended."
        )
    return out
