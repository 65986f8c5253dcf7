"""The checks both smoke-notebook test files run (tests/test_notebooks.py and
tests/test_notebooks_modelfree.py): `make test` runs the two files in its two pytest processes
side by side, each over its own part of the smoke profile (params/smoke-modelfree.yaml names the
part that loads no language model). A file subclasses :class:`SmokeChecks` with the notebooks it
runs (``NAMES``) and defines a module fixture ``smoke_run`` (:func:`run`); it imports the
``rec`` fixture from here."""
from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import ClassVar

import pytest

from qrlib import workbook as wb

SMOKE = wb.REPO_ROOT / "params" / "smoke.yaml"
MODEL_FREE = wb.REPO_ROOT / "params" / "smoke-modelfree.yaml"


@functools.cache
def _model_free() -> tuple[str, ...]:
    # the profile's `only` list is all that is read here; running it validates the profile
    return tuple(wb.profile_notebooks(wb.load_profile(MODEL_FREE, validate=False)))


def model_free_notebooks() -> list[str]:
    """The smoke notebooks that params/smoke-modelfree.yaml runs, in run order."""
    return list(_model_free())


def model_notebooks() -> list[str]:
    """The other smoke notebooks (they load a language model), in run order."""
    return [n for n in wb.notebook_names() if n not in _model_free()]


def run(profile_path: Path, only: list[str] | None = None, jobs: int = 1):
    """Run a profile (or the ``only`` notebooks of it) with up to ``jobs`` notebooks at once:
    (profile, runner rows, run paths)."""
    profile = wb.load_profile(profile_path)
    rows = wb.run_profile(profile_path, only=only, jobs=jobs)
    return profile, rows, wb.run_paths(profile["name"])


@pytest.fixture(scope="module")
def rec(smoke_run):
    """The key numbers the run's notebooks recorded (qrlib.eval.record), by notebook."""
    from qrlib.eval.record import read_records

    return read_records(smoke_run[2]["run_dir"])


class SmokeChecks:
    """What every executed smoke notebook must show, over the notebooks ``NAMES``."""

    NAMES: ClassVar[list[str]] = []
    # notebooks that do not record key numbers yet (a ratchet: remove a name once it does)
    PENDING_RECORDS: ClassVar[set[str]] = set()
    # claims whose rows this part of smoke does not train, with the reason
    UNTESTED_CLAIMS: ClassVar[dict[str, str]] = {}

    def test_every_notebook_ran(self, smoke_run):
        """Every notebook of ``NAMES`` ran, in order, and has a row in the run's timings."""
        import pandas as pd

        _, rows, paths = smoke_run
        assert [r["notebook"] for r in rows] == self.NAMES
        assert all(r["status"] == "ok" for r in rows)
        timings = pd.read_csv(paths["run_dir"] / "timings.csv")
        assert set(self.NAMES) <= set(timings["notebook"])

    def test_executed_notebooks_show_no_logs_bars_reprs_or_paths(self, smoke_run):
        """Clean outputs: every kind of qrlib.workbook.noise is zero in every executed notebook
        (logs, warnings and progress bars go to the run's log file)."""
        from qrlib.workbook.noise import noise_lines

        found = {}
        for name in self.NAMES:
            nb = smoke_run[2]["run_dir"] / "notebooks" / f"{name}.ipynb"
            lines = noise_lines(json.loads(nb.read_text(encoding="utf-8")))
            if lines:
                found[name] = {k: (len(v), v[0]) for k, v in lines.items()}
        assert not found, found

    def test_figures_and_tables_saved_with_profile_captions(self, smoke_run):
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
            if csv.stem.endswith("_comparisons_per_query"):  # data for pairing, not for reading:
                assert (csv.parent / f"{csv.stem[:-len('_per_query')]}.md").exists()  # its table's
                continue
            assert (csv.parent / f"{csv.stem}.md").exists()

    def test_smoke_notebooks_publish_small_with_a_header(self, smoke_run, tmp_path):
        """The publishing mechanism on this run's executed notebooks (cpu is published the
        same way)."""
        import nbformat

        from qrlib.workbook import publish

        paths = [p for p in publish.publish_notebooks(smoke_run[0]["name"], dest=tmp_path)
                 if p.stem in self.NAMES]
        assert {p.stem for p in paths} == set(self.NAMES)
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
        assert (tmp_path / "README.md").exists()

    def test_every_notebook_records_its_key_numbers(self, rec):
        missing = {n for n in self.NAMES if not rec.get(n)}
        assert missing <= self.PENDING_RECORDS, (
            f"notebooks without recorded key numbers: {sorted(missing - self.PENDING_RECORDS)}; "
            "record them with qrlib.eval.record.Recorder(run_dir, name) and assert them below")
        done = self.PENDING_RECORDS & (set(self.NAMES) - missing)
        assert not done, f"{sorted(done)} now record key numbers: remove them from PENDING_RECORDS"

    def test_every_claim_selects_rows_of_the_smoke_tables(self, smoke_run):
        """Every scoreboard claim on one of ``NAMES`` selects rows of the run's tables (not
        "not run"), but those in ``UNTESTED_CLAIMS``."""
        from qrlib.workbook import scoreboard

        seen = 0
        for c in scoreboard.load_claims(wb.REPO_ROOT):
            if c.notebook not in self.NAMES or c.id in self.UNTESTED_CLAIMS:
                continue
            v = scoreboard.verdict_of(c, smoke_run[2]["tables_dir"])
            assert v["verdict"] != "not run", (c.id, v["why"])
            seen += 1
        assert seen, f"no claim on {self.NAMES}"
