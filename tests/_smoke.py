"""Helpers of the two smoke-notebook test files (tests/test_notebooks.py and
tests/test_notebooks_modelfree.py): `make test` runs them in its two pytest processes side by
side, each over its own part of the smoke profile (params/smoke-modelfree.yaml names the part
that loads no language model), and both check their executed notebooks the same way."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from qrlib import workbook as wb

SMOKE = wb.REPO_ROOT / "params" / "smoke.yaml"
MODEL_FREE = wb.REPO_ROOT / "params" / "smoke-modelfree.yaml"


def model_free_notebooks() -> list[str]:
    """The smoke notebooks that params/smoke-modelfree.yaml runs, in run order."""
    return wb.profile_notebooks(wb.load_profile(MODEL_FREE))


def run(profile_path: Path, only: list[str] | None = None):
    """Run a profile (or the ``only`` notebooks of it): (profile, runner rows, run paths)."""
    profile = wb.load_profile(profile_path)
    rows = wb.run_profile(profile_path, only=only)
    return profile, rows, wb.run_paths(profile["name"])


def check_ran(rows: list[dict[str, Any]], paths: dict[str, Path], names: list[str]) -> None:
    """Every notebook of ``names`` ran, in order, and has a row in the run's timings."""
    import pandas as pd

    assert [r["notebook"] for r in rows] == names
    assert all(r["status"] == "ok" for r in rows)
    timings = pd.read_csv(paths["run_dir"] / "timings.csv")
    assert set(names) <= set(timings["notebook"])


def check_no_noise(paths: dict[str, Path], names: list[str]) -> None:
    """Clean outputs: every kind of qrlib.workbook.noise is zero in every executed notebook
    of ``names`` (logs, warnings and progress bars go to the run's log file)."""
    from qrlib.workbook.noise import noise_lines

    found = {}
    for name in names:
        nb = paths["run_dir"] / "notebooks" / f"{name}.ipynb"
        lines = noise_lines(json.loads(nb.read_text(encoding="utf-8")))
        if lines:
            found[name] = {k: (len(v), v[0]) for k, v in lines.items()}
    assert not found, found


def check_figures_and_tables(profile: dict[str, Any], paths: dict[str, Path]) -> None:
    """Figures carry the profile in their captions; every table has its Markdown twin."""
    pngs = sorted(paths["figures_dir"].glob("*.png"))
    assert pngs, "no figure saved"
    for png in pngs:
        assert png.stat().st_size > 1000
        caption = png.parent / f"{png.stem}.caption.txt"
        assert f"[profile: {profile['name']}]" in caption.read_text()
    csvs = sorted(paths["tables_dir"].glob("*.csv"))
    assert csvs, "no table saved"
    for csv in csvs:
        if csv.stem.endswith("_comparisons_per_query"):  # data for pairing, not for reading:
            assert (csv.parent / f"{csv.stem[:-len('_per_query')]}.md").exists()  # its table's
            continue
        assert (csv.parent / f"{csv.stem}.md").exists()


def check_published(profile: dict[str, Any], names: list[str], dest: Path) -> None:
    """The publishing mechanism on a run's executed notebooks (cpu is published the same way):
    small, with a header naming the profile, every notebook with output and a figure."""
    import nbformat

    from qrlib.workbook import publish

    paths = [p for p in publish.publish_notebooks(profile["name"], dest=dest) if p.stem in names]
    assert {p.stem for p in paths} == set(names)
    images = 0
    for p in paths:
        assert p.stat().st_size < 1_500_000, p
        nb = nbformat.read(p, as_version=4)
        assert nb.cells[0].id == publish.HEADER_ID and "smoke" in nb.cells[0].source
        outs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
        assert outs, p
        assert not any("application/pdf" in o.get("data", {}) for o in outs)
        images += sum("image/png" in o.get("data", {}) for o in outs)
    assert images >= len(paths)
    assert (dest / "README.md").exists()


def check_records(rec: dict[str, dict], names: list[str], pending: set[str]) -> None:
    """Every notebook of ``names`` records key numbers (qrlib.eval.record), but ``pending``
    (a ratchet: remove a name once it does)."""
    missing = {n for n in names if not rec.get(n)}
    assert missing <= pending, (
        f"notebooks without recorded key numbers: {sorted(missing - pending)}; record "
        "them with qrlib.eval.record.Recorder(run_dir, name) and assert them in the tests")
    done = pending & (set(names) - missing)
    assert not done, f"{sorted(done)} now record key numbers: remove them from PENDING_RECORDS"


def check_claims(tables_dir: Path, names: list[str], untested: dict[str, str]) -> None:
    """Every scoreboard claim on one of ``names`` selects rows of the run's tables (not "not
    run"), but those in ``untested``."""
    from qrlib.workbook import scoreboard

    seen = 0
    for c in scoreboard.load_claims(wb.REPO_ROOT):
        if c.notebook not in names or c.id in untested:
            continue
        v = scoreboard.verdict_of(c, tables_dir)
        assert v["verdict"] != "not run", (c.id, v["why"])
        seen += 1
    assert seen, f"no claim on {names}"
