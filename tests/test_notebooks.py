"""Execute every notebook with the smoke profile (as `make test` promises) and check products."""
from __future__ import annotations

import pandas as pd
import pytest

from qrlib import workbook as wb

pytestmark = pytest.mark.notebooks


@pytest.fixture(scope="module")
def smoke_run():
    profile = wb.load_profile(wb.REPO_ROOT / "params" / "smoke.yaml")
    rows = wb.run_profile(wb.REPO_ROOT / "params" / "smoke.yaml")
    return profile, rows, wb.run_paths(profile["name"])


def test_every_notebook_ran(smoke_run):
    _, rows, paths = smoke_run
    assert [r["notebook"] for r in rows] == wb.notebook_names()
    assert all(r["status"] == "ok" for r in rows)
    timings = pd.read_csv(paths["run_dir"] / "timings.csv")
    assert set(wb.notebook_names()) <= set(timings["notebook"])


def test_figures_and_tables_saved_with_profile_captions(smoke_run):
    profile, _, paths = smoke_run
    pngs = sorted(paths["figures_dir"].glob("*.png"))
    assert pngs, "no figure saved"
    for png in pngs:
        assert png.stat().st_size > 1000
        caption = png.parent / f"{png.stem}.caption.txt"
        assert f"[profile: {profile['name']}]" in caption.read_text()
    csvs = sorted(paths["tables_dir"].glob("*.csv"))
    assert csvs, "no table saved"
    for csv in csvs:
        assert (csv.parent / f"{csv.stem}.md").exists()
