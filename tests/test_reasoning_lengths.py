"""Reasoning and query lengths for DeepRetrieval Fig. 4 (qrlib.methods.deepretrieval.reasoning)."""
from __future__ import annotations

import json
import math
import time

import pandas as pd
import pytest

from qrlib.core.errors import QrlibError
from qrlib.methods.deepretrieval import reasoning as R

THINK = "deepretrieval"
NOTHINK = "deepretrieval-nothink"


@pytest.mark.parametrize("text, reasoning, query", [
    ('<think>who wrote it; then where</think>\n<answer>{"query": "author birthplace novel"}</answer>',
     5, 3),
    # <think> in the prompt's prefill: the completion starts inside the block
    (' the film, then its director</think><answer>{"query": "film director"}</answer>', 5, 2),
    # a chain cut by the token budget is reasoning, and no query can be read
    ("<think>a long chain that never closes", 6, None),
    ('<think>a b<answer>{"query": "q"}</answer>', 2, 1),
])
def test_reasoning_and_query_words_of_think_completions(text, reasoning, query):
    got = R.lengths(text, THINK)
    assert got["reasoning words"] == reasoning
    assert (math.isnan(got["query words"]) if query is None else got["query words"] == query)


def test_a_completion_without_reasoning_has_zero_reasoning_words():
    got = R.lengths('<answer> {"query": "City where SS was formed"} </answer>', NOTHINK)
    assert (got["reasoning words"], got["query words"]) == (0.0, 5.0)
    assert math.isnan(got["echo"])  # no example chain given


def test_a_non_string_completion_is_a_one_line_error():
    with pytest.raises(QrlibError, match="must be a string"):
        R.lengths(None, THINK)


def test_hostile_completions_stay_linear():
    text = "<think>" + "</think " * 200_000  # no closing tag, 1.6 MB
    t0 = time.perf_counter()
    R.lengths(text, THINK)
    R.lengths("<answer>" * 200_000, NOTHINK)
    assert time.perf_counter() - t0 < 20  # a quadratic scan would take hours


def _samples(tmp_path, rows):
    path = tmp_path / "samples.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_length_curves_average_each_step_and_skip_unreadable_queries(tmp_path):
    path = _samples(tmp_path, [
        {"step": 1, "reward": 1.0, "completion": '<think>a b c d</think><answer>{"query": "x y"}</answer>'},
        {"step": 1, "reward": -3.5, "completion": "<think>a b"},
        {"step": 2, "reward": 5.0, "completion": '<think>a</think><answer>{"query": "x y z w"}</answer>'},
    ])
    cur = R.length_curves(R.sample_lengths(path, THINK))
    assert list(cur.step) == [1, 2] and list(cur.samples) == [2, 1]
    assert list(cur["reasoning words"]) == [3.0, 1.0]  # (4 + 2) / 2, 1
    assert list(cur["query words"]) == [2.0, 4.0]  # the cut chain has no query: left out


def test_a_malformed_samples_file_names_the_line(tmp_path):
    path = tmp_path / "samples.jsonl"
    path.write_text('{"step": 1, "reward": 1, "completion": "x"}\n{"step": 2}\n')
    with pytest.raises(QrlibError, match=r"samples.jsonl:2: not a sample line"):
        R.sample_lengths(path, THINK)
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(QrlibError, match="holds no samples"):
        R.sample_lengths(tmp_path / "empty.jsonl", THINK)


def test_early_and_late_are_the_first_and_last_quarter_of_the_steps():
    log = pd.DataFrame({"step": range(1, 9), "reward": [0, 0, 1, 1, 1, 1, 4, 6]})
    cur = pd.DataFrame({"step": range(1, 9), "reasoning words": [30, 10, 9, 9, 9, 9, 5, 3],
                        "query words": [4, 6, 7, 7, 7, 7, 9, 11],
                        "echo share": [0, 0.5, 0, 0, 0, 0, 1, 1]})
    got = R.early_late(log, cur)
    assert got == {"reward early": 0.0, "reward late": 5.0, "reasoning words early": 20.0,
                   "reasoning words late": 4.0, "query words early": 5.0, "query words late": 10.0,
                   "echo share early": 0.25, "echo share late": 1.0}
    one = R.early_late(log.head(1), cur.head(1))  # a one-step plumbing run: both are step 1
    assert one["reward early"] == one["reward late"] == 0.0


def test_mean_lengths_over_test_rewrites():
    got = R.mean_lengths(['<think>a b</think><answer>{"query": "x"}</answer>', "<think>a b c d"],
                         THINK)
    assert (got["reasoning words"], got["query words"]) == (3.0, 1.0)
    assert math.isnan(got["echo share"])
    # test rewrites do not repeat the prefilled <think>: a cut chain still counts
    cut = R.mean_lengths(["a chain cut by the budget"], THINK, prefill="<think>")
    assert cut["reasoning words"] == 6.0 and math.isnan(cut["query words"])
    with pytest.raises(QrlibError, match="at least one"):
        R.mean_lengths([], THINK)


LAYOUT = ('Then answer. Layout: <think> your reasoning </think> <answer> {"query": "..."} '
          '</answer>')


def test_the_example_chain_is_read_from_the_prompt_layout():
    assert R.layout_chain(LAYOUT) == "your reasoning"
    assert R.layout_chain("Layout: <answer> {} </answer>") == ""  # no-think prompt
    assert R.layout_chain("<think> never closed") == ""


@pytest.mark.parametrize("text, echo", [
    ('<think> your reasoning </think>\n<answer>{"query": "q"}</answer>', 1.0),
    # prefilled <think>: the completion starts inside the chain; case and spacing ignored
    ('  Your   Reasoning</think><answer>{"query": "q"}</answer>', 1.0),
    ('<think>your reasoning: the film, then its director</think><answer>{"query": "q"}</answer>',
     0.0),  # reasoning that starts with the template words is reasoning
    ('<answer>{"query": "q"}</answer>', 0.0),  # no chain is no echo
])
def test_a_chain_that_copies_the_prompts_example_is_an_echo(text, echo):
    assert R.lengths(text, THINK, R.layout_chain(LAYOUT))["echo"] == echo


def test_echo_share_per_step_and_at_test(tmp_path):
    ex = R.layout_chain(LAYOUT)
    path = _samples(tmp_path, [
        {"step": 1, "reward": 1.0, "completion": '<think>who, then where</think><answer>{"query": "x"}</answer>'},
        {"step": 1, "reward": 1.0, "completion": '<think>your reasoning</think><answer>{"query": "x"}</answer>'},
        {"step": 2, "reward": 5.0, "completion": '<think> your reasoning </think><answer>{"query": "x"}</answer>'},
    ])
    cur = R.length_curves(R.sample_lengths(path, THINK, ex))
    assert list(cur["echo share"]) == [0.5, 1.0]
    got = R.mean_lengths([" your reasoning </think>", " who wrote it </think>", "a cut chain"],
                         THINK, prefill="<think>", example=ex)
    assert got["echo share"] == pytest.approx(1 / 3)
