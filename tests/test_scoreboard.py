"""The scoreboard (qrlib.workbook.scoreboard): claims that name real tables and columns,
verdicts read from intervals, and a page that agrees with the tables."""
from __future__ import annotations

import pandas as pd
import pytest

from qrlib.core.errors import QrlibError
from qrlib.eval.compare import COMPARISON_COLUMNS
from qrlib.workbook import scoreboard
from qrlib.workbook.profiles import REPO_ROOT, notebook_names
from qrlib.workbook.results import SCOREBOARD_PAGE, scoreboard_page


def test_every_claim_names_a_notebook_that_writes_its_table_and_real_columns():
    claims = scoreboard.load_claims(REPO_ROOT)
    assert {c.paper for c in claims} == {"deepretrieval", "acqo", "sage", "rlqr", "bandit"}
    for c in claims:
        assert c.notebook in notebook_names(), c.id
        src = (REPO_ROOT / "notebooks" / "src" / f"{c.notebook}.py").read_text()
        assert f'"{c.table}"' in src, f"{c.id}: {c.notebook} does not write {c.table}"
        assert set(c.select) <= set(COMPARISON_COLUMNS), c.id
        scoreboard._paper_value(c)  # every paper cell exists in published.yaml


def _table(tmp_path, rows):
    full = [{**{k: 0 for k in COMPARISON_COLUMNS}, "paper": "p", "dataset": "d",
             "retriever": "bm25", "metric": "m", "kind": "trained", "baseline kind": "baseline",
             "policy": "-", **r} for r in rows]
    pd.DataFrame(full).to_csv(tmp_path / "99_comparisons.csv", index=False)


def test_verdicts_follow_the_intervals(tmp_path):
    c = scoreboard.Claim("p", "c1", "A beats B", "T1", "99_x", "99_comparisons",
                         {"method": "A*", "baseline": "B"})
    assert scoreboard.verdict_of(c, tmp_path)["verdict"] == "not run"
    _table(tmp_path, [{"method": "A1", "baseline": "B", "diff": 0.1, "lo": 0.05, "hi": 0.2},
                      {"method": "A2", "baseline": "B", "diff": 0.1, "lo": 0.01, "hi": 0.2}])
    assert scoreboard.verdict_of(c, tmp_path)["verdict"] == "held"
    _table(tmp_path, [{"method": "A1", "baseline": "B", "diff": 0.1, "lo": 0.05, "hi": 0.2},
                      {"method": "A2", "baseline": "B", "diff": 0.0, "lo": -0.01, "hi": 0.02}])
    v = scoreboard.verdict_of(c, tmp_path)
    assert v["verdict"] == "not held" and v["why"] == "1 of 2 rows on the claimed side of 0"
    less = scoreboard.Claim("p", "c2", "A below B", "T1", "99_x", "99_comparisons",
                            {"method": "A1"}, direction="less")
    assert scoreboard.verdict_of(less, tmp_path)["verdict"] == "not held"
    none = scoreboard.Claim("p", "c3", "x", "T1", "99_x", "99_comparisons", {"method": "Z"})
    assert "no row of 99_comparisons matches" in scoreboard.verdict_of(none, tmp_path)["why"]
    with pytest.raises(QrlibError, match="no column 'nope'"):
        scoreboard.select_rows(pd.read_csv(tmp_path / "99_comparisons.csv"), {"nope": 1})


def test_the_page_agrees_with_the_tables():
    assert (REPO_ROOT / SCOREBOARD_PAGE).read_text() == scoreboard_page("cpu", REPO_ROOT)
    results = (REPO_ROOT / "RESULTS.md").read_text()
    rows = [ln for ln in scoreboard.render("cpu", REPO_ROOT).splitlines() if ln.startswith("| ")]
    assert len(rows) == len(scoreboard.load_claims(REPO_ROOT)) + 1  # the header
    assert all(ln in results for ln in rows)


def test_claims_files_stale_no_notebook():
    from qrlib.workbook.freshness import module_closure

    files = module_closure(REPO_ROOT / "notebooks" / "src" / "07_acqo_stage2.py")
    assert "qrlib/methods/acqo/published.yaml" in files
    assert "qrlib/methods/acqo/claims.yaml" not in files
