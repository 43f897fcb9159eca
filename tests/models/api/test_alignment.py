"""The alignment check on answers shaped like the stock and the fixed llama.cpp server's (measured
on SmolLM2: ``../shared/serve/README.md``), and the client's progress line."""

from __future__ import annotations

import pytest

from evalflow.models.api import alignment
from evalflow.models.api.alignment import PROMPT, MisalignedLogprobs

COMPLETION = {
    "choices": [
        {
            "text": " Paris",
            "logprobs": {
                "tokens": [" Paris"],
                "token_logprobs": [-0.2644],
                "top_logprobs": [{" Paris": -0.2644, " the": -2.80}],
            },
        }
    ]
}
OFFSETS = [0, 3, 11, 14, 21, 24]


def echo(values, offsets):
    tokens = ["The", " capital", " of", " France", " is", " Paris", "."][: len(values)]
    return {"choices": [{"logprobs": {"text_offset": offsets, "token_logprobs": values, "tokens": tokens}}]}


def test_the_generated_token_and_its_logprob():
    assert alignment.generated_token(COMPLETION, "u") == (" Paris", -0.2644)


def test_a_fixed_server_passes():
    fixed = echo([None, -11.45, -0.41, -2.52, -0.43, -0.2644, -0.376], OFFSETS + [len(PROMPT + " Paris")])
    alignment.check_echo(fixed, " Paris", -0.2644, "u")


def test_a_shifted_server_is_refused_with_what_is_wrong():
    stock = echo([None, -9.60, -10.46, -11.23, -11.79, -8.69], OFFSETS)  # llama-cpp-python 0.3.36, no BOS
    with pytest.raises(MisalignedLogprobs, match=r"misaligned .* -8\.690 when echoing, but -0\.264 when generating"):
        alignment.check_echo(stock, " Paris", -0.2644, "u")


def test_a_server_dropping_the_generated_token_is_refused():
    values = [None, -11.45, -0.41, -2.52, -0.43, -0.2644]
    with pytest.raises(MisalignedLogprobs, match="leaves the generated token out"):
        alignment.check_echo(echo(values, OFFSETS), " Paris", -0.2644, "u")


def test_without_offsets_the_position_comes_from_the_token_texts():
    fixed = echo([None, -11.45, -0.41, -2.52, -0.43, -0.2644, -0.376], None)
    alignment.check_echo(fixed, " Paris", -0.2644, "u")
    with pytest.raises(MisalignedLogprobs):
        alignment.check_echo(fixed, " Paris", -3.0, "u")


def test_a_server_without_logprobs_cannot_be_checked():
    with pytest.raises(MisalignedLogprobs, match="without token_logprobs"):
        alignment.generated_token({"choices": [{"text": " Paris", "logprobs": None}]}, "u")
