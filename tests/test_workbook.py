"""The workbook runner: profiles, validation, papermill execution, resume, timings, errors."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from qrlib import workbook as wb
from qrlib.errors import QrlibError

TOY = textwrap.dedent('''\
    # %% tags=["parameters"]
    profile = "dev"  # profile name
    run_dir = "../runs/dev"  # where artifacts go
    tables_dir = "../tables/dev"
    seed = 0
    n = 3  # how many numbers
    fail = False  # raise on purpose

    # %% [markdown]
    # # Toy notebook

    # %%
    import pandas as pd
    from qrlib.workbook import save_table
    if fail:
        raise RuntimeError("asked to fail")
    save_table(pd.DataFrame({"i": list(range(n)), "seed": seed}), "toy", tables_dir)
    ''')


@pytest.fixture()
def toy_repo(tmp_path, monkeypatch):
    """A repo root with one toy notebook, so runner tests need no real notebook."""
    src = tmp_path / "notebooks" / "src"
    src.mkdir(parents=True)
    (src / "01_toy.py").write_text(TOY)
    (tmp_path / "params").mkdir()
    monkeypatch.setattr(wb, "NOTEBOOK_DIR", tmp_path / "notebooks")
    monkeypatch.setattr(wb, "NOTEBOOK_SRC_DIR", src)
    monkeypatch.setattr(wb, "REPO_ROOT", tmp_path)
    wb.build_notebooks()
    return tmp_path


def _profile(root: Path, text: str, name: str = "p.yaml") -> Path:
    path = root / "params" / name
    path.write_text(textwrap.dedent(text))
    return path


def test_atomic_write_leaves_nothing_on_failure(tmp_path):
    target = tmp_path / "out.txt"
    wb.atomic_write(target, "old")
    with pytest.raises(RuntimeError), wb.atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("crash mid-write")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_save_table_writes_csv_and_markdown(tmp_path):
    paths = wb.save_table(pd.DataFrame({"a": [1.23456]}), "t", tmp_path, caption="cap")
    assert pd.read_csv(paths["csv"])["a"].iloc[0] == pytest.approx(1.23456)
    md = paths["md"].read_text()
    assert "1.2346" in md and md.rstrip().endswith("cap")


def test_notebook_parameters_read_from_tagged_cell(toy_repo):
    params = wb.notebook_parameters("01_toy")
    assert {"profile", "run_dir", "tables_dir", "seed", "n", "fail"} <= set(params)


def test_run_injects_parameters_writes_timings_and_resumes(toy_repo, capsys):
    prof = _profile(toy_repo, """
        name: toyrun
        globals: {seed: 7}
        notebooks:
          01_toy: {n: 5}
        """)
    rows = wb.run_profile(prof, root=toy_repo)
    assert rows[0]["status"] == "ok"
    table = pd.read_csv(toy_repo / "tables" / "toyrun" / "toy.csv")
    assert len(table) == 5 and set(table["seed"]) == {7}
    timings = pd.read_csv(toy_repo / "runs" / "toyrun" / "timings.csv")
    assert list(timings["notebook"]) == ["01_toy"] and timings["peak_rss_mb"].iloc[0] > 0
    assert (toy_repo / "runs" / "toyrun" / "notebooks" / "01_toy.ipynb").exists()
    rows = wb.run_profile(prof, root=toy_repo, resume=True)
    assert rows[0]["status"] == "skipped"
    # changing a parameter invalidates the completion marker
    _profile(toy_repo, """
        name: toyrun
        notebooks:
          01_toy: {n: 2}
        """, "p.yaml")
    rows = wb.run_profile(prof, root=toy_repo, resume=True)
    assert rows[0]["status"] == "ok"
    assert "total wall time" in capsys.readouterr().out


def test_failed_notebook_is_named_with_its_cell(toy_repo):
    prof = _profile(toy_repo, """
        name: bad
        notebooks:
          01_toy: {fail: true}
        """)
    with pytest.raises(QrlibError, match=r"notebook 01_toy failed: cell \[\d+\] raised RuntimeError"):
        wb.run_profile(prof, root=toy_repo)
    assert not (toy_repo / "runs" / "bad" / "done" / "01_toy.json").exists()


@pytest.mark.parametrize("text, message", [
    ("name: x\nbogus: 1\n", "unknown top-level key 'bogus'"),
    ("name: x\nnotebooks:\n  01_toy: {nope: 1}\n", "unknown key 'nope' for notebook 01_toy"),
    ("name: x\nnotebooks:\n  07_missing: {}\n", "unknown notebook '07_missing'"),
    ("name: x\nglobals: {zzz: 1}\n", "unknown global key 'zzz'"),
    ("name: x\nglobals: {run_dir: /tmp}\n", "set by the runner"),
    ("name: x\nglobals: [1, 2]\n", "'globals' must be a mapping"),
    ("name: [unclosed\n", "not valid YAML"),
    ("- just\n- a list\n", "must be a mapping"),
])
def test_bad_profiles_give_one_line_errors(toy_repo, text, message):
    prof = _profile(toy_repo, text)
    with pytest.raises(QrlibError, match=message) as info:
        wb.load_profile(prof)
    assert "\n" not in str(info.value)


def test_extends_merges_parent(toy_repo):
    _profile(toy_repo, "name: base\nglobals: {seed: 1}\nnotebooks:\n  01_toy: {n: 4, fail: false}\n",
             "base.yaml")
    child = _profile(toy_repo, "extends: base.yaml\nname: child\nnotebooks:\n  01_toy: {n: 9}\n",
                     "child.yaml")
    prof = wb.load_profile(child)
    assert prof["name"] == "child" and prof["globals"] == {"seed": 1}
    assert prof["notebooks"]["01_toy"] == {"n": 9, "fail": False}


def test_cli_reports_bad_profile_in_one_line_and_exit_2(tmp_path):
    missing = tmp_path / "nope.yaml"
    proc = subprocess.run([sys.executable, "-m", "qrlib", "run", str(missing)],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "not found" in proc.stderr


def test_only_rejects_unknown_notebook(toy_repo):
    prof = _profile(toy_repo, "name: x\n")
    with pytest.raises(QrlibError, match="--only '42' matches no notebook"):
        wb.run_profile(prof, root=toy_repo, only=["42"])


def test_repo_notebooks_are_built_from_their_sources():
    """notebooks/*.ipynb must match notebooks/src/*.py (run `make notebooks` after edits)."""
    import jupytext

    for name in wb.notebook_names():
        src = jupytext.read(wb.NOTEBOOK_SRC_DIR / f"{name}.py")
        built = jupytext.read(wb.NOTEBOOK_DIR / f"{name}.ipynb")
        assert [c.source for c in src.cells] == [c.source for c in built.cells], name
        first = built.cells[0]
        assert first.cell_type == "code" and "parameters" in first.metadata.get("tags", []), name
