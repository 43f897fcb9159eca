"""Inputs of the golden scoring cases; their expected values come from lm-eval (make_golden.py).

Each kind is a list of JSON-able cases. ``process`` cases are whole tasks after inference: per
document its doc, lm-eval's ``doc_to_target``/``doc_to_choice``/``doc_to_text`` values, and the raw
responses of each instance (a list of repeats); they run filters, per-document scoring and the task
aggregation. ``filters``, ``aggregations`` and ``groups`` cases exercise one component each.
"""

from __future__ import annotations

import random
from typing import Any

GSM8K_METRICS = [
    {
        "metric": "exact_match",
        "aggregation": "mean",
        "higher_is_better": True,
        "ignore_case": True,
        "ignore_punctuation": False,
        "regexes_to_ignore": [",", "\\$", "(?s).*#### ", "\\.$"],
    }
]
GSM8K_FILTERS = [
    {
        "name": "strict-match",
        "filter": [
            {"function": "regex", "regex_pattern": "#### (\\-?[0-9\\.\\,]+)"},
            {"function": "take_first"},
        ],
    },
    {
        "name": "flexible-extract",
        "filter": [
            {"function": "regex", "group_select": -1, "regex_pattern": "(-?[$0-9.,]{2,})|(-?[0-9]+)"},
            {"function": "take_first"},
        ],
    },
]
ANSWER_RX = "The answer is (\\-?[0-9\\.\\,]*[0-9]+)"
SELF_CONSISTENCY_FILTERS = [
    {
        "name": "score-first",
        "filter": [{"function": "regex", "regex_pattern": ANSWER_RX}, {"function": "take_first"}],
    },
    {
        "name": "maj@4",
        "filter": [
            {"function": "regex", "regex_pattern": ANSWER_RX},
            {"function": "majority_vote"},
            {"function": "take_first"},
        ],
    },
    {
        "name": "maj@2",
        "filter": [
            {"function": "take_first_k", "k": 2},
            {"function": "regex", "regex_pattern": ANSWER_RX},
            {"function": "majority_vote"},
            {"function": "take_first"},
        ],
    },
]

GSM8K_DOCS = [
    (
        "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n"
        "Natalia sold 48+24 = <<48+24=72>>72 clips altogether in April and May.\n#### 72",
        " Natalia sold 48 / 2 = 24 clips in May.\nAltogether she sold 48 + 24 = 72 clips.\n#### 72",
    ),
    (
        "Weng earns 12/60 = $<<12/60=0.2>>0.2 per minute.\n"
        "Working 50 minutes, she earned 0.2 x 50 = $<<0.2*50=10>>10.\n#### 10",
        " Weng earns $12 an hour, so for 50 minutes she earns 12 * 50 / 60 = $10.\nThe answer is $10.",
    ),
    (
        "In total he paid 1,200 + 34 = <<1200+34=1234>>1234 dollars.\n#### 1234",
        " He pays 1,200 + 34 = 1,234 dollars.\n#### 1,234",
    ),
    ("The temperature dropped by 5 degrees.\n#### -5", " It went from 3 to -2, a change of #### -5"),
    ("Betty needs 100 - 50 - 15 - 30 = <<100-50-15-30=5>>5 more.\n#### 5", ""),
    ("James writes 3*2*2 = 12 pages a week.\n#### 624", " I don't know how to solve this one."),
    (
        "#### 18",
        " Janet sells 16 - 3 - 4 = 9 duck eggs a day for $2 each: 9 * 2 = $18.\n#### 18.\n\nQuestion: next",
    ),
]


def _gen_doc(i: int, target: Any, text: str, **extra: Any) -> dict[str, Any]:
    return {"doc": {"id": i, **extra}, "target": target, "resps": [[text]]}


def _mc(
    i: int, target: Any, choices: list[str], lls: list[float], greedy: list[bool] | None = None, **kw: Any
) -> dict[str, Any]:
    greedy = greedy or [False] * len(lls)
    row = {
        "doc": {"id": i},
        "target": target,
        "choices": choices,
        "resps": [[[ll, g]] for ll, g in zip(lls, greedy)],
    }
    row.update(kw)
    return row


def _rng_lls(seed: int, n: int, k: int) -> list[list[float]]:
    rnd = random.Random(seed)
    return [[round(-rnd.uniform(0.5, 9.0), 6) for _ in range(k)] for _ in range(n)]


def process_cases() -> list[dict[str, Any]]:
    arc = ["a dog", "the ocean", "photosynthesis", "a rock"]
    binary = [
        _mc(i, i % 2, ["no", "yes"], lls, [lls[0] > lls[1], lls[1] >= lls[0]])
        for i, lls in enumerate(_rng_lls(1, 24, 2))
    ]
    three = [_mc(i, i % 3, ["A", "B", "C"], lls) for i, lls in enumerate(_rng_lls(2, 30, 3))]
    return [
        {
            "id": "mc_default",
            "output_type": "multiple_choice",
            "docs": [
                _mc(0, 2, arc, [-5.0, -4.0, -9.0, -6.0], [False, True, False, False]),
                _mc(1, 0, arc, [-3.0, -3.0, -8.0, -3.0]),  # tie: argmax takes the first
                _mc(2, "photosynthesis", arc, [-10.0, -11.0, -12.0, -20.0]),  # string target; acc_norm differs
                _mc(3, 7, arc, [-1.0, -2.0, -3.0, -4.0]),  # label outside the choices: -100
                _mc(4, 1, ["é", "ee"], [-2.0, -2.1], [True, False]),  # chars vs bytes
                _mc(5, 1, arc, [float("nan"), -1.0, -2.0, -3.0]),  # NaN: numpy argmax picks it
            ],
        },
        {
            "id": "mc_all_metrics",
            "output_type": "multiple_choice",
            "metric_list": [{"metric": m} for m in ("acc", "acc_norm", "acc_bytes", "exact_match", "brier_score")],
            "docs": [
                _mc(0, 1, ["ü", "uu", "abc"], [-3.0, -2.5, -4.0], [False, True, False]),
                _mc(1, 0, ["ü", "uu", "abc"], [-3.0, -3.2, -8.0], [True, False, False]),
                _mc(2, 2, ["ü", "uu", "abc"], [-9.0, -9.5, -8.75], [False, False, True]),
            ],
        },
        {
            "id": "mc_likelihood_rows",
            "output_type": "multiple_choice",
            "aggregate": False,
            "metric_list": [{"metric": "likelihood"}, {"metric": "acc"}],
            "docs": [_mc(0, 1, ["x", "y"], [-1.25, -0.5])],
        },
        {
            "id": "mc_f1_binary",
            "output_type": "multiple_choice",
            "bootstrap_iters": 2000,
            "slow": True,
            "metric_list": [{"metric": "f1"}, {"metric": "mcc"}, {"metric": "acc"}],
            "docs": binary,
        },
        {
            "id": "mc_mcc_three_way",
            "output_type": "multiple_choice",
            "bootstrap_iters": 1500,
            "slow": True,
            "metric_list": [
                {"metric": "mcc"},
                {"metric": "acc_norm", "aggregation": "median", "higher_is_better": True},
            ],
            "docs": three,
        },
        {
            "id": "mc_mutual_info",
            "output_type": "multiple_choice",
            "metric_list": [{"metric": "acc"}, {"metric": "acc_mutual_info"}],
            "docs": [
                {
                    **_mc(0, 1, ["red", "blue"], [-4.0, -4.5]),
                    "resps": [[[-4.0, False]], [[-4.5, False]], [[-2.0, False]], [[-3.0, False]]],
                },
                {
                    **_mc(1, 0, ["red", "blue"], [-4.0, -4.5]),
                    "resps": [[[-4.0, True]], [[-6.0, False]], [[-5.0, False]], [[-1.0, False]]],
                },
            ],
        },
        {
            "id": "mc_multiple_target",
            "output_type": "multiple_choice",
            "metric_list": [{"metric": "acc"}, {"metric": "acc_norm"}, {"metric": "exact_match"}],
            "docs": [
                _mc(0, [0, 2], arc, [-4.0, -5.0, -3.0, -6.0], [False, False, True, False]),
                _mc(1, [1, 9], arc, [-4.0, -5.0, -3.0, -6.0], [False, False, True, False]),
            ],
        },
        {
            "id": "mc_multiple_input",
            "output_type": "multiple_choice",  # winogrande: gold = doc_to_text
            "docs": [
                _mc(0, "went to the store.", ["Sarah", "Maria"], [-12.0, -11.0], text=1),
                _mc(1, "was hungry.", ["The cat", "The dog"], [-8.0, -9.0], text=1),
            ],
        },
        {
            "id": "loglikelihood_default",
            "output_type": "loglikelihood",
            "docs": [
                {"doc": {"id": i}, "target": " end", "resps": [[[ll, g]]]}
                for i, (ll, g) in enumerate([(-0.5, True), (-3.25, False), (-1.0, True), (-7.5, False)])
            ],
        },
        {
            "id": "rolling_default",
            "output_type": "loglikelihood_rolling",
            "docs": [
                {
                    "doc": {"id": 0},
                    "target": "The quick brown fox\njumps over  the lazy dog.",
                    "resps": [[-48.5]],
                },
                {"doc": {"id": 1}, "target": "Ünïcödé text — with dashes.", "resps": [[-60.25]]},
                {"doc": {"id": 2}, "target": " leading space", "resps": [[-20.0]]},
            ],
        },
        {
            "id": "gsm8k",
            "output_type": "generate_until",
            "metric_list": GSM8K_METRICS,
            "filter_list": GSM8K_FILTERS,
            "docs": [_gen_doc(i, target, text) for i, (target, text) in enumerate(GSM8K_DOCS)],
        },
        {
            "id": "gsm8k_self_consistency",
            "output_type": "generate_until",
            "metric_list": GSM8K_METRICS,
            "filter_list": SELF_CONSISTENCY_FILTERS,
            "docs": [
                {
                    "doc": {"id": 0},
                    "target": "#### 72",
                    "resps": [[" The answer is 70.", " The answer is 72.", " The answer is 72.", " no idea"]],
                },
                {
                    "doc": {"id": 1},
                    "target": "#### 10",
                    "resps": [
                        [
                            " The answer is 10.",
                            " The answer is 12.",
                            " The answer is 12.",
                            " The answer is 10.",
                        ]
                    ],
                },
                {
                    "doc": {"id": 2},
                    "target": "#### 5",
                    "resps": [["", " hmm", " The answer is 1,005.", " The answer is 5."]],
                },
            ],
        },
        {
            "id": "generate_default",
            "output_type": "generate_until",
            "docs": [
                _gen_doc(0, "Paris", "Paris"),
                _gen_doc(1, "Paris", " Paris"),
                _gen_doc(2, 42, "42"),  # int target cast to str
                _gen_doc(3, "", ""),
                _gen_doc(4, "yes", "Yes"),
            ],
        },
        {
            "id": "generate_exact_match_options",
            "output_type": "generate_until",
            "metric_list": [
                {
                    "metric": "exact_match",
                    "ignore_case": True,
                    "ignore_punctuation": True,
                    "ignore_numbers": True,
                }
            ],
            "docs": [
                _gen_doc(0, "Hello, World!", "hello world"),
                _gen_doc(1, "abc123", "ABC"),
                _gen_doc(2, "x", "y"),
            ],
        },
        {
            "id": "generate_doc_to_choice",
            "output_type": "generate_until",
            "docs": [
                {**_gen_doc(0, 1, "beta"), "choices": ["alpha", "beta"]},
                {**_gen_doc(1, 0, "beta"), "choices": ["alpha", "beta"]},
            ],
        },
        {
            "id": "generate_multiple_target",
            "output_type": "generate_until",
            "metric_list": [{"metric": "exact_match", "ignore_case": True}],
            "docs": [
                _gen_doc(0, ["Paris", "paris, france"], "PARIS"),
                _gen_doc(1, ["Rome"], "Milan"),
                _gen_doc(2, ["a", "b"], "b"),
            ],
        },
        {
            "id": "generate_multiple_target_bleu_rows",
            "output_type": "generate_until",
            "aggregate": False,
            "metric_list": [{"metric": "exact_match"}, {"metric": "bleu"}],
            "docs": [_gen_doc(0, ["the cat sat", "a cat sat"], "the cat sat"), _gen_doc(1, ["dog"], "")],
        },
        {
            "id": "generate_translation",
            "output_type": "generate_until",
            "metric_list": [{"metric": m} for m in ("bleu", "chrf", "chrf++", "ter", "exact_match")],
            "docs": [
                _gen_doc(i, ref, hyp)
                for i, (ref, hyp) in enumerate(
                    [
                        ("The cat is on the mat.", "The cat sits on the mat."),
                        ("There is a dog in the garden.", "A dog is in the garden."),
                        ("I would like a cup of coffee, please.", "I would like coffee please."),
                        ("She reads a book every evening.", "She reads a book each evening."),
                        ("We are going to the beach tomorrow.", "Tomorrow we go to the beach."),
                        ("It rained all day yesterday.", "Yesterday it rained the whole day."),
                    ]
                )
            ],
        },
        {
            "id": "generate_no_take_first",
            "output_type": "generate_until",
            "filter_list": [{"name": "lower", "filter": [{"function": "lowercase"}]}],
            "metric_list": [{"metric": "exact_match"}],
            "aggregate": False,
            "docs": [_gen_doc(0, "abc", "ABC"), _gen_doc(1, "x", "X")],
        },
    ]


def filter_cases() -> list[dict[str, Any]]:
    gens = [[text] for _, text in GSM8K_DOCS] + [[None], ["$1,234.50 and then 7"]]
    mc_docs = [{"choices": ["Guilty", "Guilty of Romance", "Innocent"]}] * 5
    return [
        {"id": "gsm8k_pipelines", "filter_list": GSM8K_FILTERS, "resps": gens, "docs": [{}] * len(gens)},
        {
            "id": "regex_fallback_and_groups",
            "resps": [["x = 3"], ["nothing"], [""], ["a: , b: 5"]],
            "docs": [{}] * 4,
            "filter_list": [
                {
                    "name": "custom_fallback",
                    "filter": [
                        {"function": "regex", "regex_pattern": "= (\\d+)", "fallback": "NONE"},
                        {"function": "take_first"},
                    ],
                },
                {
                    "name": "empty_groups",
                    "filter": [
                        {"function": "regex", "regex_pattern": "a: (\\d*)|b: (\\d*)"},
                        {"function": "take_first"},
                    ],
                },
                {"name": "keep_lists", "filter": [{"function": "regex", "regex_pattern": "(\\d)"}]},
            ],
        },
        {
            "id": "self_consistency",
            "filter_list": SELF_CONSISTENCY_FILTERS,
            "docs": [{}] * 2,
            "resps": [
                [" The answer is 3.", " The answer is 4.", " The answer is 4.", "x"],
                ["a", "b", " The answer is 1.", " The answer is 1."],
            ],
        },
        {
            "id": "multi_choice_regex",
            "docs": mc_docs,
            "resps": [
                ["The answer is (C)."],
                ["I pick guilty of romance!"],
                ["Answer: B"],
                ["no idea"],
                ["it is INNOCENT"],
            ],
            "filter_list": [
                {
                    "name": "plain",
                    "filter": [
                        {"function": "multi_choice_regex", "regex_pattern": "(\\([A-C]\\))"},
                        {"function": "take_first"},
                    ],
                },
                {
                    "name": "loose",
                    "filter": [
                        {
                            "function": "multi_choice_regex",
                            "regex_pattern": "(\\([A-C]\\))",
                            "ignore_case": True,
                            "ignore_punctuation": True,
                            "regexes_to_ignore": ["the answer is"],
                        },
                        {"function": "take_first"},
                    ],
                },
            ],
        },
        {
            "id": "text_transforms",
            "docs": [{}] * 2,
            "resps": [["  Mixed Case \n", "Other"], ["\tB ", "c"]],
            "filter_list": [
                {
                    "name": "ws_lower",
                    "filter": [
                        {"function": "remove_whitespace"},
                        {"function": "lowercase"},
                        {"function": "take_first"},
                    ],
                },
                {"name": "upper_all", "filter": [{"function": "uppercase"}]},
                {"name": "first2", "filter": [{"function": "take_first_k", "k": 2}]},
            ],
        },
        {
            "id": "polemo2_map_chain",
            "docs": [{}] * 3,
            "resps": [["Answer: B"], ["D is right"], ["none"]],
            "filter_list": [
                {
                    "name": "score",
                    "filter": [
                        {"function": "regex", "regex_pattern": "(\\b[ABCD]\\b)"},
                        {"function": "take_first"},
                        {
                            "function": "map",
                            "mapping_dict": {"A": 0, "B": 1, "C": 2, "D": 3},
                            "default_value": -1,
                        },
                        {"function": "take_first"},
                    ],
                }
            ],
        },
    ] + tagging_filter_cases()


def tagging_filter_cases() -> list[dict[str, Any]]:
    """regex_pos (POS tags) and format_span (named-entity spans), lm-eval's tagging filters."""
    return [
        {
            "id": "regex_pos",
            "docs": [{}] * 4,
            "resps": [
                ["[('The', 'DET'), ('cat', 'NOUN'), ('sat', 'VERB')]", "('x', 'X')"],
                ["no tagged tokens here"],
                ["[(\"it's\", 'PRON'), ('ok', 'ADJ')]"],
                [""],
            ],
            "filter_list": [
                {"name": "pos", "filter": [{"function": "regex_pos"}, {"function": "take_first"}]},
                {"name": "pos_fallback", "filter": [{"function": "regex_pos", "fallback": ["NONE"]}]},
            ],
        },
        {
            "id": "format_span",
            "docs": [{}] * 5,
            "resps": [
                ["Person: Ada Lovelace $$ Location: London, Paris"],
                ["PER: none\nORG: Acme Corp, none\ndate: 1843"],
                ["Organization: UN $$ Country: Kenya, Uganda $$ Time: Monday $$"],
                ["nothing tagged"],
                ["persons: Bob $$ company: per: X"],
            ],
            "filter_list": [
                {"name": "spans", "filter": [{"function": "format_span"}, {"function": "take_first"}]},
            ],
        },
    ]


def aggregation_cases() -> list[dict[str, Any]]:
    rnd = random.Random(7)
    floats = [round(rnd.gauss(0.0, 1.0), 6) for _ in range(41)]
    lls = [round(-rnd.uniform(0.1, 3.0), 6) for _ in range(60)]
    pairs = [[rnd.randint(0, 1), rnd.randint(0, 1)] for _ in range(50)]
    multi = [[rnd.randint(0, 3), rnd.randint(0, 3)] for _ in range(45)]
    weighted = [[-rnd.uniform(10, 80), rnd.randint(5, 40)] for _ in range(8)]
    refs = [
        "the cat sat on the mat",
        "a quick brown fox",
        "hello there general kenobi",
        "we will rock you",
        "it is raining",
    ]
    hyps = [
        "the cat sat on a mat",
        "the quick brown fox",
        "hello there",
        "we will we will rock you",
        "it rains",
    ]
    probs = [[0, [0.7, 0.2, 0.1]], [2, [0.1, 0.3, 0.6]], [1, [0.5, 0.4, 0.1]]]
    return [
        {"aggregation": "mean", "items": [1.0, 0.0, 1.0, 1.0, 0.0]},
        {"aggregation": "mean", "items": [1.0]},  # one item: stderr N/A
        {"aggregation": "mean", "items": [1.0, float("nan"), 0.0]},
        {"aggregation": "median", "items": floats, "iters": 3000},
        {"aggregation": "median", "items": floats[:10], "iters": 500},
        {"aggregation": "perplexity", "items": lls, "iters": 2000},
        {"aggregation": "weighted_perplexity", "items": weighted},
        {"aggregation": "bits_per_byte", "items": weighted},
        {"aggregation": "f1", "items": pairs, "iters": 3000, "slow": True},
        {
            "aggregation": "f1",
            "items": [[0, 0], [0, 0], [0, 0]],
            "iters": 100,
            "slow": True,
        },  # no positives: 0.0
        {"aggregation": "matthews_corrcoef", "items": pairs, "iters": 3000, "slow": True},
        {"aggregation": "matthews_corrcoef", "items": multi, "iters": 1500, "slow": True},
        {
            "aggregation": "matthews_corrcoef",
            "items": [[1, 1], [1, 1]],
            "iters": 100,
            "slow": True,
        },  # constant: 0.0
        {"aggregation": "nanmean", "items": [1.0, float("nan"), 0.5, 0.25], "iters": 1000},
        {"aggregation": "bleu", "items": [[r, h] for r, h in zip(refs, hyps)], "iters": 100},
        {"aggregation": "chrf", "items": [[r, h] for r, h in zip(refs, hyps)], "iters": 100},
        {"aggregation": "chrf++", "items": [[r, h] for r, h in zip(refs, hyps)], "iters": 100},
        {"aggregation": "ter", "items": [[r, h] for r, h in zip(refs, hyps)], "iters": 100},
        {"aggregation": "brier_score", "items": probs},
        {"aggregation": "mean", "items": [0.5, 0.25], "iters": 0},  # bootstrap_iters 0: N/A
        {"aggregation": "median", "items": [3.0, 1.0], "iters": 0},
    ]


def group_cases() -> list[dict[str, Any]]:
    a = (
        {"acc,none": 0.5, "acc_stderr,none": 0.05, "acc_norm,none": 0.55, "acc_norm_stderr,none": 0.049},
        100,
    )
    b = ({"acc,none": 0.8, "acc_stderr,none": 0.02, "acc_norm,none": 0.7, "acc_norm_stderr,none": "N/A"}, 400)
    c = (
        {
            "acc,none": 0.3,
            "acc_stderr,none": 0.1,
            "exact_match,strict-match": 0.25,
            "exact_match_stderr,strict-match": 0.04,
            "exact_match,flexible-extract": 0.4,
            "exact_match_stderr,flexible-extract": 0.045,
        },
        25,
    )
    d = (
        {
            "exact_match,strict-match": 0.6,
            "exact_match_stderr,strict-match": 0.03,
            "exact_match,flexible-extract": 0.65,
            "exact_match_stderr,flexible-extract": 0.031,
        },
        250,
    )
    return [
        {
            "group": "weighted",
            "aggregate_metric_list": [{"metric": "acc", "weight_by_size": True}],
            "members": [a, b, c],
        },
        {
            "group": "unweighted",
            "aggregate_metric_list": [{"metric": "acc", "weight_by_size": False}],
            "members": [a, b, c],
        },
        {"group": "stderr_na", "aggregate_metric_list": [{"metric": "acc_norm"}], "members": [a, b]},
        {
            "group": "discover_filters",
            "aggregate_metric_list": [{"metric": "exact_match"}],
            "members": [c, d],
        },
        {
            "group": "explicit_filter",
            "aggregate_metric_list": [
                {"metric": "exact_match", "filter_list": ["strict-match"], "weight_by_size": False},
                {"metric": "acc", "filter_list": "none"},
            ],
            "members": [a, c, d],
        },
        {
            "group": "missing_metric",
            "aggregate_metric_list": [{"metric": "acc_norm", "filter_list": ["none"]}],
            "members": [c, d],
        },
    ]


def decontamination_cases() -> list[dict[str, Any]]:
    """doc_to_decontamination_query (field, default doc_to_text, literal template) and the n-gram
    overlap of the queries with a small training set (normalization: case and punctuation)."""
    docs = [
        {"question": "What is the capital city of France today?", "passage": "Paris, of course!"},
        {"question": "How many legs does a spider have?", "passage": "Eight."},
        {"question": "Name a primary colour.", "passage": "Red is one; BLUE is another."},
        {"question": "Short one", "passage": "x"},
    ]
    train = sorted(["capital city of 17", "does a spider 3", "blue is another 9", "red is two 4"])
    return [
        {
            "id": "field",
            "docs": docs,
            "doc_to_text": "Q: {{question}}",
            "query": "question",
            "ngram_size": 3,
            "train_ngrams": train,
        },
        {
            "id": "default_text",
            "docs": docs,
            "doc_to_text": "{{question}} {{passage}}",
            "query": None,
            "ngram_size": 3,
            "train_ngrams": train,
        },
        {
            "id": "literal_template",
            "docs": docs,
            "doc_to_text": "Q",
            "query": "{{passage|tojson}}",
            "ngram_size": 3,
            "train_ngrams": train,
        },
    ]


CASES = {
    "decontamination": decontamination_cases,
    "process": process_cases,
    "filters": filter_cases,
    "aggregations": aggregation_cases,
    "groups": group_cases,
}
