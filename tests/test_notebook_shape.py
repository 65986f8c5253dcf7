"""Notebooks teach: pipeline code lives in qrlib, so the 19 notebook sources together hold at
most 3,000 code lines, and none has more than twice as many code lines as prose lines."""
from __future__ import annotations

import pytest

from qrlib.workbook.profiles import NOTEBOOK_SRC_DIR, notebook_names

MAX_TOTAL_CODE = 3000
MAX_RATIO = 2.0


def lines(text: str) -> tuple[int, int]:
    """(code, prose): non-blank, non-comment lines of code cells (the parameters cell
    included) and non-blank lines of markdown cells, after the jupytext header."""
    code = prose = 0
    markdown, started = False, False
    for line in text.splitlines():
        if line.startswith("# %%"):
            markdown, started = "[markdown]" in line, True
            continue
        if not started:
            continue
        if markdown:
            prose += bool(line.strip("# ").strip())
        else:
            code += bool(line.strip()) and not line.strip().startswith("#")
    return code, prose


def test_the_counter():
    text = ("# ---\n# jupyter:\n# ---\n\n# %% tags=[\"parameters\"]\nn = 1  # rows\n\n"
            "# %% [markdown]\n# # Title\n#\n# Some prose.\n\n# %%\n# a comment\nx = f(n)\n")
    assert lines(text) == (2, 2)


@pytest.mark.parametrize("name", notebook_names())
def test_no_notebook_is_mostly_code(name):
    code, prose = lines((NOTEBOOK_SRC_DIR / f"{name}.py").read_text(encoding="utf-8"))
    assert code <= MAX_RATIO * prose, f"{name}: {code} code lines against {prose} of prose"


def test_the_notebooks_together_stay_thin():
    total = sum(lines((NOTEBOOK_SRC_DIR / f"{n}.py").read_text(encoding="utf-8"))[0]
                for n in notebook_names())
    assert total <= MAX_TOTAL_CODE, total
