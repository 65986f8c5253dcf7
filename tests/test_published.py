"""qrlib.eval.published: the papers' numbers load, keep the paper's layout, and match the papers' text."""
from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from qrlib.eval import published as P
from qrlib.core.errors import QrlibError

PAPERS_DIR = Path(__file__).resolve().parents[2] / "shared" / "papers"
if not PAPERS_DIR.exists():  # a checkout next to ../shared, or the machine's copy
    PAPERS_DIR = Path("/work/shared/papers")


def test_every_file_loads_with_the_record_columns():
    assert {"acqo", "bandit", "rlqr", "sage"} <= set(P.papers())
    df = P.records()
    assert list(df.columns) == P.COLUMNS
    assert len(df) > 100
    assert df["value"].notna().all()
    for paper in P.papers():
        meta = P.info(paper)
        assert meta["paper"] == paper and meta["title"], paper
        assert meta["tables"], paper
        for name, t in meta["tables"].items():
            assert t["setting"] and t["source"] and t["unit"] in P.UNITS, (paper, name)


@pytest.mark.parametrize("paper", P.papers())
def test_every_published_value_occurs_in_the_paper_text(paper):
    """A typo in a transcribed number (0.315 for 0.311) fails here."""
    meta = P.info(paper)
    if not meta["file"]:
        pytest.skip(f"{paper}: not from a paper text (sources named per table)")
    path = PAPERS_DIR / meta["file"]
    if not path.exists():
        pytest.skip(f"paper text {path} not on this machine")
    text = path.read_text(encoding="utf-8")
    # numbers as printed, glued together in PDF extraction ("0.3050.3710.237") or not
    missing = []
    for r in P.records(paper).itertuples():
        if r.value == 0:
            continue
        forms = {f"{r.value:.{d}f}" for d in range(0, 5)} | {f"{r.value:g}"}
        if not any(re.search(rf"(?<![\d]){re.escape(f)}", text) for f in forms):
            missing.append((r.table, r.row, r.column, r.value))
    assert not missing, f"{len(missing)} values not found in {meta['file']}: {missing[:5]}"


def test_wide_table_keeps_the_papers_layout_and_keys():
    t4 = P.table("bandit", "Table 4", wide=True, index="key")
    assert list(t4.columns) == ["Ser. 10%", "Hier. 10%", "Ser. 20%", "Hier. 20%"]
    assert t4.loc["bernoulli", "Hier. 10%"] == pytest.approx(0.371)
    assert t4.loc["topk_ucb_div", "Ser. 10%"] == pytest.approx(0.324)
    assert list(t4.index[:3]) == ["random", "rank", "egreedy"]


def test_percent_tables_can_be_read_as_fractions():
    pct = P.table("acqo", "Table 3", row="ACQO (Qwen2.5-3B)", setting="BM25")
    frac = P.table("acqo", "Table 3", row="ACQO (Qwen2.5-3B)", setting="BM25", fraction=True)
    assert set(pct["unit"]) == {"percent"} and set(frac["unit"]) == {"fraction"}
    assert (frac["value"].to_numpy() * 100 == pytest.approx(pct["value"].to_numpy()))


def test_value_and_bad_names_are_one_line_errors():
    assert P.value("sage", "Table 1", "SAGE-CRS", "NFCorpus NDCG@10") == pytest.approx(0.4035)
    for call, msg in [
        (lambda: P.table("nope"), "no published numbers for paper 'nope'"),
        (lambda: P.table("bandit", "Table 99"), "no table 'Table 99'"),
        (lambda: P.table("bandit", "Table 4", row="Nobody"), "no row 'Nobody'"),
    ]:
        with pytest.raises(QrlibError, match=msg) as info:
            call()
        assert "\n" not in str(info.value)


def test_malformed_files_are_rejected(tmp_path, monkeypatch):
    monkeypatch.setattr(P, "HERE", tmp_path)
    P._load.cache_clear()
    (tmp_path / "toy.yaml").write_text(textwrap.dedent("""\
        paper: toy
        title: t
        file: t.txt
        tables:
          - table: Table 1
            setting: s
            unit: fraction
            source: Table 1
            columns: [a, b]
            rows:
              x: [0.1]
        """))
    try:
        with pytest.raises(QrlibError, match="has 1 values for 2 columns"):
            P.records("toy")
        (tmp_path / "toy.yaml").write_text("paper: toy\ntables:\n  - {table: T, setting: s, "
                                           "unit: furlongs, source: x}\n")
        P._load.cache_clear()
        with pytest.raises(QrlibError, match="unit 'furlongs'"):
            P.records("toy")
    finally:
        P._load.cache_clear()


def test_loader_returns_a_dataframe_per_filter():
    df = P.table("bandit", "Table 3", column=["Researchy @5", "Researchy @10"])
    assert isinstance(df, pd.DataFrame)
    assert set(df["setting"]) == {"ResearchyQuestions"}
    assert set(df["column"]) == {"Researchy @5", "Researchy @10"}
