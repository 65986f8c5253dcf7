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


def test_a_replica_that_ran_other_code_is_left_out(tmp_path):
    """A seed replica trained before a trainer change does not measure today's code: by the
    manifests (same notebook source and modules), it is left out of the spread and the
    verdict, and named."""
    import json

    base = tmp_path / "tables" / "cpu"
    rep = base.parent / "cpu-seed1"
    for d in (base, rep):
        d.mkdir(parents=True)
    save_table(_table(0.03, 0.01, 0.05), "07_comparisons", base)
    save_table(_table(-0.02, -0.04, -0.01), "07_comparisons", rep)

    def manifest(d, trainer, commit):
        inputs = {"source": {"notebooks/src/07_acqo_stage2.py": "s"},
                  "modules": {"qrlib/rl/trainer.py": trainer}}
        (d / "manifest.json").write_text(json.dumps(
            {"07_acqo_stage2": {"inputs": inputs, "commit": commit}}))

    manifest(base, "new", "bbb")
    manifest(rep, "old", "aaa")
    assert S.replicas_for("07_comparisons", base) == ([], ["seed 1 (ran other code, at commit aaa)"])
    v = S.claim_verdict(CLAIM, base)
    assert (v["verdict"], v["seeds"], v["left out"]) == (
        "held", 1, ["seed 1 (ran other code, at commit aaa)"])
    assert S.spread(_table(0.03, 0.01, 0.05), "07_comparisons", base).iloc[0]["seeds"] == 1
    manifest(rep, "new", "ccc")  # rerun at today's code: it counts, and here it disagrees
    v = S.claim_verdict(CLAIM, base)
    assert (v["verdict"], v["seeds"], v["left out"]) == ("not held", 2, [])
