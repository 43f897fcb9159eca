"""Filter pipelines: lm-eval's semantics on hand-made responses, and the errors a task author can hit."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalflow.errors import DataError, TaskError
from evalflow.scoring import FILTERS, build_pipelines, register_filter
from evalflow.taskspec.format.spec import FunctionRef

STRICT = [{"function": "regex", "regex_pattern": "#### (\\-?[0-9\\.\\,]+)"}, {"function": "take_first"}]
FLEXIBLE = [
    {"function": "regex", "group_select": -1, "regex_pattern": "(-?[$0-9.,]{2,})|(-?[0-9]+)"},
    {"function": "take_first"},
]


def _apply(steps: list[dict], resps: list[list], docs: list[dict] | None = None) -> tuple:
    (pipeline,) = build_pipelines([{"name": "p", "filter": steps}])
    return pipeline.apply(resps, docs if docs is not None else [{}] * len(resps))


def test_default_pipeline_is_none_take_first() -> None:
    (pipeline,) = build_pipelines(None)
    assert pipeline.name == "none"
    assert pipeline.apply([["a", "b"], [(-1.0, True)]], [{}, {}]) == ("a", (-1.0, True))


def test_gsm8k_strict_and_flexible_on_realistic_generations() -> None:
    generations = [
        [" 48 / 2 = 24 clips in May.\nAltogether 48 + 24 = 72.\n#### 72"],
        [" so for 50 minutes she earns 12 * 50 / 60 = $10.\nThe answer is $10."],
        [""],  # empty generation
        [" I don't know how to solve this one."],
        [" He pays 1,200 + 34 = 1,234 dollars.\n#### 1,234"],
    ]
    assert _apply(STRICT, generations) == ("72", "[invalid]", "[invalid]", "[invalid]", "1,234")
    assert _apply(FLEXIBLE, generations) == ("72", "$10.", "[invalid]", "[invalid]", "1,234")


def test_regex_custom_fallback_tuple_groups_and_non_string() -> None:
    steps = [
        {"function": "regex", "regex_pattern": "a: (\\d*)|b: (\\d*)", "fallback": "NONE"},
        {"function": "take_first"},
    ]
    # first match's groups are all empty -> fallback; a None response is treated as ""
    assert _apply(steps, [["a: , b: 5"], ["b: 7"], [None]]) == ("NONE", "7", "NONE")


def test_regex_group_select_out_of_range_names_the_fix() -> None:
    steps = [{"function": "regex", "regex_pattern": "(\\d)", "group_select": 3}]
    with pytest.raises(TaskError, match="group_select=3"):
        _apply(steps, [["1 2"]])


def test_without_take_first_values_stay_lists() -> None:
    assert _apply([{"function": "lowercase"}], [["A", "B"], ["C"]]) == (["a", "b"], ["c"])


def test_majority_vote_ties_go_to_first_seen() -> None:
    steps = [{"function": "majority_vote"}, {"function": "take_first"}]
    assert _apply(steps, [["3", "4", "4", "3"], ["x", "y", "y"]]) == ("3", "y")


def test_take_first_k_needs_enough_repeats() -> None:
    assert _apply([{"function": "take_first_k", "k": 2}], [["a", "b", "c"]]) == (["a", "b"],)
    with pytest.raises(TaskError, match="repeats"):
        _apply([{"function": "take_first_k", "k": 4}], [["a", "b"]])


def test_map_iterates_like_lm_eval_after_take_first() -> None:
    steps = [
        {"function": "regex", "regex_pattern": "(\\b[ABCD]\\b)"},
        {"function": "take_first"},
        {"function": "map", "mapping_dict": {"A": 0, "B": 1}, "default_value": -1},
        {"function": "take_first"},
    ]
    assert _apply(steps, [["Answer: B"], ["nothing"]]) == (1, -1)


def test_multi_choice_regex_prefers_longest_choice_and_letters() -> None:
    docs = [{"choices": ["Guilty", "Guilty of Romance", "Innocent"]}] * 3
    steps = [
        {"function": "multi_choice_regex", "regex_pattern": "(\\([A-C]\\))", "ignore_case": True},
        {"function": "take_first"},
    ]
    assert _apply(steps, [["it is guilty of romance"], ["Answer: C"], ["(A) clearly"]], docs) == (
        "(B)",
        "(C)",
        "(A)",
    )


def test_multi_choice_regex_without_choices_is_a_data_error() -> None:
    with pytest.raises(DataError, match="choices"):
        _apply([{"function": "multi_choice_regex"}], [["x"]], [{"question": "q"}])


def test_unknown_filter_suggests_the_closest_name() -> None:
    with pytest.raises(TaskError, match="did you mean 'take_first'"):
        build_pipelines([{"name": "p", "filter": [{"function": "take_frist"}]}])


@pytest.mark.parametrize(
    ("filter_list", "message"),
    [
        ([], "filter_list is empty"),
        ([{"name": "p"}], "'name' and 'filter'"),
        ([{"name": "p", "filter": []}], "non-empty list"),
        ([{"name": "p", "filter": [{"regex_pattern": "x"}]}], "'function' key"),
        (
            [{"name": "p", "filter": [{"function": "regex", "regex_patern": "x"}]}],
            "cannot take these options",
        ),
        (
            [{"name": "p", "filter": [{"function": "regex", "regex_pattern": "(unclosed"}]}],
            "not a valid regular expression",
        ),
        ([{"name": "p", "filter": STRICT}, {"name": "p", "filter": STRICT}], "twice"),
    ],
)
def test_malformed_filter_lists_are_refused(filter_list: list, message: str) -> None:
    with pytest.raises(TaskError, match=message):
        build_pipelines(filter_list)


def test_filter_returning_wrong_count_is_refused() -> None:
    @register_filter("test_drop_one")
    def drop_one(resps: list, docs: list) -> list:
        return resps[1:]

    with pytest.raises(TaskError, match="returned 1 values for 2 instances"):
        _apply([{"function": "test_drop_one"}], [["a"], ["b"]])


def test_user_registered_filter_function_and_class() -> None:
    @register_filter("test_strip_dots")
    def strip_dots(resps: list, docs: list, *, chars: str = ".") -> list:
        return [[r.strip(chars) for r in inst] for inst in resps]

    @register_filter("test_prefix_class")
    class Prefix:  # lm-eval's Filter protocol: options in __init__, apply(resps, docs)
        def __init__(self, prefix: str) -> None:
            self.prefix = prefix

        def apply(self, resps: list, docs: list) -> list:
            return [[self.prefix + r for r in inst] for inst in resps]

    steps = [
        {"function": "test_strip_dots", "chars": ".!"},
        {"function": "test_prefix_class", "prefix": ">"},
        {"function": "take_first"},
    ]
    assert _apply(steps, [["..hi!"], ["ok."]]) == (">hi", ">ok")
    assert "test_strip_dots" in FILTERS.names()
    with pytest.raises(TaskError, match="cannot take these options"):
        build_pipelines([{"name": "p", "filter": [{"function": "test_prefix_class"}]}])


def test_custom_filter_and_function_step_resolve_function_refs(tmp_path: Path) -> None:
    module = tmp_path / "utils.py"
    module.write_text(
        "def build(resps, docs):\n"
        "    return [[d['prompt'] + r for r in inst] for inst, d in zip(resps, docs)]\n"
        "class Upper:\n"
        "    def __init__(self, suffix=''):\n"
        "        self.suffix = suffix\n"
        "    def apply(self, resps, docs):\n"
        "        return [[r.upper() + self.suffix for r in inst] for inst in resps]\n"
    )
    build = FunctionRef(module_path=str(module), attr="build", source_hash="")
    upper = FunctionRef(module_path=str(module), attr="Upper", source_hash="")
    steps = [
        {"function": "custom", "filter_fn": build},
        {"function": upper, "suffix": "!"},
        {"function": "take_first"},
    ]
    assert _apply(steps, [["b"], ["d"]], [{"prompt": "a"}, {"prompt": "c"}]) == ("AB!", "CD!")


def test_registering_a_different_filter_under_a_builtin_name_is_refused() -> None:
    with pytest.raises(TaskError, match="already registered"):
        register_filter("regex")(lambda resps, docs: resps)
