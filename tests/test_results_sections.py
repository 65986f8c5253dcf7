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
            "acqo transfer", "acqo ablation", "sage", "rl-qr", "beyond BEIR", "sql", "evidence",
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
