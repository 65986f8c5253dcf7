"""SAGE's pipeline functions (qrlib.methods.sage.pipeline): variants, their keys, result rows."""
from __future__ import annotations

import pandas as pd
import pytest

from qrlib.core.errors import QrlibError
from qrlib.eval.scale import scale_columns
from qrlib.methods.sage import pipeline as sage


def test_variants_carry_the_papers_prompts_rewards_and_penalties():
    v = sage.variants(0.05, [0.02])
    assert list(v) == ["unguided", "direct", "scs", "crs", "conservative", "proactive",
                       "proactive-p0.02"]
    assert (v["scs"].reward, v["scs"].params) == ("sage_scs", {"p": 0.05})
    assert (v["crs"].reward, v["direct"].reward) == ("sage_crs", "sage_direct")
    assert v["conservative"].prompt == "sage/guided-conservative" and v["conservative"].params == {"p": 0.0}
    assert v["proactive-p0.02"].params == {"p": 0.02} and v["proactive"].params == {"p": 0.0}
    assert v["unguided"].prompt == "generic/rewrite" and v["unguided"].fmt != v["scs"].fmt
    assert v["scs"].prefill.startswith("<answer>")


def test_pick_keeps_order_drops_repeats_and_names_an_unknown_key():
    v = sage.variants()
    assert [x.key for x in sage.pick(["scs", "unguided", "scs"], v)] == ["scs", "unguided"]
    with pytest.raises(QrlibError, match="unknown SAGE variant\\(s\\) proactive-p0.02; accepted"):
        sage.pick(["scs", "proactive-p0.02"], v)


def test_result_rows_pair_every_row_with_the_raw_query():
    q = ["q1", "q2", "q3", "q4"]
    raw = pd.Series([0.2, 0.5, 0.0, 1.0], index=q)
    scs = pd.Series([0.4, 0.5, 0.3, 1.0], index=q)
    df = pd.DataFrame({"qid": q, "modified": [True, False, True, False],
                       "format_ok": [True] * 4, "gen_tokens": [10, 12, 8, 10]})
    scales = {"raw query": scale_columns(None, test_queries=4),
              "SAGE-SCS": scale_columns("smollm2", test_queries=4)}
    rows, cmp = sage.result_rows({"raw query": raw, "SAGE-SCS": scs}, {"SAGE-SCS": df}, scales,
                                 {"raw query": "baseline", "SAGE-SCS": "untrained"},
                                 dataset="toy", retriever="bm25", resamples=500, seed=0)
    assert [r["model"] for r in rows] == ["raw query", "SAGE-SCS"]
    assert rows[0]["ΔnDCG@10 vs raw"] == 0.0 and rows[0]["modified"] == 0.0
    assert rows[1]["ΔnDCG@10 vs raw"] == pytest.approx(0.125)
    assert rows[1]["modified"] == 0.5 and rows[1]["wins/losses"] == "2/0"
    assert len(cmp) == 1 and cmp[0]["diff"] == pytest.approx(0.125)
    assert cmp[0]["lo"] <= 0.125 <= cmp[0]["hi"]
    with pytest.raises(QrlibError, match="lack the 'raw query' row"):
        sage.result_rows({"SAGE-SCS": scs}, {}, scales, {}, dataset="toy", retriever="bm25")
