"""Execute the smoke profile's notebooks that load no language model (params/smoke-modelfree.yaml:
data, indexes, fusion, reward shaping, bandits, DeepRetrieval's task audits) and check their
products. `make test` runs this file in its unit-test process while tests/test_notebooks.py
runs the rest of smoke in the other, so both processes end at about the same time."""
from __future__ import annotations

import pytest

from _smoke import MODEL_FREE, SmokeChecks, model_free_notebooks, rec, run  # noqa: F401
from qrlib.core.io import read_table

pytestmark = pytest.mark.notebooks


@pytest.fixture(scope="module")
def smoke_run():
    return run(MODEL_FREE)


class TestSmokeRun(SmokeChecks):
    """The shared checks (tests/_smoke.py) over params/smoke-modelfree.yaml's notebooks."""
    NAMES = model_free_notebooks()


# ----------------------------------------------------------------------------- key numbers
# Pinned values are those of the smoke profile (seeded subsets, deterministic retrieval and
# simulation), as in tests/test_notebooks.py.


def test_01_collection_sizes(rec):
    r = rec["01_data_analysis"]
    assert r["scifact.docs"] == 5183 and r["scifact.test.queries"] == 300
    assert r["nfcorpus.docs"] == 3633 and r["nfcorpus.test.queries"] == 323
    assert r["hotpotqa-mini.test.relevant_per_query"] == pytest.approx(2.0)
    assert r["spider.questions_usable"] == 972 and r["spider.questions_skipped"] == 62


def test_02_bm25_on_the_smoke_scifact_subset(rec):
    r = rec["02_index_build"]
    assert r["bm25.scifact.ndcg10"] == pytest.approx(0.8095, abs=0.005)
    assert r["bm25-ref.scifact.ndcg10"] == pytest.approx(r["bm25.scifact.ndcg10"], abs=0.03)
    assert r["dense.scifact.ndcg10"] == pytest.approx(0.7721, abs=0.01)
    assert r["agreement.scifact.top10_overlap"] >= 0.85
    assert r["hnsw.scifact.top10_recall_vs_flat"] >= 0.95
    # a speed ratio is measured and recorded (benchmarks compare speeds; a test does not time)
    assert 0 < r["speedup.scifact"] < float("inf")


def test_03_rsf_beats_rrf_on_2wiki_and_orders_the_toy_example(rec):
    r = rec["03_rank_score_fusion"]
    assert r["toy.rsf_order"] == "cab"          # c: P=3/4; a, b tie at P=1, a has the higher score
    assert r["toy.rrf_order"] == "cba"
    for split in ("oracle", "heuristic"):
        rsf = r[f"2wikimultihopqa-mini.bm25.{split}.RSF.ndcg"]
        rrf = r[f"2wikimultihopqa-mini.bm25.{split}.RRF.ndcg"]
        assert rsf > rrf + 0.1, (split, rsf, rrf)
    assert r["2wikimultihopqa-mini.bm25.oracle.RSF.ndcg"] == pytest.approx(0.980, abs=0.02)
    assert r["2wikimultihopqa-mini.bm25.-.raw question.ndcg"] == pytest.approx(0.802, abs=0.005)


def test_04_copy_penalty_removes_the_copy_optimum(rec):
    r = rec["04_reward_shaping"]
    shares = sorted((float(k.split("=")[1]), v) for k, v in r.items()
                    if k.startswith("copy_top_share."))
    assert shares[0][0] == 0 and shares[0][1] > 0.5          # without a penalty copies win
    assert shares[-1][1] < shares[0][1] / 5
    assert all(0 <= v <= 1 for k, v in r.items() if k.startswith("frac_zero_std."))


def test_09_every_bandit_policy_meets_at_a_full_budget(rec):
    r = rec["09_bandit_selection"]
    full = {k: v for k, v in r.items() if k.startswith("precision.") and k.endswith(".b=1")}
    assert len(full) == 13
    assert max(full.values()) - min(full.values()) < 1e-12
    recall = [v for k, v in r.items() if k.startswith("recall.")]
    assert max(recall) - min(recall) < 1e-12 and recall[0] == pytest.approx(1.0)
    assert r["check.all policies meet at 100 %"] == "yes"
    small = {k.split(".")[1]: v for k, v in r.items()
             if k.startswith("precision.") and k.endswith(".b=0.1")}
    assert min(v for p, v in small.items() if p != "random") > small["random"] + 0.2
    assert small["topk_ucb_div"] == pytest.approx(0.664, abs=0.03)
    assert r["requests_simulated"] == 32


def test_11_evidence_hits_grow_with_depth(rec):
    r = rec["11_deepretrieval_tasks"]
    for name in ("hotpotqa-large", "2wikimultihopqa-mini"):
        h1, h5, h20 = (r[f"evidence.raw.{name}.H@{n}"] for n in (1, 5, 20))
        assert 0.0 <= h1 <= h5 <= h20 <= 1.0 and h20 > 0.0, name


def test_09_verdicts_follow_their_intervals(smoke_run):
    """Every interval-backed verdict of 09 says "yes" only above 0, "no" only below."""
    import re

    _, _, paths = smoke_run
    checks = read_table(paths["tables_dir"] / "09_direction_checks.csv")
    interval = re.compile(r"\[([-+]?\d+\.\d+), ([-+]?\d+\.\d+)\]")
    seen = 0
    for r in checks.to_dict("records"):
        m = interval.search(str(r[checks.columns[2]]))
        if not m:
            continue
        lo, hi = map(float, m.groups())
        want = "yes" if lo > 0 else "no" if hi < 0 else "not shown"
        assert r["holds here"] == want, r
        seen += 1
    assert seen >= 3
