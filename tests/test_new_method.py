"""A sixth method, added without touching the shared layers (docs/adding-a-method.md).

The toy method's ``prompts.py``, ``formats.py`` and ``rewards.py`` are the code blocks of
``docs/adding-a-method.md`` (so the page cannot drift from working code), written into
pytest's ``tmp_path`` as the package ``toy_method``, OUTSIDE the qrlib tree, and imported
from there. They use only the public registration APIs of :mod:`qrlib.generation.prompts`,
:mod:`qrlib.generation.parsing` and :mod:`qrlib.rl.rewards`; the checks below run them
through the real BM25 retriever and :class:`qrlib.rl.env.RewardEnv`. The registries are
snapshotted before the toy registers and restored afterwards, so every other test sees
exactly the five papers' entries.
"""
from __future__ import annotations

import ast
import contextlib
import importlib
import re
import sys
from pathlib import Path

import pytest

from qrlib.core.errors import QrlibError
from qrlib.core.registry import load_methods
from qrlib.generation import parsing, prompts
from qrlib.retrieval.retrievers import build_retriever
from qrlib.rl import rewards
from qrlib.rl.env import RewardEnv

REPO = Path(__file__).resolve().parents[1]
QRLIB = REPO / "qrlib"
DOC = REPO / "docs" / "adding-a-method.md"
PACKAGE = "toy_method"
TOY_FILES = ("prompts.py", "formats.py", "rewards.py")
# the registries a paper registers into: (module, name of its dict)
REGISTRIES = ((prompts, "REGISTRY"), (parsing, "FORMATS"), (rewards, "REWARDS"))
# the layers a new method must not need to edit
UNTOUCHED = ("rl", "retrieval", "eval", "workbook")

# Five documents; with BM25 (stemming, English stopwords) a query term found in one
# document ranks only that document, and of two equally long documents the one with the
# term twice ranks first: "coffee" -> d4 (coffee coffee cups), then d3.
CORPUS = {"d1": "Penguins live in Antarctica", "d2": "Volcanoes erupt hot lava",
          "d3": "Coffee beans are roasted", "d4": "coffee coffee cups",
          "d5": "Tea leaves are dried"}
QRELS = {"q1": {"d3": 1}, "q2": {"d1": 1}}


def toy_sources() -> dict[str, str]:
    """File name -> code of the doc's ``# qrlib/methods/toy/<file>`` blocks."""
    text = DOC.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n# qrlib/methods/toy/(\w+\.py)\n(.*?)```", text, re.S)
    found = dict(blocks)
    missing = [f for f in TOY_FILES if f not in found]
    if missing:
        raise AssertionError(f"{DOC.name} has no code block for qrlib/methods/toy/{missing[0]}")
    return {f: found[f] for f in TOY_FILES}


def _snapshot() -> list[tuple[dict, dict]]:
    return [(getattr(m, n), dict(getattr(m, n))) for m, n in REGISTRIES]


@contextlib.contextmanager
def isolated_registries():
    """Restore every registry (the same dict objects, in place, in their order) on exit.

    The five papers are loaded first: were they loaded lazily inside the block (a lookup
    miss calls load_methods), restoring would drop them while qrlib.methods.registry stays
    imported, and later lookups would never load them again."""
    load_methods()
    saved = _snapshot()
    try:
        yield
    finally:
        for live, before in saved:
            live.clear()
            live.update(before)


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """The toy method as an importable package under tmp_path, registered for the test."""
    pkg = tmp_path / PACKAGE
    pkg.mkdir()
    (pkg / "__init__.py").write_text('"""A toy sixth method (docs/adding-a-method.md)."""\n')
    for name, code in toy_sources().items():
        (pkg / name).write_text(code, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    with isolated_registries():
        try:
            for name in TOY_FILES:
                importlib.import_module(f"{PACKAGE}.{name[:-3]}")
            yield pkg
        finally:
            for mod in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
                del sys.modules[mod]


@pytest.fixture
def bm25():
    return build_retriever("bm25", CORPUS)


# --------------------------------------------------------------------------- prompt
def test_prompt_renders_through_the_registry(toy):
    msgs = prompts.render("toy/rewrite", query="coffee")
    assert msgs == [
        {"role": "system", "content": "You rewrite search queries for a keyword search engine."},
        {"role": "user", "content": "Query: coffee\n\nReply with one line: QUERY: <the "
                                    "rewritten query>"}]
    assert prompts.get("toy/rewrite").meta["fmt"] == "toy-line"
    with pytest.raises(QrlibError, match="missing field"):
        prompts.render("toy/rewrite")


# --------------------------------------------------------------------------- format
def test_format_parses_completions(toy):
    assert "toy-line" in parsing.formats()
    ok = parsing.parse_completion("QUERY: roasted   coffee beans", "toy-line")
    assert (ok.ok, ok.queries, ok.error, ok.fmt) == (True, ["roasted coffee beans"], None,
                                                    "toy-line")
    thought = parsing.parse_completion("<think>keywords only</think>\nQUERY: lava", "toy-line")
    assert thought.ok and thought.queries == ["lava"]
    bad = parsing.parse_completion("roasted coffee", "toy-line")
    assert (bad.ok, bad.queries, bad.error) == (False, [], "no 'QUERY:' line")
    rec = parsing.parse_completion("roasted coffee", "toy-line", lenient=True)
    assert (rec.ok, rec.queries, rec.recovered) == (False, ["roasted coffee"], True)
    two = parsing.parse_completion("QUERY: a b\nQUERY: c", "toy-line")
    assert (two.ok, two.error) == (False, "more than one line")
    assert parsing.parse_completion("QUERY:   ", "toy-line").error == "empty query"
    # the shared layer's guarantees hold for the new format too
    assert parsing.parse_completion(None, "toy-line").error == "completion is None"
    assert parsing.parse_completion(b"QUERY: tea", "toy-line").queries == ["tea"]
    assert parsing.sft_target("tea leaves", "toy-line") == "QUERY: tea leaves"


# --------------------------------------------------------------------------- reward
def test_reward_is_listed_with_its_parameters(toy):
    row = next(r for r in rewards.list_rewards() if r["name"] == "toy_rr")
    assert row["level"] == "rollout" and row["params"] == {"k": 10, "format_penalty": -1.0}
    assert row["presets"] == ["paper"] and row["source"] == "toy example"
    assert rewards.make_reward("toy_rr", k=3).depth == 3


def test_reward_scores_real_ranked_lists(toy, bm25):
    assert bm25.search(["roasted beans", "coffee", "lava"], 10) == [
        [("d3", pytest.approx(1.2933, abs=1e-3))],
        [("d4", pytest.approx(0.5570, abs=1e-3)), ("d3", pytest.approx(0.4084, abs=1e-3))],
        [("d2", pytest.approx(0.5717, abs=1e-3))]]
    env = RewardEnv(bm25, QRELS, reward="toy_rr", fmt="toy-line")
    completions = ["QUERY: roasted beans",   # d3 (relevant) alone: 1/1
                   "QUERY: coffee",          # d4, then d3: 1/2
                   "QUERY: lava",            # d2 only, d3 not found: 0
                   "roasted beans",          # no QUERY: line: the format penalty
                   "QUERY: penguins"]        # q2: d1 first: 1/1
    qids = ["q1", "q1", "q1", "q1", "q2"]
    assert env(completions=completions, qid=qids) == [1.0, 0.5, 0.0, -1.0, 1.0]
    assert [r["gold_ranks"] for r in env.records] == [[1], [2], [], [], [1]]
    assert [r["part_rr"] for r in env.records] == [1.0, 0.5, 0.0, 0.0, 1.0]
    assert [r["format_ok"] for r in env.records] == [True, True, True, False, True]
    assert env.records[3]["queries"] == []            # strict: a malformed answer is not searched


def test_reward_parameters_come_through_the_env(toy, bm25):
    # k=1: d3 at rank 2 is outside the cut-off; env k sets the reward's k (it declares one)
    env = RewardEnv(bm25, QRELS, reward="toy_rr", fmt="toy-line", k=1, format_penalty=-0.25)
    assert env.reward.params == {"k": 1, "format_penalty": -0.25} and env.depth == 1
    assert env(completions=["QUERY: roasted beans", "QUERY: coffee", "roasted beans"],
               qid=["q1"] * 3) == [1.0, 0.0, -0.25]
    # lenient parsing searches the recovered query, but the format still failed
    env = RewardEnv(bm25, QRELS, reward="toy_rr", fmt="toy-line", lenient=True)
    assert env(completions=["roasted beans"], qid=["q1"]) == [-1.0]
    assert env.records[0]["queries"] == ["roasted beans"] and env.records[0]["gold_ranks"] == [1]


# --------------------------------------------------------------------------- isolation
def test_toy_uses_only_public_registration_apis(toy):
    allowed = {"qrlib.generation.prompts", "qrlib.generation.parsing", "qrlib.rl.rewards"}
    for name in TOY_FILES:
        tree = ast.parse((toy / name).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                assert not [a.name for a in node.names if a.name.startswith("qrlib")], name
            elif isinstance(node, ast.ImportFrom):
                assert node.module in allowed, (name, node.module)
                assert not [a.name for a in node.names if a.name.startswith("_")], name
    # imported from tmp_path, not from the qrlib tree
    for name in TOY_FILES:
        mod = sys.modules[f"{PACKAGE}.{name[:-3]}"]
        assert Path(mod.__file__).resolve().is_relative_to(toy.resolve())
        assert not Path(mod.__file__).resolve().is_relative_to(QRLIB)


def test_no_qrlib_module_knows_the_toy(toy):
    # nothing under qrlib/ (in particular rl/, retrieval/, eval/, workbook/) names the toy
    mentions = [str(p.relative_to(REPO)) for p in QRLIB.rglob("*")
                if p.is_file() and p.suffix in (".py", ".yaml")
                and (PACKAGE in p.read_text(encoding="utf-8")
                     or "toy_rr" in p.read_text(encoding="utf-8"))]
    assert mentions == []
    for layer in UNTOUCHED:
        assert (QRLIB / layer).is_dir()
    loaded = [m for m, mod in sys.modules.items() if m.startswith("qrlib")
              and PACKAGE in getattr(mod, "__dict__", {})]
    assert loaded == []


def test_registries_are_restored_after_a_new_method(tmp_path, monkeypatch):
    load_methods()
    before = [list(getattr(m, n).items()) for m, n in REGISTRIES]
    pkg = tmp_path / PACKAGE
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "rewards.py").write_text(toy_sources()["rewards.py"], encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    with isolated_registries():
        importlib.import_module(f"{PACKAGE}.rewards")
        assert "toy_rr" in rewards.REWARDS
        with pytest.raises(QrlibError, match="registered twice"):  # names stay unique
            rewards.register_reward("toy_rr")(lambda o, *, k=1: {"reward": 0.0})
    for mod in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
        del sys.modules[mod]
    assert [list(getattr(m, n).items()) for m, n in REGISTRIES] == before
    assert "toy_rr" not in rewards.REWARDS and "toy-line" not in parsing.FORMATS
    with pytest.raises(QrlibError, match="unknown reward 'toy_rr'"):
        rewards.make_reward("toy_rr")
    assert "ndcg" in rewards.REWARDS and "plain" in parsing.formats()
