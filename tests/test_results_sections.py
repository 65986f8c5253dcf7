"""RESULTS.md's paper sections live in the papers' folders and are found through the
``qrlib.results`` entry-point group (qrlib.workbook.results assembles, names no paper)."""
from __future__ import annotations

import importlib
import re
from pathlib import Path

from _astutil import code_text

from qrlib.core import registry
from qrlib.workbook import results

REPO = Path(__file__).resolve().parents[1]

# RESULTS.md's sections, in the order they appear
EXPECTED = ["scoreboard", "trained rows", "seeds", "baselines", "fusion", "rewards", "bandits", "rl", "acqo",
            "acqo transfer", "acqo retrievers", "acqo ablation", "sage", "rl-qr", "beyond BEIR", "sql", "evidence",
            "prompting", "timings", "gaps", "other tables"]


def test_every_results_entry_point_is_a_paper_module_with_sections():
    entries = registry.pyproject_entries(REPO / "pyproject.toml", group=results.GROUP)
    papers = registry.pyproject_entries(REPO / "pyproject.toml")
    assert entries and set(entries) <= set(papers)
    for name, target in entries.items():
        assert target == f"qrlib.methods.{name}.results:SECTIONS"
        assert (REPO / "qrlib" / "methods" / name / "results.py").is_file()
        sections = importlib.import_module(target.split(":")[0]).SECTIONS
        assert sections, name
        for order, title, fn in sections:
            assert isinstance(order, (int, float)) and isinstance(title, str) and callable(fn)


def test_the_shared_results_modules_name_no_paper():
    names = registry.pyproject_entries(REPO / "pyproject.toml", group=results.GROUP)
    for path in (REPO / "qrlib" / "workbook" / "results.py",
                 REPO / "qrlib" / "workbook" / "resultsdoc.py"):
        text = code_text(path)
        for name in names:
            assert not re.search(rf"qrlib[./]methods[./]{name}\b", text), (path.name, name)


def test_sections_are_assembled_in_results_md_order():
    found = results.sections()
    assert [title for _, title, _ in found] == EXPECTED
    orders = [order for order, _, _ in found]
    assert orders == sorted(orders) and len(set(orders)) == len(orders)


def test_acqo_fig5_grid_reads_the_dense_trained_sibling_profile(tmp_path):
    """ACQO Fig. 5's grid: BM25-trained from the profile's 07 and 16, dense-trained from
    the sibling profile <profile>-acqo-dense (its 07); a missing cell says not run."""
    import pandas as pd

    from qrlib.core.io import save_table
    from qrlib.methods.acqo import results as acqo_results
    from qrlib.workbook.resultsdoc import Doc

    def table(trained, rows):
        return pd.DataFrame([{"paper": "acqo", "dataset": "2wikimultihopqa-mini",
                              "retriever": retr, "metric": "nDCG@10",
                              "method": f"ACQO: Stage I+II ({trained}-trained)",
                              "kind": "trained", "baseline": "raw question",
                              "baseline kind": "baseline", "score": 0.7, "baseline score": 0.7,
                              "diff": diff, "lo": diff - 0.01, "hi": diff + 0.01, "p<=0": 0.0,
                              "wins": 1, "losses": 0, "ties": 0, "level": 0.95,
                              "resamples": 100, "policy": "q", "RL steps": 132, "SFT steps": 24,
                              "train queries": 200, "rollouts": 2000, "train min": 60.0,
                              "test queries": 516} for retr, diff in rows])

    save_table(table("bm25", [("bm25", 0.021)]), "07_comparisons", tmp_path / "tables" / "cpu")
    d = Doc("cpu", tmp_path)
    text = acqo_results._acqo_retrievers(d)
    assert "| BM25 | +0.021 [+0.011, +0.031] (beats) | not run |" in text
    assert "has not run yet" in text
    save_table(table("dense", [("bm25", -0.03), ("dense", 0.004)]), "07_comparisons",
               tmp_path / "tables" / "cpu-acqo-dense")
    text = acqo_results._acqo_retrievers(Doc("cpu", tmp_path))
    assert "| MiniLM (dense) | −0.030 [−0.040, −0.020] (falls below) | " \
           "+0.004 [−0.006, +0.014] (is not distinguishable from) |" in text
