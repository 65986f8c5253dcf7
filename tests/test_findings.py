"""'What we found' sentences built from a notebook's tables (qrlib.eval.findings)."""
from __future__ import annotations

import re
import textwrap

import numpy as np
import pandas as pd
import pytest

from qrlib.core.errors import QrlibError
from qrlib.eval.compare import comparison_table, compare
from qrlib.eval.scale import scale_columns
from qrlib.eval.findings import paragraph, split_sentences, spread, what_we_found


def _scores(shift, n=60, seed=0):
    rng = np.random.default_rng(seed)
    base = rng.uniform(0, 1, n)
    return ({f"q{i}": float(b + shift + rng.normal(0, 0.01)) for i, b in enumerate(base)},
            {f"q{i}": float(b) for i, b in enumerate(base)})


def _log(steps=60, valid=1.0):
    return pd.DataFrame({"step": range(1, steps + 1), "qids": ["a;b"] * steps,
                         "rollouts": [16] * steps, "step_seconds": [10.0] * steps,
                         "format_valid": [valid] * steps})


def _table():
    rows = []
    for method, shift, tv, ds in (("up", 0.05, 1.0, "scifact"), ("same", 0.0, 0.95, "scifact"),
                                  ("down", -0.05, 0.2, "nfcorpus")):
        a, b = _scores(shift)
        rows.append(compare(a, b, paper="p", dataset=ds, retriever="bm25", metric="nDCG@10",
                            method=method, kind="trained", baseline="raw query",
                            scale=scale_columns("qwen", [_log()], test_queries=60, test_valid=tv),
                            resamples=1000))
    a, b = _scores(0.1)
    rows.append(compare(a, b, paper="p", dataset="scifact", retriever="bm25", metric="nDCG@10",
                        method="untrained", kind="untrained", baseline="raw query",
                        resamples=1000))
    return comparison_table(rows)


def test_sentences_count_verdicts_from_intervals_and_name_the_reasons(tmp_path):
    cmp = _table()
    (tmp_path / "tables").mkdir()
    cmp.to_csv(tmp_path / "tables" / "99_comparisons.csv", index=False)
    paper = tmp_path / "qrlib" / "methods" / "p"
    paper.mkdir(parents=True)
    (paper / "claims.yaml").write_text(textwrap.dedent("""\
        paper: p
        claims:
          - {id: p-up, claim: up beats raw, source: T1, notebook: 99_toy,
             table: 99_comparisons, select: {method: up}, direction: greater}
          - {id: p-same, claim: same beats raw, source: T1, notebook: 99_toy,
             table: 99_comparisons, select: {method: same}, direction: greater}
          - {id: other, claim: x, source: T2, notebook: 98_other, table: 98_x, select: {method: x}}
        """))
    health = pd.DataFrame([{"run": "p-down", "collapsed": True, "why": "copy share 0.97"},
                           {"run": "p-up", "collapsed": False, "why": ""}])
    text = what_we_found(cmp, notebook="99_toy", tables_dir=tmp_path / "tables",
                         health=health, root=tmp_path)
    sentences = re.split(r"(?<=\.)\s+(?=[A-Z0-9])", text)
    assert 2 <= len(sentences) <= 6, sentences
    assert text.startswith("Of 3 trained rows compared with raw query, 1 beats it with a 95 % "
                           "interval above 0, 1 falls below it and 1 cannot be told apart")
    assert "The strongest: up beats raw query on scifact/bm25 (nDCG@10 +0.05" in text
    assert "The weakest: down falls below raw query on nfcorpus/bm25" in text
    assert "Flagged: test outputs were mostly malformed for down (nfcorpus/bm25: 0.20 at test, " \
           "1.00 in training's last quarter)" in text
    assert "1 of 2 training runs collapsed (p-down: copy share 0.97" in text
    assert text.endswith("Scoreboard rows fed: p-up held, p-same not held.")
    assert "untrained" not in text  # only the trained rows


def test_no_trained_row_is_one_sentence(tmp_path):
    cmp = _table()
    text = what_we_found(cmp[cmp.kind == "untrained"], notebook="99_toy",
                         tables_dir=tmp_path, root=tmp_path)
    assert text == "This run has no trained row to compare with its baseline."


def test_split_sentences_keeps_abbreviations_and_decimals_inside_a_sentence():
    text = ("Best: Top-k UCB (Eq. 1) at 0.472. ε-greedy is best at 10-20 % (Sec. 5.1). "
            "bm25s answers 3.0x more. 1 of 2 runs collapsed!")
    assert split_sentences(text) == ["Best: Top-k UCB (Eq. 1) at 0.472.",
                                     "ε-greedy is best at 10-20 % (Sec. 5.1).",
                                     "bm25s answers 3.0x more.", "1 of 2 runs collapsed!"]
    assert split_sentences("  ") == []


def test_paragraph_joins_non_empty_sentences_and_refuses_more_than_six():
    assert paragraph(["One.", "", "  ", "Two (a. b)."]) == "One. Two (a. b)."
    assert paragraph([]) == ""
    assert len(split_sentences(paragraph([f"S{i}." for i in range(6)]))) == 6
    with pytest.raises(QrlibError, match="7 sentences, more than 6"):
        paragraph([f"S{i}." for i in range(7)])
    with pytest.raises(QrlibError, match="7 sentences"):  # a joined item counts twice
        paragraph(["A.", "B.", "C.", "D.", "E.", "F. G."])


def test_spread_names_the_rows_at_either_end():
    s = pd.Series({"scifact": 0.8095, "nfcorpus": 0.325, "hotpot": 0.99})
    assert spread(s) == "0.325 (nfcorpus) to 0.990 (hotpot)"
    assert spread({("2wiki", "bm25"): 0.1, ("hotpot", "dense"): -0.2}, "+.2f") == (
        "-0.20 (hotpot/dense) to +0.10 (2wiki/bm25)")
    assert spread(pd.Series({"a": 2.0, "b": 2.001, "c": float("nan")}), ".2f") == "2.00 (all 2)"
    assert spread({"toy": 5183}, ",.0f") == "5,183 (toy)"
    assert spread({"toy": 0.5}, ".0%", name_one=False) == "50%"
    assert spread(pd.Series(dtype=float)) == ""
