"""qrlib.retrieval.baseline and the ``python -m qrlib baseline`` CLI."""
from __future__ import annotations

import json
import math

import pytest

from qrlib.__main__ import main
from qrlib.retrieval.baseline import baseline_main, run_baseline
from qrlib.data.datasets import load_dataset
from qrlib.core.errors import QrlibError


def test_baseline_on_tiny_fixture_by_hand(fixtures_dir, capsys):
    row = baseline_main(str(fixtures_dir / "foundation" / "tiny-beir"), "bm25", "test",
                        as_json=True)
    out = json.loads(capsys.readouterr().out)
    assert out["queries"] == 2 and row["queries"] == 2
    # q1 "apple": only d1 matches, and it is relevant -> RR = 1, R@100 = 1, AP@10 = 1
    # q2 "cherry banana": ranking d2 (rel 2), d1 (0), d3 (rel 1) -> RR = 1
    #   DCG = 2 + 1/log2(4) = 2.5; IDCG = 2 + 1/log2(3); AP@10 = (1/1 + 2/3) / 2
    ndcg_q2 = 2.5 / (2 + 1 / math.log2(3))
    assert out["MRR@10"] == pytest.approx(1.0)
    assert out["R@100"] == pytest.approx(1.0)
    assert out["nDCG@10"] == pytest.approx((1 + ndcg_q2) / 2)
    assert out["MAP@10"] == pytest.approx((1 + (1 + 2 / 3) / 2) / 2)


def test_run_baseline_per_query_frame(fixtures_dir):
    ds = load_dataset(fixtures_dir / "foundation" / "tiny-beir")
    res = run_baseline(ds, "bm25-ref", stemmer=None, stopwords=None)
    assert list(res.per_query["query_id"]) == ["q1", "q2"]
    assert set(res.run) == {"q1", "q2"} and res.run["q1"][0][0] == "d1"


@pytest.mark.parametrize("args,needle", [
    (["--dataset", "no-such-dataset"], "not found"),
    (["--dataset", "scifact", "--retriever", "tfidf"], "unknown retriever"),
    (["--dataset", "scifact", "--split", "dev"], "no split 'dev'"),
])
def test_cli_bad_input_one_line(args, needle, capsys, shared_data):
    assert main(["baseline", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and needle in err and "\n" not in err


def test_baseline_main_raises_for_library_callers():
    with pytest.raises(QrlibError):
        baseline_main("scifact", "colbert")
