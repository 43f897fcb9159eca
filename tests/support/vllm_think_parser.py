"""A vLLM reasoning parser for tests, loaded by ``vllm serve --reasoning-parser-plugin THIS_FILE
--reasoning-parser text_think`` (tests/support/vllm_side.py): it splits a chat answer on the TEXT
``<think>``…``</think>``, so SmolLM2, whose vocabulary has no thinking tokens (vLLM's deepseek_r1
and qwen3 parsers refuse to start on it), can be served as a reasoning model. A request's
``structured_outputs: {regex: ...}`` forces the thinking shape.

An answer without ``<think>`` is all content (``(None, text)``), so requests that do not ask for
the shape are served exactly as without the parser. ``is_reasoning_end`` is always True: vLLM
applies a request's structured-output grammar only after the reasoning ends, and here the grammar
must shape the thinking too. Non-streaming only (evalflow does not stream): a streamed answer is
all content. Runs inside the side venv's server process; nothing in evalflow imports it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from vllm.entrypoints.generate.base.protocol import DeltaMessage
from vllm.reasoning import ReasoningParser, ReasoningParserManager

START, END = "<think>", "</think>"


class TextThinkParser(ReasoningParser):
    def is_reasoning_end(self, input_ids: Sequence[int]) -> bool:
        return True

    def is_reasoning_end_streaming(self, input_ids: Sequence[int], delta_ids: Iterable[int]) -> bool:
        return True

    def extract_content_ids(self, input_ids: list[int]) -> list[int]:
        return input_ids

    def extract_reasoning(self, model_output: str, request: Any) -> tuple[str | None, str | None]:
        """(reasoning, content): the text inside the markers and the text after the closing one;
        an unclosed thinking is all reasoning (content None), as vLLM's deepseek_r1 parser has it."""
        _, start, rest = model_output.partition(START)
        if not start:
            return None, model_output
        reasoning, end, content = rest.partition(END)
        return reasoning, (content if end else None)

    def extract_reasoning_streaming(
        self,
        previous_text: str,
        current_text: str,
        delta_text: str,
        previous_token_ids: Sequence[int],
        current_token_ids: Sequence[int],
        delta_token_ids: Sequence[int],
    ) -> DeltaMessage | None:
        return DeltaMessage(content=delta_text) if delta_text else None

    def count_reasoning_tokens(self, token_ids: Sequence[int]) -> int:
        """The generated tokens up to and including the one that completes ``</think>`` (all of
        them while the thinking is unclosed); 0 without ``<think>``. Decoded prefix by prefix, as
        the markers are several tokens each in SmolLM2's vocabulary."""
        decode = self.model_tokenizer.decode
        if START not in decode(list(token_ids)):
            return 0
        for n in range(1, len(token_ids) + 1):
            if END in decode(list(token_ids[:n])):
                return n
        return len(token_ids)


ReasoningParserManager.register_module("text_think", module=TextThinkParser)
