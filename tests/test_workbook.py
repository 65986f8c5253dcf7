"""The workbook runner: profiles, validation, papermill execution, resume, timings, errors."""
from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from qrlib import workbook as wb
from qrlib.core.errors import QrlibError

TOY = textwrap.dedent('''\
    # %% tags=["parameters"]
    profile = "dev"  # profile name
    run_dir = "../runs/dev"  # where artifacts go
    tables_dir = "../tables/dev"
    seed = 0
    n = 3  # how many numbers
    fail = False  # raise on purpose
    items = ["a", "b"]  # a list parameter
    rate = 0.5  # a float parameter
    opt = None  # anything goes

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
    monkeypatch.setattr(wb.profiles, "NOTEBOOK_DIR", tmp_path / "notebooks")
    monkeypatch.setattr(wb.profiles, "NOTEBOOK_SRC_DIR", src)
    monkeypatch.setattr(wb.profiles, "REPO_ROOT", tmp_path)
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


def test_a_profile_only_list_limits_run_and_status(toy_repo, capsys):
    """A profile's ``only:`` list (a seed replica) is all a plain run runs and all status
    lists; ``--only`` outside it, a name matching nothing, and a list missing a notebook a
    member reads are one-line errors."""
    src = toy_repo / "notebooks" / "src"
    (src / "02_toy.py").write_text(TOY)
    reader = TOY.replace('# # Toy notebook', '# # Reader')
    (src / "03_reader.py").write_text(
        "# ---\n# jupyter:\n#   qrlib:\n#     reads: [02_toy]\n# ---\n\n" + reader)
    wb.build_notebooks()
    prof = _profile(toy_repo, "name: sub\nonly: [2, 03_reader]\n")
    rows = wb.run_profile(prof, root=toy_repo)
    assert [r["notebook"] for r in rows] == ["02_toy", "03_reader"]
    assert [s.notebook for s in wb.profile_status(prof, toy_repo)] == ["02_toy", "03_reader"]
    with pytest.raises(QrlibError, match=r"--only '01': profile sub has only \['02_toy', '03_reader'\]"):
        wb.run_profile(prof, root=toy_repo, only=["01"])
    with pytest.raises(QrlibError, match="profile x: 'only' names '42', which matches no notebook"):
        wb.load_profile(_profile(toy_repo, "name: x\nonly: [42]\n", "bad.yaml"))
    with pytest.raises(QrlibError, match="'only' must be a list of notebook names or numbers"):
        wb.load_profile(_profile(toy_repo, "name: x\nonly: 3\n", "bad2.yaml"))
    gap = _profile(toy_repo, "name: gap\nonly: [3]\n", "gap.yaml")
    with pytest.raises(QrlibError, match="'only' list has 03_reader but not 02_toy, which "
                                         "03_reader reads; add it to 'only'"):
        wb.profile_status(gap, toy_repo)


def test_the_long_set_runs_only_when_asked(toy_repo, capsys):
    """A profile's ``long:`` notebooks are skipped by a plain run and run with ``long`` or
    ``only``; an unknown entry is a one-line error naming the key."""
    prof = _profile(toy_repo, """
        name: longrun
        long: [1]
        notebooks:
          01_toy: {n: 2}
        """)
    assert wb.run_profile(prof, root=toy_repo)[0]["status"] == "skipped"
    assert "in the profile's long set, skipped (run it with --long or --only 01)" in \
        capsys.readouterr().out
    assert not (toy_repo / "tables" / "longrun" / "toy.csv").exists()
    assert wb.run_profile(prof, root=toy_repo, long=True)[0]["status"] == "ok"
    (toy_repo / "runs" / "longrun" / "done" / "01_toy.json").unlink()
    assert wb.run_profile(prof, root=toy_repo, only=["01"])[0]["status"] == "ok"
    assert wb.long_notebooks(wb.load_profile(prof)) == ["01_toy"]
    bad = _profile(toy_repo, "name: x\nlong: [42]\n", "bad.yaml")
    with pytest.raises(QrlibError, match="profile x: 'long' names '42', which matches no notebook"):
        wb.load_profile(bad)
    bad = _profile(toy_repo, "name: x\nlong: 13\n", "bad2.yaml")
    with pytest.raises(QrlibError, match="'long' must be a list of notebook names or numbers"):
        wb.load_profile(bad)


def test_repo_notebooks_are_built_from_their_sources():
    """notebooks/*.ipynb must match notebooks/src/*.py (run `make notebooks` after edits)."""
    import jupytext

    for name in wb.notebook_names():
        src = jupytext.read(wb.NOTEBOOK_SRC_DIR / f"{name}.py")
        built = jupytext.read(wb.NOTEBOOK_DIR / f"{name}.ipynb")
        assert [c.source for c in src.cells] == [c.source for c in built.cells], name
        first = built.cells[0]
        assert first.cell_type == "code" and "parameters" in first.metadata.get("tags", []), name



# ----------------------------------------------------------------- profiles: hostile input
def test_yaml_syntax_error_names_line_and_column(toy_repo):
    prof = _profile(toy_repo, "name: x\nglobals:\n  seed: 1\n notebooks: {}\n")
    with pytest.raises(QrlibError, match=r"not valid YAML at line \d+, column \d+") as info:
        wb.load_profile(prof)
    assert "\n" not in str(info.value)


def test_duplicate_yaml_key_is_an_error(toy_repo):
    prof = _profile(toy_repo, "name: x\nnotebooks:\n  01_toy: {n: 1}\n  01_toy: {n: 2}\n")
    with pytest.raises(QrlibError, match=r"line 4.*'01_toy' appears twice"):
        wb.load_profile(prof)


def test_extends_cycle_is_an_error(toy_repo):
    _profile(toy_repo, "extends: b.yaml\nname: a\n", "a.yaml")
    _profile(toy_repo, "extends: a.yaml\nname: b\n", "b.yaml")
    with pytest.raises(QrlibError, match=r"cycle \(a.yaml -> b.yaml -> a.yaml\)"):
        wb.load_profile(toy_repo / "params" / "a.yaml")
    _profile(toy_repo, "extends: self.yaml\nname: s\n", "self.yaml")
    with pytest.raises(QrlibError, match="cycle"):
        wb.load_profile(toy_repo / "params" / "self.yaml")


@pytest.mark.parametrize("section, message", [
    ("notebooks:\n  01_toy: {n: forty}", r"notebooks.01_toy: n must be an integer .* got a string 'forty'"),
    ("notebooks:\n  01_toy: {n: 2.5}", "n must be an integer"),
    ("notebooks:\n  01_toy: {n: true}", "n must be an integer"),
    ("notebooks:\n  01_toy: {fail: 'false'}", "fail must be a boolean"),
    ("notebooks:\n  01_toy: {fail: 0}", "fail must be a boolean"),
    ("notebooks:\n  01_toy: {items: scifact}", "items must be a list"),
    ("notebooks:\n  01_toy: {items: {a: 1}}", "items must be a list"),
    ("notebooks:\n  01_toy: {rate: fast}", "rate must be a number"),
    ("notebooks:\n  01_toy: {rate: 5e-5}", "YAML reads 5e-5 as text"),
    ("globals: {seed: zero}", r"globals: seed must be an integer"),
    ("notebooks:\n  01_toy: {run_dir: /tmp/elsewhere}", "notebooks.01_toy.run_dir is set by the runner"),
    ("notebooks:\n  01_toy: {profile: other}", "set by the runner"),
])
def test_wrong_parameter_types_are_refused_before_any_notebook_runs(toy_repo, section, message):
    prof = _profile(toy_repo, f"name: typed\n{section}\n")
    with pytest.raises(QrlibError, match=message) as info:
        wb.run_profile(prof, root=toy_repo)
    assert "\n" not in str(info.value)
    assert not (toy_repo / "runs" / "typed" / "notebooks").exists()


def test_right_parameter_types_are_accepted(toy_repo):
    prof = _profile(toy_repo, """
        name: typed
        globals: {seed: 3}
        notebooks:
          01_toy: {n: null, rate: 1, opt: [anything], items: [x], fail: false}
        """)
    assert wb.load_profile(prof)["notebooks"]["01_toy"]["rate"] == 1


def test_repo_profiles_pass_the_type_checks():
    for path in sorted((wb.REPO_ROOT / "params").glob("*.yaml")):
        if "accelerate" not in path.name:
            wb.load_profile(path)


# ----------------------------------------------------------------- resume fingerprints
CHAIN_01 = textwrap.dedent('''\
    # %% tags=["parameters"]
    run_dir = "../runs/dev"
    n = 3

    # %%
    from pathlib import Path
    from qrlib.workbook import atomic_write
    atomic_write(Path(run_dir) / "n.txt", str(n))
    ''')
CHAIN_02 = textwrap.dedent('''\
    # ---
    # jupyter:
    #   qrlib:
    #     reads: [01_make]
    # ---

    # %% tags=["parameters"]
    run_dir = "../runs/dev"
    tables_dir = "../tables/dev"
    data_dir = None

    # %%
    import os
    from pathlib import Path
    import pandas as pd
    from qrlib.core.io import save_table
    n = int((Path(run_dir) / "n.txt").read_text())
    extra = len((Path(os.environ["QRLIB_DATA"]) / "toyset" / "corpus.jsonl").read_text().splitlines())
    save_table(pd.DataFrame({"i": list(range(n + extra))}), "02_chain", tables_dir)
    ''')


@pytest.fixture()
def chain_repo(tmp_path, monkeypatch):
    """Two notebooks: 02 reads what 01 wrote; a data folder 02 could read."""
    src = tmp_path / "notebooks" / "src"
    src.mkdir(parents=True)
    (src / "01_make.py").write_text(CHAIN_01)
    (src / "02_use.py").write_text(CHAIN_02)
    (tmp_path / "params").mkdir()
    data = tmp_path / "mydata" / "toyset"
    data.mkdir(parents=True)
    (data / "corpus.jsonl").write_text('{"_id": "d1", "text": "x"}\n')
    monkeypatch.setattr(wb.profiles, "NOTEBOOK_DIR", tmp_path / "notebooks")
    monkeypatch.setattr(wb.profiles, "NOTEBOOK_SRC_DIR", src)
    monkeypatch.setattr(wb.profiles, "REPO_ROOT", tmp_path)
    monkeypatch.setenv("QRLIB_DATA", str(tmp_path / "mydata"))
    wb.build_notebooks()
    return tmp_path


def _statuses(rows):
    return {r["notebook"]: r["status"] for r in rows}


def _states(prof, root):
    from qrlib.workbook.freshness import profile_status

    return {s.notebook: (s.state, "; ".join(s.reasons)) for s in profile_status(prof, root)}


def test_stale_reruns_a_notebook_whose_upstream_data_or_params_changed(chain_repo, capsys):
    prof = _profile(chain_repo, "name: chain\nnotebooks:\n  01_make: {n: 10}\n")
    assert _states(prof, chain_repo) == {"01_make": ("never run", ""),
                                         "02_use": ("never run", "")}
    assert _statuses(wb.run_profile(prof, root=chain_repo)) == {"01_make": "ok", "02_use": "ok"}
    table = chain_repo / "tables" / "chain" / "02_chain.csv"
    assert len(wb.read_table(table)) == 11
    first = table.read_text().splitlines()[0]
    assert first.startswith("# qrlib: 02_use, profile chain, commit ") and "fingerprint " in first
    assert "# qrlib:" not in (chain_repo / "tables" / "chain" / "02_chain.md").read_text()
    assert "`qrlib: 02_use, profile chain" in (chain_repo / "tables" / "chain" / "02_chain.md").read_text()
    manifest = wb.load_json(chain_repo / "tables" / "chain" / "manifest.json")
    assert list(manifest["02_use"]["inputs"]["data"]) == ["toyset"]
    assert manifest["02_use"]["inputs"]["upstream"] == {"01_make": manifest["01_make"]["fingerprint"]}
    assert "/tmp" not in json.dumps(manifest["02_use"]["inputs"]["params"])
    assert _states(prof, chain_repo) == {"01_make": ("fresh", ""), "02_use": ("fresh", "")}
    assert _statuses(wb.run_profile(prof, root=chain_repo, stale=True)) == {
        "01_make": "skipped", "02_use": "skipped"}
    # 01's section changes: 01 is stale, and 02, which declares reading 01, with it
    _profile(chain_repo, "name: chain\nnotebooks:\n  01_make: {n: 5}\n", "p.yaml")
    states = _states(prof, chain_repo)
    assert states["01_make"] == ("stale", "parameter n changed")
    assert states["02_use"] == ("stale", "reads 01_make, which is stale")
    assert _statuses(wb.run_profile(prof, root=chain_repo, stale=True)) == {
        "01_make": "ok", "02_use": "ok"}
    assert len(wb.read_table(table)) == 6
    # a data file changes (content): only the notebook that read it is stale
    corpus = chain_repo / "mydata" / "toyset" / "corpus.jsonl"
    corpus.write_text(corpus.read_text() + '{"_id": "d2", "text": "y"}\n')
    assert _states(prof, chain_repo) == {"01_make": ("fresh", ""),
                                         "02_use": ("stale", "data toyset changed")}
    assert _statuses(wb.run_profile(prof, root=chain_repo, stale=True)) == {
        "01_make": "skipped", "02_use": "ok"}
    assert len(wb.read_table(table)) == 7


def test_reading_an_undeclared_artifact_fails_the_notebook(chain_repo):
    src = chain_repo / "notebooks" / "src" / "02_use.py"
    src.write_text("# %% tags" + src.read_text().split("# %% tags", 1)[1])  # header dropped
    wb.build_notebooks()
    prof = _profile(chain_repo, "name: chain\n")
    with pytest.raises(QrlibError, match=r"02_use read n.txt, an artifact of 01_make, but its "
                                         r"source header does not declare it"):
        wb.run_profile(prof, root=chain_repo)
    assert not (chain_repo / "tables" / "chain" / "manifest.json").read_text().count("02_use")


# ----------------------------------------------------------------- notebooks side by side
SPAN = textwrap.dedent('''\
    # %% tags=["parameters"]
    run_dir = "../runs/dev"
    tables_dir = "../tables/dev"
    pause = 0.0
    fail = False

    # %%
    import time
    import pandas as pd
    from qrlib.core.io import save_table
    time.sleep(pause)
    if fail:
        raise RuntimeError("asked to fail")
    save_table(pd.DataFrame({"x": [1]}), "03_alone", tables_dir)
    ''')


def _spans(chain_repo, prof_text, jobs=2, when_idle=False):
    """chain_repo plus 03_alone (reads nothing), run with ``jobs``: (rows, manifest)."""
    (chain_repo / "notebooks" / "src" / "03_alone.py").write_text(SPAN)
    wb.build_notebooks()
    prof = _profile(chain_repo, prof_text)
    rows = wb.run_profile(prof, root=chain_repo, jobs=jobs, when_idle=when_idle)
    return rows, wb.load_json(chain_repo / "tables" / "chain" / "manifest.json")


def test_side_by_side_runs_a_reader_after_what_it_reads_and_records_each_kernel(chain_repo):
    rows, manifest = _spans(chain_repo, "name: chain\nnotebooks:\n  03_alone: {pause: 6}\n")
    assert [(r["notebook"], r["status"]) for r in rows] == [
        ("01_make", "ok"), ("02_use", "ok"), ("03_alone", "ok")]  # profile order
    timings = pd.read_csv(chain_repo / "runs" / "chain" / "timings.csv").set_index("notebook")
    end = {n: pd.Timestamp(t).timestamp() for n, t in timings["finished"].items()}
    # 03 (6 s asleep) ran beside 01 and then 02, which both finished while it ran
    assert list(timings.index) == ["01_make", "02_use", "03_alone"]
    # (one at a time, 03 would start once 02 had ended; "finished" is to the second)
    assert end["03_alone"] - timings.loc["03_alone", "wall_s"] < end["02_use"] - 1
    # 02 waited for 01: its inputs name 01's fingerprint, its read log its own data set
    assert manifest["02_use"]["inputs"]["upstream"] == {"01_make": manifest["01_make"]["fingerprint"]}
    assert list(manifest["02_use"]["inputs"]["data"]) == ["toyset"]
    assert len(wb.read_table(chain_repo / "tables" / "chain" / "02_chain.csv")) == 4
    # each notebook's peak is its own kernel's (a Python kernel: tens to hundreds of MB)
    assert all(30 < manifest[n]["peak_rss_mb"] < 2000 for n in ("01_make", "02_use", "03_alone"))
    assert (chain_repo / "runs" / "chain" / "notebooks" / "03_alone.ipynb").exists()


def test_side_by_side_starts_another_notebook_only_on_an_idle_core(chain_repo, monkeypatch):
    """With no core ever idle enough, --jobs 2 runs one notebook at a time: 02 (ready once 01
    ends, first in profile order) before 03; the first notebook never waits."""
    from qrlib.workbook import runner

    monkeypatch.setattr(runner, "IDLE_CORES_FOR_ANOTHER", 1e9)
    monkeypatch.setattr(runner, "IDLE_WINDOW_S", 0.2)
    rows, manifest = _spans(chain_repo, "name: chain\nnotebooks:\n  03_alone: {pause: 2}\n",
                            when_idle=True)
    assert [r["status"] for r in rows] == ["ok"] * 3 and len(manifest) == 3
    timings = pd.read_csv(chain_repo / "runs" / "chain" / "timings.csv").set_index("notebook")
    end = {n: pd.Timestamp(t).timestamp() for n, t in timings["finished"].items()}
    assert list(timings.index) == ["01_make", "02_use", "03_alone"]
    assert end["03_alone"] - timings.loc["03_alone", "wall_s"] >= end["02_use"] - 1


def test_side_by_side_a_failure_lets_the_others_finish_and_starts_nothing_after(chain_repo):
    src = chain_repo / "notebooks" / "src" / "01_make.py"
    src.write_text(src.read_text() + "raise RuntimeError('01 fails')\n")
    with pytest.raises(QrlibError, match=r"notebook 01_make failed: .*01 fails"):
        _spans(chain_repo, "name: chain\nnotebooks:\n  03_alone: {pause: 3}\n")
    manifest = wb.load_json(chain_repo / "tables" / "chain" / "manifest.json")
    assert "03_alone" in manifest and "01_make" not in manifest and "02_use" not in manifest
    nbdir = chain_repo / "runs" / "chain" / "notebooks"
    assert (nbdir / "INCOMPLETE-01_make.ipynb").exists() and (nbdir / "03_alone.ipynb").exists()
    assert not (nbdir / "02_use.ipynb").exists() and not (nbdir / "INCOMPLETE-02_use.ipynb").exists()
    assert not (chain_repo / "runs" / "chain" / "run.lock").exists()


@pytest.mark.parametrize("kwargs, message", [
    ({"jobs": 0}, "jobs must be a whole number of notebooks at once, 1 or more; got 0"),
    ({"jobs": 2, "park_at": "+5"}, "--park-at stops the one notebook running; it needs --jobs 1"),
])
def test_side_by_side_refuses_bad_jobs(toy_repo, kwargs, message):
    prof = _profile(toy_repo, "name: toyrun\n")
    with pytest.raises(QrlibError, match=re.escape(message)):
        wb.run_profile(prof, root=toy_repo, **kwargs)
    assert not (toy_repo / "runs" / "toyrun").exists()


@pytest.mark.skipif(not Path("/proc/self/autogroup").exists(), reason="no autogroups (Linux)")
def test_a_niced_runner_gives_its_kernels_its_priority(toy_repo):
    """Kernels run in sessions of their own; with autogroups a niced runner's kernels would
    compete at full weight unless their autogroup gets the runner's niceness."""
    src = toy_repo / "notebooks" / "src" / "02_prio.py"
    src.write_text(textwrap.dedent('''\
        # %% tags=["parameters"]
        run_dir = "../runs/dev"

        # %%
        import os
        from pathlib import Path
        (Path(run_dir) / "prio.txt").write_text(
            f"{os.getpriority(os.PRIO_PROCESS, 0)} {Path('/proc/self/autogroup').read_text()}")
        '''))
    wb.build_notebooks()
    prof = _profile(toy_repo, "name: prio\n")
    env = {**os.environ, "PYTHONPATH": str(wb.REPO_ROOT)}
    script = toy_repo / "run.py"
    script.write_text(textwrap.dedent(f'''\
        from pathlib import Path
        from qrlib import workbook as wb
        wb.profiles.NOTEBOOK_DIR = Path({str(toy_repo / "notebooks")!r})
        wb.profiles.NOTEBOOK_SRC_DIR = Path({str(src.parent)!r})
        wb.profiles.REPO_ROOT = Path({str(toy_repo)!r})
        wb.run_profile({str(prof)!r}, root=Path({str(toy_repo)!r}), only=["02"])
        '''))
    res = subprocess.run(["nice", "-n", "7", sys.executable, str(script)], env=env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    want = min(os.getpriority(os.PRIO_PROCESS, 0) + 7, 19)  # `nice -n 7` adds to ours
    nice, group = (toy_repo / "runs" / "prio" / "prio.txt").read_text().split(" ", 1)
    assert nice == str(want) and group.strip().endswith(f"nice {want}"), group


# ----------------------------------------------------------------- incomplete copies, lock
def test_failed_notebook_copy_is_marked_incomplete(toy_repo):
    prof = _profile(toy_repo, "name: bad\nnotebooks:\n  01_toy: {fail: true}\n")
    with pytest.raises(QrlibError, match="INCOMPLETE-01_toy.ipynb"):
        wb.run_profile(prof, root=toy_repo)
    nbdir = toy_repo / "runs" / "bad" / "notebooks"
    assert not (nbdir / "01_toy.ipynb").exists()
    text = (nbdir / "INCOMPLETE-01_toy.ipynb").read_text()
    assert "**INCOMPLETE**" in text
    # once it runs to the end, the copy is complete and the banner is gone
    _profile(toy_repo, "name: bad\n", "p.yaml")
    wb.run_profile(prof, root=toy_repo)
    assert not (nbdir / "INCOMPLETE-01_toy.ipynb").exists()
    assert "INCOMPLETE" not in (nbdir / "01_toy.ipynb").read_text()


SLOW = textwrap.dedent('''\
    # %% tags=["parameters"]
    run_dir = "../runs/dev"
    tables_dir = "../tables/dev"
    pause = 0.0

    # %%
    import time
    import pandas as pd
    from qrlib.workbook import save_table
    save_table(pd.DataFrame({"x": [1, 2, 3]}), "before", tables_dir)

    # %%
    time.sleep(pause)

    # %%
    save_table(pd.DataFrame({"x": [4]}), "after", tables_dir)
    ''')


def test_second_run_on_a_run_folder_is_refused_and_a_kill_leaves_an_incomplete_copy(
        tmp_path, monkeypatch, capsys):
    import os
    import signal
    import time

    import psutil

    src = tmp_path / "notebooks" / "src"
    src.mkdir(parents=True)
    (src / "01_slow.py").write_text(SLOW)
    (tmp_path / "params").mkdir()
    monkeypatch.setattr(wb.profiles, "NOTEBOOK_DIR", tmp_path / "notebooks")
    monkeypatch.setattr(wb.profiles, "NOTEBOOK_SRC_DIR", src)
    monkeypatch.setattr(wb.profiles, "REPO_ROOT", tmp_path)
    wb.build_notebooks()
    prof = _profile(tmp_path, "name: slow\nnotebooks:\n  01_slow: {pause: 60.0}\n")
    run_dir = tmp_path / "runs" / "slow"
    code = (f"from pathlib import Path; from qrlib import workbook as wb; "
            f"root = Path({str(tmp_path)!r}); wb.profiles.NOTEBOOK_DIR = root / 'notebooks'; "
            f"wb.profiles.NOTEBOOK_SRC_DIR = root / 'notebooks' / 'src'; wb.profiles.REPO_ROOT = root; "
            f"wb.run_profile({str(prof)!r}, root=root)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        before = tmp_path / "tables" / "slow" / "before.csv"
        deadline = time.time() + 120
        while not before.exists():  # the first cell has run; the kernel now sleeps
            assert proc.poll() is None and time.time() < deadline, "the first run did not start"
            time.sleep(0.2)
        with pytest.raises(QrlibError, match=rf"in use by PID {proc.pid}\b") as info:
            wb.run_profile(prof, root=tmp_path)
        assert "\n" not in str(info.value)
        from qrlib.__main__ import main

        capsys.readouterr()
        assert main(["run", str(prof)]) == 2  # the CLI: one line, exit status 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"in use by PID {proc.pid}" in err
    finally:  # a kill mid-notebook: the runner and its kernel
        family = [proc.pid]
        with contextlib.suppress(psutil.Error):
            family += [c.pid for c in psutil.Process(proc.pid).children(recursive=True)]
        for pid in family:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        proc.wait()
    nbdir = run_dir / "notebooks"
    assert not (nbdir / "01_slow.ipynb").exists() and not (run_dir / "done").exists()
    assert "**INCOMPLETE**" in (nbdir / "INCOMPLETE-01_slow.ipynb").read_text()
    assert pd.read_csv(before)["x"].tolist() == [1, 2, 3]  # written atomically before the kill
    assert not (tmp_path / "tables" / "slow" / "after.csv").exists()
    assert not list((tmp_path / "tables" / "slow").glob(".*.tmp"))
    # the killed run's lock file is left behind; the next run takes it over and completes
    assert f'"pid": {proc.pid}' in (run_dir / "run.lock").read_text()
    _profile(tmp_path, "name: slow\n", "p.yaml")
    capsys.readouterr()
    assert _statuses(wb.run_profile(prof, root=tmp_path)) == {"01_slow": "ok"}
    assert f"took over the stale lock {run_dir / 'run.lock'} of PID {proc.pid}" in \
        capsys.readouterr().out
    assert not (run_dir / "run.lock").exists()
    assert not (nbdir / "INCOMPLETE-01_slow.ipynb").exists() and (nbdir / "01_slow.ipynb").exists()
    assert not list(nbdir.glob(".*.tmp"))  # a save the kill cut short is cleared on the rerun


def test_papermill_saves_of_executed_copies_are_atomic(tmp_path, monkeypatch):
    """A save cut short (here: the rename fails) keeps the previous copy, never an empty one."""
    import os

    import papermill as pm

    from qrlib.core import io as qio
    from qrlib.workbook import runner

    folder = tmp_path / "runs" / "x" / "notebooks"
    folder.mkdir(parents=True)
    runner._atomic_papermill_saves(pm, folder)
    runner._atomic_papermill_saves(pm, folder)  # once per folder, however often asked
    assert sum(s == f"{folder}{os.sep}" for s, _ in pm.iorw.papermill_io._handlers) == 1
    copy = folder / "INCOMPLETE-01_a.ipynb"
    pm.iorw.papermill_io.write('{"cells": 1}', str(copy))
    assert copy.read_text() == '{"cells": 1}'

    def cut(*_):
        raise OSError("killed mid-save")
    monkeypatch.setattr(qio.os, "replace", cut)
    with pytest.raises(OSError, match="killed mid-save"):
        pm.iorw.papermill_io.write('{"cells": 2}', str(copy))
    assert copy.read_text() == '{"cells": 1}' and not list(folder.glob(".*.tmp"))
    other = tmp_path / "elsewhere.ipynb"  # other paths keep papermill's own handler
    pm.iorw.papermill_io.write("{}", str(other))
    assert other.read_text() == "{}"


def test_artifacts_follow_the_umask(tmp_path):
    import os
    import stat

    old = os.umask(0o022)
    try:
        path = wb.atomic_write(tmp_path / "shared.txt", "x")
        assert stat.S_IMODE(path.stat().st_mode) == 0o644
        os.umask(0o077)
        path = wb.atomic_write(tmp_path / "private.txt", "x")
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    finally:
        os.umask(old)


def test_a_dying_kernel_is_a_one_line_failure_with_an_incomplete_copy(tmp_path, monkeypatch):
    src = tmp_path / "notebooks" / "src"
    src.mkdir(parents=True)
    (src / "01_die.py").write_text(textwrap.dedent('''\
        # %% tags=["parameters"]
        run_dir = "../runs/dev"

        # %%
        import os
        os._exit(3)  # what the OOM killer does to a kernel
        '''))
    (tmp_path / "params").mkdir()
    monkeypatch.setattr(wb.profiles, "NOTEBOOK_DIR", tmp_path / "notebooks")
    monkeypatch.setattr(wb.profiles, "NOTEBOOK_SRC_DIR", src)
    monkeypatch.setattr(wb.profiles, "REPO_ROOT", tmp_path)
    wb.build_notebooks()
    prof = _profile(tmp_path, "name: die\n")
    with pytest.raises(QrlibError, match=r"notebook 01_die failed: the kernel failed "
                                         r"\(DeadKernelError") as info:
        wb.run_profile(prof, root=tmp_path)
    assert "\n" not in str(info.value)
    nbdir = tmp_path / "runs" / "die" / "notebooks"
    assert (nbdir / "INCOMPLETE-01_die.ipynb").exists() and not (nbdir / "01_die.ipynb").exists()
    assert not (tmp_path / "runs" / "die" / "run.lock").exists()


def test_a_published_profile_refuses_uncommitted_inputs_unless_allowed(toy_repo, monkeypatch):
    def git(*args):
        subprocess.run(["git", "-C", str(toy_repo), *args], check=True, capture_output=True)

    git("init", "-q")
    git("-c", "user.email=t@t", "-c", "user.name=t", "add", "-A")
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "init")
    monkeypatch.setenv("QRLIB_PUBLISH", "1")
    prof = _profile(toy_repo, "name: pub\nnotebooks:\n  01_toy: {n: 2}\n")
    git("-c", "user.email=t@t", "-c", "user.name=t", "add", "-A")
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "profile")
    src = toy_repo / "notebooks" / "src" / "01_toy.py"
    src.write_text(src.read_text() + "\n# an uncommitted edit\n")
    with pytest.raises(QrlibError, match=r"01_toy: refusing to publish into tables/pub from a tree "
                                         r"with uncommitted changes to what it depends on "
                                         r"\(notebooks/src/01_toy.py\); commit them or pass "
                                         r"--allow-dirty"):
        wb.run_profile(prof, root=toy_repo)
    assert not (toy_repo / "tables" / "pub" / "manifest.json").exists()
    wb.run_profile(prof, root=toy_repo, allow_dirty=True)
    entry = wb.load_json(toy_repo / "tables" / "pub" / "manifest.json")["01_toy"]
    assert entry["dirty"] is True and entry["allow_dirty"] is True
    head = wb.load_json(toy_repo / "notebooks" / "executed" / "pub" / "01_toy.ipynb")["cells"][0]
    assert "dirty tree, --allow-dirty" in "".join(head["source"])


def test_published_notebooks_hold_no_absolute_repository_path(tmp_path):
    from qrlib.workbook.publish import relative_paths

    root = tmp_path / "repo"
    text = f"wrote {root}/runs/cpu/x.json; data {tmp_path}/shared/data/scifact; cwd {root}"
    assert relative_paths(text, root) == ("wrote runs/cpu/x.json; data ../shared/data/scifact; "
                                          "cwd .")


def test_a_failed_notebook_leaves_its_published_outputs_as_they_were(tmp_path):
    tables, figures = tmp_path / "tables", tmp_path / "figures"
    tables.mkdir()
    figures.mkdir()
    (tables / "06_a.csv").write_text("old\n")
    (tables / "07_b.csv").write_text("other notebook\n")
    with wb.published_outputs_guard("06_acqo_stage1", [tables, figures]) as guard:
        (tables / "06_a.csv").write_text("half-written\n")
        (figures / "06_new.pdf").write_bytes(b"%PDF")
        (tables / "07_b.csv").write_text("not ours to restore\n")
        assert guard.restore() == 2
    assert (tables / "06_a.csv").read_text() == "old\n"
    assert not (figures / "06_new.pdf").exists()
    assert (tables / "07_b.csv").read_text() == "not ours to restore\n"


def test_a_reused_training_names_the_code_changed_since_it_ran(tmp_path):
    """A training found finished in runs/ was run by the code of its own commit: the runner
    records which of the notebook's training modules changed since, and status calls the
    notebook stale for it (13 at fa9c81e would have reused SQL runs trained before the
    trainer's micro-batch change)."""
    import subprocess

    from qrlib.workbook import freshness as F
    from qrlib.workbook.publish import reused_from

    def git(*a):
        return subprocess.run(["git", "-C", str(tmp_path), *a], capture_output=True,
                              text=True, check=True).stdout.strip()

    git("init", "-q")
    git("config", "user.email", "t@t"), git("config", "user.name", "t")
    for f in ("qrlib/rl/trainer.py", "qrlib/eval/stats.py", "qrlib/rl/env.py"):
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_text("a = 1\n")
    git("add", "."), git("commit", "-qm", "one")
    first = git("rev-parse", "--short=10", "HEAD")
    for f in ("qrlib/rl/trainer.py", "qrlib/eval/stats.py"):
        (tmp_path / f).write_text("a = 2\n")
    git("commit", "-qam", "two")
    second = git("rev-parse", "--short=10", "HEAD")
    mods = ["qrlib/rl/trainer.py", "qrlib/eval/stats.py", "qrlib/rl/env.py"]
    assert F.training_drift(first, second, mods, tmp_path) == ["qrlib/rl/trainer.py"]
    assert F.training_drift(second, second, mods, tmp_path) == []
    assert F.training_drift(first + " + changes", second, mods, tmp_path) is None
    assert F.training_drift("0" * 10, second, mods, tmp_path) is None  # not in this clone
    line = (f"[qrlib.rl.train] sql-scratch already trained to step 60 (max_steps 60) on "
            f"2026-11-29 12:53 UTC at commit {first} (60 steps, 118 queries); reused, nothing "
            "to do\n[qrlib.rl.train] ../runs/cpu/rl/old already trained to step 60 "
            "(max_steps 60); nothing to do\n")
    nb = {"cells": [{"outputs": [{"text": line}]}]}
    rec = reused_from(nb, mods, second, tmp_path)
    assert rec == {"sql-scratch": {"commit": first, "changed": ["qrlib/rl/trainer.py"]},
                   "old": {"commit": "unknown", "changed": None}}
    reasons = F._reuse_reasons({"reused_from": rec})
    assert reasons[0].startswith("reused training old (commit unknown): git cannot tell")
    assert reasons[1] == (f"reused training sql-scratch was trained at {first}, before changes "
                          "to qrlib/rl/trainer.py; move runs/<profile>/rl/sql-scratch aside "
                          "to retrain")
    assert F._reuse_reasons({"reused_from": {"x": {"commit": second, "changed": []}}}) == []


def test_reused_trainings_are_read_from_the_trainers_own_lines():
    """A notebook that found its training done in runs/ says so in the manifest, so its
    wall time is not taken for a run from scratch."""
    from qrlib.workbook.publish import cold_run, reused_trainings

    nb = {"cells": [
        {"cell_type": "code", "outputs": [{"output_type": "stream", "text": [
            "[qrlib.rl.train] ../runs/cpu/rl/acqo-stage1-bm25 already trained to step 100 "
            "(max_steps 100); nothing to do\n"]}]},
        {"cell_type": "code", "outputs": [{"output_type": "stream",
                                           "text": "[qrlib.rl.train] resuming from checkpoint-40 (ok)\n"}]},
        {"cell_type": "markdown", "source": "already trained to step 3"}]}
    assert reused_trainings(nb) == ["acqo-stage1-bm25 (finished, step 100)", "resumed at step 40"]
    assert reused_trainings({"cells": [{"outputs": [{"text": "[qrlib.rl.train] step 3: reward 1"}]}]}) == []
    params = {"inputs": {"params": {"runs": ["nothink"]}}}
    cold = {"wall_s": 5328.8, "commit": "b3a", "reused_training": [], **params}
    warm = {"wall_s": 452.4, "commit": "d08", "reused_training": ["x (finished, step 100)"],
            **params}
    rec = cold_run(cold, None)
    assert (rec["cold_wall_s"], rec["cold_commit"]) == (5328.8, "b3a") and rec["cold_params"]
    assert cold_run(warm, cold) == rec
    again = {**warm, **cold_run(warm, cold)}
    assert cold_run({**warm, "commit": "e5"}, again) == rec
    assert cold_run(warm, None) == {}
    # new parameters (a second training added): the old run from scratch no longer counts,
    # neither straight from it nor carried through a warm run
    more = {**warm, "inputs": {"params": {"runs": ["nothink", "think"]}}}
    assert cold_run(more, cold) == {} and cold_run(more, again) == {}


def test_a_fresh_clone_restores_the_runs_a_reader_needs(chain_repo, monkeypatch, capsys):
    """01's run folder is carried under artifacts/ when its profile is committed; a clone
    without runs/ gets it back before 02 runs, instead of running 01 again."""
    from qrlib.workbook import carry

    monkeypatch.setattr(carry, "carry_enabled", lambda profile, root: True)
    prof = _profile(chain_repo, "name: chain\nnotebooks:\n  01_make: {n: 4}\n")
    assert _statuses(wb.run_profile(prof, root=chain_repo)) == {"01_make": "ok", "02_use": "ok"}
    meta = wb.load_json(chain_repo / "artifacts" / "chain" / "01_make" / "carry.json")
    manifest = wb.load_json(chain_repo / "tables" / "chain" / "manifest.json")
    assert meta["fingerprint"] == manifest["01_make"]["fingerprint"]
    assert list(meta["archives"]) == ["n.txt.tar.gz"]
    assert not (chain_repo / "artifacts" / "chain" / "02_use").exists()  # nobody reads 02
    shutil.rmtree(chain_repo / "runs")
    capsys.readouterr()
    assert _statuses(wb.run_profile(prof, root=chain_repo, stale=True, only=["02"])) == {
        "02_use": "skipped"}  # both fresh; 01 was not rerun to refill runs/
    assert "01_make: restored its runs from artifacts/chain/01_make" in capsys.readouterr().out
    assert (chain_repo / "runs" / "chain" / "n.txt").read_text() == "4"
    assert _statuses(wb.run_profile(prof, root=chain_repo, only=["02"])) == {"02_use": "ok"}
    assert len(wb.read_table(chain_repo / "tables" / "chain" / "02_chain.csv")) == 5


def test_status_summary_sums_the_stale_notebooks_last_runs_from_scratch():
    from qrlib.workbook.freshness import Status, cold_seconds, refresh_summary

    fresh = Status("01_a", "fresh", entry={"wall_s": 60.0, "commit": "c1"})
    stale = Status("02_b", "stale", ["parameter n changed"] + [f"m{i}.py changed" for i in range(5)],
                   {"wall_s": 600.0, "cold_wall_s": 3000.0, "cold_commit": "c0", "commit": "c2",
                    "reused_training": ["run-x (finished, step 60)"]})
    reused = Status("03_c", "stale", ["reads 02_b, which is stale"],
                    {"wall_s": 120.0, "commit": "c2", "reused_training": ["run-y"]})
    never = Status("04_d", "never run")
    assert cold_seconds(stale.entry) == 3000.0 and cold_seconds(fresh.entry) == 60.0
    assert cold_seconds(reused.entry) is None  # its own run reused a training: no cold time
    assert refresh_summary([fresh]) == "1 of 1 fresh"
    assert refresh_summary([fresh, stale, reused, never]) == (
        "1 of 4 fresh; 1 of the other 3 took 50 min at their last runs from scratch "
        "(02_b 50 at c0); no run from scratch on record: 03_c, 04_d")
    assert "and 3 more" in stale.line(3) and "m4.py" not in stale.line(3)
    assert "m4.py changed" in stale.line()
