"""Answer-span hits (H@N) and the knowledge-injection analysis (qrlib.methods.deepretrieval.evidence)."""
from __future__ import annotations

import time

import pytest

from qrlib.methods.deepretrieval import evidence as ev
from qrlib.core.errors import QrlibError
from qrlib.methods.deepretrieval.rewards import answer_rank_tier_reward

DOCS = {
    "d_the": "The cat sat on the mat.",
    "d_he": {"title": "Interview", "text": "Then he said nothing."},
    "d_detroit": {"title": "Aretha Franklin", "text": "She died in Detroit, Michigan, in 2018."},
    "d_none": "Nothing relevant here.",
    "d_poss": "Franklin's recordings sold well.",
}


# --------------------------------------------------------------------------- normalisation
@pytest.mark.parametrize("raw, norm", [
    ("The Beatles", "beatles"),
    ("  A  Tale of  Two Cities!! ", "tale of two cities"),
    ("an apple, the pear; a plum", "apple pear plum"),
    ("U.S.A.", "u s"),                       # "a" left after splitting is an article
    ("Maureen O'Sullivan", "maureen o sullivan"),
    ("1727–1752", "1727 1752"),              # en dash is punctuation too
    ("Stanisław LESZCZYŃSKI", "stanisław leszczyński"),
    ("under_score", "under score"),
    ("the", ""),
])
def test_normalise_answer(raw, norm):
    assert ev.normalise_answer(raw) == norm


def test_normalise_rejects_non_text():
    with pytest.raises(QrlibError, match="must be a str"):
        ev.normalise_answer(None)


# --------------------------------------------------------------------------- answers
def test_answer_strings_aliases_deduplicated_after_normalisation():
    meta = {"answer": "Detroit", "answer_aliases": ["Detroit, Michigan", "detroit", "DETROIT.",
                                                    "", "The", "Motor City", "the Motor City"]}
    assert ev.answer_strings(meta) == ["Detroit", "Detroit, Michigan", "Motor City"]


def test_answer_strings_without_answer_names_question():
    with pytest.raises(QrlibError, match="Who wrote it") as exc:
        ev.answer_strings({"answer": "", "answer_aliases": ["the"]}, "Who wrote it?")
    assert "\n" not in str(exc.value)
    with pytest.raises(QrlibError, match="mapping"):
        ev.answer_strings(["Detroit"], "q1")


def test_span_answerable():
    assert not ev.span_answerable(["yes"])
    assert not ev.span_answerable(["No", "no."])
    assert ev.span_answerable(["yes", "Yes Minister"])


# --------------------------------------------------------------------------- matching
def test_contains_answer_whole_tokens_only():
    assert not ev.contains_answer("The cat sat on the mat.", ["he"])
    assert ev.contains_answer("Then he said nothing.", ["He"])
    assert not ev.contains_answer("Detroiter by birth", ["Detroit"])
    assert ev.contains_answer("born in Detroit-Wayne county", ["detroit"])
    assert ev.contains_answer("Franklin's recordings", ["Franklin"])
    assert ev.contains_answer("She died in Detroit, Michigan, in 2018.", ["detroit michigan"])
    assert not ev.contains_answer("Michigan, Detroit", ["Detroit, Michigan"])
    # articles inside the answer do not have to be in the text, nor vice versa
    assert ev.contains_answer("a review of Beatles songs", ["The Beatles"])


def test_contains_answer_any_alias():
    assert ev.contains_answer("The Motor City grew fast.", ["Detroit", "Motor City"])
    assert not ev.contains_answer("The Motor grew fast.", ["Detroit", "Motor City"])


def test_contains_answer_bad_input():
    with pytest.raises(QrlibError, match="single string"):
        ev.contains_answer("text", "Detroit")
    with pytest.raises(QrlibError, match="no answer strings"):
        ev.contains_answer("text", [])
    with pytest.raises(QrlibError, match="normalises to nothing"):
        ev.contains_answer("the text", ["the", "!!"])
    with pytest.raises(QrlibError, match="must be a str"):
        ev.contains_answer(42, ["x"])


def test_long_adversarial_text_is_fast():
    text = "x " * 100_000                      # 200k characters, 100k tokens
    near = " ".join(["x"] * 50 + ["y"])        # matches 50 tokens, fails on the 51st
    long_answer = ("x " * 5_000) + "y"         # 10k-character answer, same trap
    t0 = time.perf_counter()
    assert not ev.contains_answer(text, [near, long_answer])
    assert ev.contains_answer(text + "y", [long_answer])
    assert ev.normalise_answer("(" * 200_000) == ""
    assert ev.strip_spans(text, [near]) == text
    assert ev.injected_answers(text, text + " y", [near]) == [near]
    assert ev.injected_answers(text + " y", text + " y", [near]) == []
    assert time.perf_counter() - t0 < 5.0


# --------------------------------------------------------------------------- H@N
def test_hits_at_n_values():
    ranked = ["d_none", "d_the", "d_he", "d_detroit"]
    assert ev.hits_at_n(ranked, DOCS, ["he"], ns=(1, 2, 3, 20)) == \
        {"H@1": 0, "H@2": 0, "H@3": 1, "H@20": 1}
    assert ev.hits_at_n(ranked, DOCS, ["Detroit"], ns=(1, 3, 4)) == {"H@1": 0, "H@3": 0, "H@4": 1}
    assert ev.hits_at_n(ranked, DOCS, ["Aretha Franklin"], ns=(4,)) == {"H@4": 1}  # title counts
    assert ev.hits_at_n(ranked, DOCS, ["Paris"]) == {"H@1": 0, "H@5": 0, "H@20": 0}
    assert ev.first_answer_rank(ranked, DOCS, ["Detroit"]) == 4
    assert ev.first_answer_rank(ranked, DOCS, ["Detroit"], k=3) is None


def test_hits_at_n_duplicates_counted_once():
    # d_none repeated: the answer document is at distinct rank 2, not list position 4
    ranked = ["d_none", "d_none", "d_none", "d_detroit"]
    assert ev.hits_at_n(ranked, DOCS, ["Detroit"], ns=(1, 2, 3)) == {"H@1": 0, "H@2": 1, "H@3": 1}
    assert ev.first_answer_rank(ranked, DOCS, ["Detroit"]) == 2
    pairs = [("d_none", 3.0), ("d_none", 2.0), ("d_detroit", 1.0)]
    assert ev.hits_at_n(pairs, DOCS, ["Detroit"], ns=(2,)) == {"H@2": 1}


def test_hits_at_n_monotone_in_n():
    ranked = ["d_none", "d_the", "d_poss", "d_he", "d_detroit"]
    ns = tuple(range(1, 8))
    for answers in (["he"], ["Franklin"], ["Detroit"], ["cat"], ["absent"]):
        h = ev.hits_at_n(ranked, DOCS, answers, ns=ns)
        vals = [h[f"H@{n}"] for n in ns]
        assert vals == sorted(vals), (answers, vals)


def test_hits_at_n_feeds_the_table8_reward():
    ranked = ["d_none"] * 3 + ["d_the", "d_none", "d_he"]
    r = ev.first_answer_rank(ranked, DOCS, ["he"], k=3000)
    assert r == 3 and answer_rank_tier_reward(r) == 5.0


def test_hits_at_n_bad_input():
    with pytest.raises(QrlibError, match="cut-offs"):
        ev.hits_at_n(["d_he"], DOCS, ["he"], ns=(0, 5))
    with pytest.raises(QrlibError, match="cut-offs"):
        ev.hits_at_n(["d_he"], DOCS, ["he"], ns=())
    with pytest.raises(QrlibError, match="not in the corpus"):
        ev.hits_at_n(["missing"], DOCS, ["he"])
    with pytest.raises(QrlibError, match="single string"):
        ev.hits_at_n("d_he", DOCS, ["he"])


def test_answer_qrels_agree_with_contains_answer():
    answers = {"q1": ["he"], "q2": ["Detroit", "Motor City"], "q3": ["Franklin"]}
    qrels = ev.answer_qrels(DOCS, answers)
    for q, ans in answers.items():
        want = {d for d, t in DOCS.items()
                if ev.contains_answer(t if isinstance(t, str) else f"{t['title']} {t['text']}",
                                      ans)}
        assert set(qrels[q]) == want
    assert qrels == {"q1": {"d_he": 1}, "q2": {"d_detroit": 1},
                     "q3": {"d_detroit": 1, "d_poss": 1}}


class _Stub:
    """A retriever returning a fixed ranked list per query text."""

    def __init__(self, lists):
        self.lists = lists

    def search(self, texts, k):
        return [self.lists.get(t, [])[:k] for t in texts]


def test_score_run_frame():
    ret = _Stub({"q a": [("d_none", 2.0), ("d_he", 1.0)],
                 "q b": [("d_detroit", 5.0)] + [("d_none", 1.0)] * 3})
    df = ev.score_run(ret, {"a": "q a", "b": "q b", "c": "q c"}, DOCS,
                      {"a": ["he"], "b": ["Detroit"], "c": ["cat"]})
    assert list(df.index) == ["a", "b", "c"]
    assert df[["H@1", "H@5", "H@20"]].to_dict("index") == {
        "a": {"H@1": 0, "H@5": 1, "H@20": 1}, "b": {"H@1": 1, "H@5": 1, "H@20": 1},
        "c": {"H@1": 0, "H@5": 0, "H@20": 0}}
    assert df.loc["a", "first_rank"] == 2 and df["first_rank"].isna().sum() == 1
    with pytest.raises(QrlibError, match="no answers"):
        ev.score_run(ret, {"a": "q a", "z": "q z"}, DOCS, {"a": ["he"]})
    with pytest.raises(QrlibError, match="k must be"):
        ev.score_run(ret, {"a": "q a"}, DOCS, {"a": ["he"]}, k=5)


# --------------------------------------------------------------------------- injection
def test_injection_detection():
    q = "Where did the performer of I Can't See Myself Leaving You die?"
    ans = ["Detroit", "Detroit, Michigan", "Motor City"]
    assert ev.injected_answers(q, "performer song death place", ans) == []
    assert ev.injected_answers(q, "(Aretha Franklin) AND (death) AND (Detroit Michigan)", ans) == \
        ["Detroit", "Detroit, Michigan"]
    # named by the question already (a comparison question's option): no injection
    q2 = "Which film was released first, On Body And Soul or Pearl Lust?"
    assert ev.injected_answers(q2, '"Pearl Lust" release date', ["Pearl Lust"]) == []
    # whole tokens only: "he" inside "the" is not an injected answer
    assert ev.injected_answers("who wrote it", "the author", ["he"]) == []


def test_strip_spans():
    assert ev.strip_spans('("population" OR "residents") AND "new york city" AND "8 million"',
                          ["8 million"]) == '("population" OR "residents") AND "new york city"'
    assert ev.strip_spans("Aretha Franklin death DETROIT, Michigan",
                          ["Detroit", "detroit michigan"]) == "Aretha Franklin death"
    assert ev.strip_spans("(song AND \"The Beatles\") OR beatles album", ["the beatles"]) == \
        "(song) OR album"
    # whole tokens: "he" is not cut out of "the" or "then"
    assert ev.strip_spans("then the hero", ["he"]) == "then the hero"
    assert ev.strip_spans("no match here", ["Paris"]) == "no match here"
    with pytest.raises(QrlibError, match="single string"):
        ev.strip_spans("x", "x")


def test_injection_frame_and_rate():
    qs = {"1": "who sang song x", "2": "which came first, A Film or B Film", "3": "capital of y"}
    rws = {"1": "song x singer Aretha Franklin", "2": "A Film B Film release",
           "3": "y capital city"}
    ans = {"1": ["Aretha Franklin"], "2": ["B Film"], "3": ["Ytown"]}
    df = ev.injection_frame(qs, rws, ans)
    assert df["has_injection"].tolist() == [True, False, False]
    assert df.loc["1", "cleaned"] == "song x singer"
    assert df.loc["2", "cleaned"] == rws["2"]
    rate = ev.injection_rate((qs[q], rws[q], ans[q]) for q in qs)
    assert rate == pytest.approx(1 / 3)
    with pytest.raises(QrlibError, match="no \\(question"):
        ev.injection_rate([])
    with pytest.raises(QrlibError, match="no question or no answers"):
        ev.injection_frame(qs, {"9": "x"}, ans)


# --------------------------------------------------------------------------- real data
def test_bm25_raw_questions_on_2wiki(shared_data):
    from qrlib.data.datasets import load_dataset
    from qrlib.retrieval.retrievers import build_retriever

    ds = load_dataset("2wikimultihopqa-mini", "test")
    qids = list(ds.queries)[:100]
    answers = ev.dataset_answers(ds, qids)
    df = ev.score_run(build_retriever("bm25", ds.corpus), {q: ds.queries[q] for q in qids},
                      ds, answers)
    m = df[["H@1", "H@5", "H@20"]].mean()
    print("2wiki test, first 100, raw questions, BM25:", m.round(3).to_dict())
    assert len(df) == 100
    assert 0.05 < m["H@1"] < m["H@5"] < m["H@20"] < 0.95
