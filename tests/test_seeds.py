"""Seed replicas (qrlib.eval.seeds): a row's spread over seeds, and claims that hold only
when they hold at every seed."""
from __future__ import annotations

import pandas as pd

from qrlib.core.io import save_table
from qrlib.eval import seeds as S
from qrlib.eval.claims import Claim


def _table(diff, lo, hi):
    return pd.DataFrame([{"paper": "acqo", "dataset": "2wiki", "retriever": "bm25",
                          "metric": "nDCG@10", "method": "ACQO", "kind": "trained",
                          "baseline": "raw question", "baseline kind": "baseline",
                          "diff": diff, "lo": lo, "hi": hi, "RL steps": 132}])


CLAIM = Claim("acqo", "acqo-beats-raw", "ACQO beats raw", "Table 3", "07_acqo_stage2",
              "07_comparisons", {"method": "ACQO", "baseline": "raw question"})


def test_a_claim_holds_only_when_every_seed_holds(tmp_path):
    base = tmp_path / "tables" / "cpu"
    for d in (base, base.parent / "cpu-seed1", base.parent / "cpu-seed2",
              base.parent / "cpu-long"):
        d.mkdir(parents=True)
    save_table(_table(0.03, 0.01, 0.05), "07_comparisons", base)
    assert [s for s, _ in S.replica_dirs(base)] == [1, 2]  # cpu-long is not a replica
    v = S.claim_verdict(CLAIM, base)
    assert v["verdict"] == "held" and v["seeds"] == 1  # the replicas have not run yet
    save_table(_table(0.02, 0.005, 0.04), "07_comparisons", base.parent / "cpu-seed1")
    save_table(_table(0.01, -0.01, 0.03), "07_comparisons", base.parent / "cpu-seed2")
    v = S.claim_verdict(CLAIM, base)
    assert (v["verdict"], v["seeds"]) == ("not held", 3)
    assert v["why"] == ("held at the base seed, not at seed 2; seed 2: ACQO vs raw question "
                        "(2wiki/bm25, nDCG@10): +0.010 [-0.010, +0.030], 132 RL steps")
    save_table(_table(0.02, 0.001, 0.03), "07_comparisons", base.parent / "cpu-seed2")
    v = S.claim_verdict(CLAIM, base)
    assert (v["verdict"], v["why"]) == ("held", "held at all 3 seeds")
    sp = S.spread(_table(0.03, 0.01, 0.05), "07_comparisons", base)
    r = sp.iloc[0]
    assert r["seeds"] == 3 and abs(r["diff mean"] - 0.07 / 3) < 1e-12
    assert (r["diff min"], r["diff max"], r["every seed"]) == (0.02, 0.03, "beats")
    assert r["diff per seed"].startswith("0: +0.030 [+0.010, +0.050]; 1: +0.020")
