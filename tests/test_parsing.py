"""Parsing: every format, strict and lenient, never raising on junk."""
from __future__ import annotations

import json
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qrlib.core.errors import QrlibError
from qrlib.generation.parsing import MAX_CHARS, formats, parse_completion

FORMATS = formats()  # every paper's formats (imports qrlib.methods.registry)

DR = "deepretrieval"


def dr(q: str, think: str = "reasoning") -> str:
    return f"<think>{think}</think>\n<answer>{json.dumps({'query': q})}</answer>"


# ----------------------------------------------------------------- DeepRetrieval
def test_deepretrieval_valid():
    r = parse_completion(dr("(a AND b) OR c"), DR)
    assert r.ok and r.queries == ["(a AND b) OR c"] and r.think == "reasoning"
    assert r.error is None


@pytest.mark.parametrize("text,why", [
    ("<answer>{\"query\": \"x\"}</answer>", "exactly one <think>"),
    ("<think>a</think><think>b</think><answer>{\"query\": \"x\"}</answer>", "exactly one <think>"),
    ("<answer>{\"query\": \"x\"}</answer><think>a</think>", "out of order"),
    ("<think>a</think><answer>{\"query\": \"x\"}</answer> trailing", "after </answer>"),
    ("<think>a</think><answer>{\"query\": \"x\"}", "exactly one </answer>"),
    ("<think>a</think><answer>{\"query\": \"x\"</answer>", "not valid JSON"),
    ("<think>a</think><answer>{\"q\": \"x\"}</answer>", "no string 'query'"),
    ("<think>a</think><answer>{\"query\": \"   \"}</answer>", "empty"),
    ("<think>a</think><answer>[\"x\"]</answer>", "expected an object"),
])
def test_deepretrieval_invalid(text, why):
    r = parse_completion(text, DR)
    assert not r.ok and r.queries == [] and why in r.error


def test_deepretrieval_last_answer_counts_when_lenient():
    text = ("<think>t</think><answer>{\"query\": \"first\"}</answer>"
            "<answer>{\"query\": \"second\"}</answer>")
    assert not parse_completion(text, DR).ok           # two answers: format broken
    r = parse_completion(text, DR, lenient=True)
    assert not r.ok and r.recovered and r.queries == ["second"]


def test_deepretrieval_nothink_and_prefill():
    r = parse_completion("<answer>{\"query\": \"q\"}</answer>", "deepretrieval-nothink")
    assert r.ok and r.queries == ["q"]
    assert not parse_completion(dr("q"), "deepretrieval-nothink").ok
    r = parse_completion(" my reasoning</think><answer>{\"query\": \"q\"}</answer>", DR,
                         think_prefilled=True)
    assert r.ok and r.think == "my reasoning"


def test_deepretrieval_lenient_recovers_broken_json_and_missing_tags():
    r = parse_completion("<think>t</think><answer>{\"query\": \"heart attack aspirin\"",
                         DR, lenient=True)
    assert not r.ok and r.recovered and r.queries == ["heart attack aspirin"]
    r = parse_completion("{\"query\": \"no tags at all\"}", DR, lenient=True)
    assert r.queries == ["no tags at all"] and not r.ok
    r = parse_completion("<think>t</think><answer>(a AND b)</answer>", DR, lenient=True)
    assert r.queries == ["(a AND b)"] and not r.ok


def test_code_fence_tolerated():
    r = parse_completion("<think>t</think><answer>```json\n{\"query\": \"q\"}\n```</answer>", DR)
    assert r.ok and r.queries == ["q"]


# ----------------------------------------------------------------- ACQO
def test_acqo_subqueries():
    r = parse_completion('{"query": "a b%%c d %% e"}', "acqo")
    assert r.ok and r.queries == ["a b", "c d", "e"]
    r = parse_completion('{"query": "single"}', "acqo")
    assert r.ok and r.queries == ["single"]


def test_acqo_limits():
    r = parse_completion('{"query": "a%%b%%c%%d"}', "acqo")
    assert not r.ok and "at most 3" in r.error and r.queries == []
    r = parse_completion('{"query": "a%%b%%c%%d"}', "acqo", lenient=True)
    assert r.queries == ["a", "b", "c"] and not r.ok and r.recovered
    r = parse_completion('{"query": "a%%%%b"}', "acqo")
    assert not r.ok and "empty sub-query" in r.error
    r = parse_completion('{"query": "a%%b"}', "acqo", max_subqueries=1)
    assert not r.ok


def test_acqo_lenient_fragment():
    r = parse_completion('Sure! {"query": "x%%y', "acqo", lenient=True)
    assert r.queries == ["x", "y"] and not r.ok
    assert parse_completion('Sure! {"query": "x%%y"}', "acqo").ok is False
    r = parse_completion('Sure! {"query": "x%%y"} hope it helps', "acqo", lenient=True)
    assert r.queries == ["x", "y"]
    r = parse_completion('{"query": ["x", "y"]}', "acqo", lenient=True)
    assert r.queries == ["x", "y"] and not r.ok


# ----------------------------------------------------------------- SAGE
def test_sage_valid_and_tagged():
    r = parse_completion('{"query": "q", "strategy": 5}', "sage")
    assert r.ok and r.strategy == 5
    r = parse_completion('<think>x</think> <answer>{"query": "q", "strategy": 2}</answer>', "sage")
    assert r.ok and r.strategy == 2 and r.think == "x"


@pytest.mark.parametrize("body", [
    '{"query": "q", "strategy": 0}', '{"query": "q", "strategy": 6}',
    '{"query": "q", "strategy": "3"}', '{"query": "q", "strategy": true}',
    '{"query": "q"}', '{"query": "", "strategy": 1}', '{"strategy": 1}',
    '<answer>{"query": "q", "strategy": 1}', '{"query": "q", "strategy": 2.5}',
])
def test_sage_invalid(body):
    assert not parse_completion(body, "sage").ok


def test_sage_lenient():
    r = parse_completion('<answer>{"query": "q", "strategy": "3"}</answer>', "sage", lenient=True)
    assert not r.ok and r.queries == ["q"] and r.strategy == 3
    r = parse_completion('<answer>"query": "q", "strategy": 9', "sage", lenient=True)
    assert r.queries == ["q"] and r.strategy is None


# ----------------------------------------------------------------- plain
def test_plain():
    r = parse_completion("  heart   attack\n", "plain")
    assert r.ok and r.queries == ["heart attack"] and r.n_outside == 0
    r = parse_completion("Sure thing. <answer>heart attack</answer> Bye", "plain")
    assert r.ok and r.queries == ["heart attack"] and r.n_outside == len("Surething.Bye")
    assert not parse_completion("   ", "plain").ok
    r = parse_completion("<answer>open only", "plain", lenient=True)
    assert not r.ok and r.queries == ["open only"]


# ----------------------------------------------------------------- robustness
def test_inputs_of_every_kind():
    assert parse_completion(None, "acqo").ok is False
    assert parse_completion(12, "acqo").ok is False
    r = parse_completion(b'{"query": "caf\xc3\xa9"}', "acqo")
    assert r.ok and r.queries == ["café"]
    assert parse_completion(b"\xff\xfe\x00junk", "acqo").ok is False
    assert parse_completion("\ud800 lone surrogate", "plain").ok
    msgs = [{"role": "assistant", "content": '{"query": "q"}'}]
    assert parse_completion(msgs, "acqo").queries == ["q"]
    huge = '{"query": "' + "a" * (MAX_CHARS + 10) + '"}'
    r = parse_completion(huge, "acqo")
    assert not r.ok and r.truncated
    deep = "[" * 100_000
    assert parse_completion(deep, "acqo").ok is False
    with pytest.raises(QrlibError):
        parse_completion("x", "nope")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.one_of(st.text(max_size=400), st.binary(max_size=200)),
       fmt=st.sampled_from(FORMATS), lenient=st.booleans())
def test_never_raises_and_invariants(text, fmt, lenient):
    r = parse_completion(text, fmt, lenient=lenient)
    assert isinstance(r.ok, bool)
    if r.ok:
        assert r.queries and r.error is None and not r.recovered
    else:
        assert r.error
        if not lenient:
            assert r.queries == []
    for q in r.queries:
        assert q and q == q.strip()
        if fmt == "acqo":
            assert "%%" not in q
    assert len(r.queries) <= (3 if fmt == "acqo" else 1)


_QTEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1,
                 max_size=80).filter(
    lambda s: s.strip() and "%" not in s and "<" not in s and "\x00" not in s)


@settings(max_examples=200, deadline=None)
@given(q=_QTEXT, think=st.text(max_size=50).filter(lambda s: "<" not in s))
def test_deepretrieval_roundtrip(q, think):
    r = parse_completion(dr(q, think), DR)
    assert r.ok and r.queries == [" ".join(q.split())]


@settings(max_examples=200, deadline=None)
@given(parts=st.lists(_QTEXT, min_size=1, max_size=3), s=st.integers(1, 5))
def test_acqo_and_sage_roundtrip(parts, s):
    r = parse_completion(json.dumps({"query": "%%".join(parts)}), "acqo")
    assert r.ok and r.queries == [" ".join(p.split()) for p in parts]
    r = parse_completion(json.dumps({"query": parts[0], "strategy": s}), "sage")
    assert r.ok and r.strategy == s


def test_ten_thousand_random_and_adversarial_completions():
    rng = random.Random(0)
    frags = ["<think>", "</think>", "<answer>", "</answer>", '{"query": "', '"}', "%%",
             '"strategy": ', "3", "{", "}", "```json", "```", "\\", '"', "\x00", "é",
             "\ud83d\ude00", "a b c", "   ", "\n", "null", "[", "]", ",", "AND", "OR (x)",
             '{"query": ""}', '{"query": "a%%b%%c%%d%%e"}', "<think>" * 3]
    n_ok = 0
    for i in range(10_000):
        parts = [rng.choice(frags) for _ in range(rng.randint(0, 12))]
        if i % 7 == 0:
            parts.append("".join(chr(rng.randint(0, 0x2FFF)) for _ in range(20)))
        text = "".join(parts)
        if i % 13 == 0:
            text = text.encode("utf-8", "surrogatepass")[: rng.randint(0, 60)]
        fmt = FORMATS[i % len(FORMATS)]
        r = parse_completion(text, fmt, lenient=bool(i % 2))
        n_ok += r.ok
        assert r.ok == (r.error is None)
        assert len(r.queries) <= (3 if fmt == "acqo" else 1)
        assert all(q.strip() == q and q for q in r.queries)
    assert 0 < n_ok < 10_000


# ----------------------------------------------------------------- linear time
_WORST_CASE_SCRIPT = r'''
import json, sys, time
from qrlib.generation.parsing import MAX_CHARS, formats, parse_completion
FORMATS = formats()
n = MAX_CHARS
inputs = {
    "unclosed fence + spaces": "```" + " " * (n - 4) + "x",
    "unclosed fence + newlines": "```json" + "\n" * (n - 8) + "x",
    "fence, object, then spaces and two backticks": '```json\n{"query": "x"}' + " " * (n - 30) + "``",
    "fence + alternating whitespace": "```json {" + " \n" * ((n - 10) // 2) + "x",
    "repeated <answer>": "<answer>" * (n // 8),
    "repeated <answer> + spaces": ("<answer>" + " " * 8) * (n // 16),
    "repeated <think>": "<think>" * (n // 7),
    "<think><answer>{ repeated": "<think><answer>{" * (n // 16),
    "answer pairs": "<answer>x</answer>" * (n // 18),
    "nested braces": "{" * n,
    "nested brackets": "[" * n,
    "repeated query key": '{"query": "' * (n // 11),
    "query key + spaces": ('"query"' + " " * 20) * (n // 27),
    "query key, colon + spaces": ('"query":' + " " * 20) * (n // 28),
    "strategy key + spaces": ('"strategy":' + " " * 20) * (n // 31),
    "many %% separators": '{"query": "' + "%%" * ((n - 13) // 2) + '"}',
    "backticks": "`" * n,
    "fences + spaces": "``` " * (n // 4),
    "backslashes": '{"query": "' + "\\" * (n - 12),
    "over the cap (lenient truncates)": "```" + " " * (2 * n),
}
worst = (0.0, "")
for name, text in inputs.items():
    for fmt in FORMATS:
        for lenient in (False, True):
            t = time.perf_counter()
            parse_completion(text, fmt, lenient=lenient)
            dt = time.perf_counter() - t
            worst = max(worst, (dt, f"{name} / {fmt} / lenient={lenient}"))
print(json.dumps({"seconds": worst[0], "case": worst[1]}))
'''


def test_worst_inputs_at_the_length_cap_parse_in_linear_time():
    """Hostile completions at MAX_CHARS (32,768 characters): an unclosed JSON fence followed by
    whitespace took hours with the old fence regex (cubic backtracking), repeated <answer> or
    <think> tags seconds (quadratic). Each parse must now take well under a second."""
    import subprocess
    import sys

    try:
        out = subprocess.run([sys.executable, "-c", _WORST_CASE_SCRIPT], capture_output=True,
                             text=True, timeout=60, check=True).stdout
    except subprocess.TimeoutExpired:
        pytest.fail("parsing the worst-case inputs took over 60 s (super-linear parser)")
    worst = json.loads(out.strip().splitlines()[-1])
    assert worst["seconds"] < 0.5, worst


@pytest.mark.parametrize("text,expected", [
    ("```json\n{\"query\": \"q\"}\n```", ["q"]),
    ("  ```JSON {\"query\": \"q\"} ```  \n", ["q"]),
    ("``` {\"query\": \"a``` b\"} ```", ["a``` b"]),
    ("```json{\"query\": \"q\"}``` ```", []),  # text after the closing fence: not a fence
])
def test_fence_rules_unchanged(text, expected):
    assert parse_completion(text, "acqo").queries == expected


def test_one_searched_text_rule_for_training_test_and_baselines():
    from qrlib.generation.parsing import searched_text

    assert searched_text("vitamin d", "cholecalciferol", "rewrite") == "cholecalciferol"
    assert searched_text("vitamin d", " cholecalciferol ", "expand") == "vitamin d cholecalciferol"
    assert searched_text("vitamin d", "  ", "expand") == "vitamin d"  # nothing: the query
    assert searched_text("vitamin d", "", "rewrite") == "vitamin d"
    with pytest.raises(QrlibError, match="mode must be one of rewrite, expand"):
        searched_text("q", "r", "replace")
