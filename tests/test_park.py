"""Parking a stopped notebook run and resuming it elsewhere (qrlib.workbook.park)."""
from __future__ import annotations

import json
import os
import shutil
import tarfile
from pathlib import Path

import pytest

from qrlib.core.errors import QrlibError
from qrlib.core.io import save_json
from qrlib.core.lock import run_lock
from qrlib.workbook import carry, park, publish
from qrlib.workbook.profiles import REPO_ROOT

NB = "08_sage"
PROFILE = REPO_ROOT / "params" / "cpu.yaml"
T0 = 1_700_000_000.0


def _write(path: Path, text: str = "x", mtime: float = T0) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    os.utime(path, (mtime, mtime))
    return str(path)


TOY_HEAD = ('# %% tags=["parameters"]\nprofile = "dev"\nrun_dir = "../runs/dev"\n'
            'tables_dir = "../tables/dev"\nseed = 0\n\n')


def _toy_workbook(root: Path, monkeypatch, cells: dict[str, str]) -> Path:
    """A workbook of toy notebooks (name -> the code after the parameters cell) under
    ``root`` with the profile ``toyrun``; returns the profile's path."""
    from qrlib import workbook as wb

    src = root / "notebooks" / "src"
    src.mkdir(parents=True)
    for name, code in cells.items():
        (src / f"{name}.py").write_text(TOY_HEAD + "# %%\n" + code)
    (root / "params").mkdir()
    prof = root / "params" / "toy.yaml"
    prof.write_text("name: toyrun\n")
    monkeypatch.setattr(wb.profiles, "NOTEBOOK_DIR", root / "notebooks")
    monkeypatch.setattr(wb.profiles, "NOTEBOOK_SRC_DIR", src)
    monkeypatch.setattr(wb.profiles, "REPO_ROOT", root)
    wb.build_notebooks()
    return prof


def _stopped_run(root: Path) -> Path:
    """08 stopped during its second training: run ``a`` finished (summary, adapter, an old
    checkpoint), run ``b`` has a complete checkpoint-15 and a checkpoint-30 cut short."""
    run = (root / "runs" / "cpu").resolve()
    files = [_write(run / "rl" / "a" / "summary.json", '{"steps": 60}', T0 + 600),
             _write(run / "rl" / "a" / "adapter" / "adapter_config.json", "{}", T0 + 600),
             _write(run / "rl" / "a" / "checkpoint-45" / "optimizer.pt", "o" * 50, T0 + 500),
             _write(run / "rl" / "b" / "log.csv", "step\n1\n", T0 + 1000),
             _write(run / "rl" / "b" / "checkpoint-15" / "adapter_model.safetensors", "w" * 50,
                    T0 + 900),
             _write(run / "rl" / "b" / "checkpoint-15" / ".qrlib-complete", "", T0 + 900),
             _write(run / "rl" / "b" / "checkpoint-30" / "trainer_state.json", "{", T0 + 1200),
             _write(run / "records" / "08_bon.json", "{}", T0 + 100)]
    _write(run / "reads" / f"{NB}.log", "".join(f"w\t{p}\n" for p in files))
    _write(run / "notebooks" / f"INCOMPLETE-{NB}.ipynb", json.dumps({"metadata": {}}))
    save_json({"commit": "abc1234567", "dirty": False, "static_fingerprint": "static1",
               "started": T0}, run / "started" / f"{NB}.json")
    return run


def _archived(dest: Path, meta: dict) -> set[str]:
    """Every file name in the archives of a packed folder."""
    names: set[str] = set()
    for arc in meta["archives"]:
        with tarfile.open(dest / arc) as tar:
            names |= set(tar.getnames())
    return names


def test_park_packs_finished_runs_whole_and_unfinished_ones_with_their_checkpoint(tmp_path):
    run = _stopped_run(tmp_path)
    early = _write(run / "rl" / "c" / "log.csv", "step\n", T0 + 1100)  # no checkpoint yet
    with open(run / "reads" / f"{NB}.log", "a") as f:
        f.write(f"w\t{early}\n")
    dest = park.park(PROFILE, ["08"], tmp_path)
    assert dest == tmp_path / "artifacts" / "cpu" / f"{NB}.parked"
    meta = json.loads((dest / carry.CARRY_FILE).read_text())
    rec = meta["parked"]
    assert rec["runs"] == {"a": {"finished": True, "steps": 60},
                           "b": {"finished": False, "checkpoint": "checkpoint-15", "steps": 15}}
    assert rec["commit"] == "abc1234567" and rec["static_fingerprint"] == "static1"
    assert rec["wall_s"] == 1200.0 and rec["parts"] == 1  # start to the last write
    assert meta["done"] is None
    names = _archived(dest, meta)
    assert "rl/b/checkpoint-15/adapter_model.safetensors" in names  # the resume point
    assert not any("checkpoint-45" in n or "checkpoint-30" in n for n in names)
    assert not any(n.startswith("rl/c/") for n in names)  # nothing to resume from
    assert "records/08_bon.json" in names  # what the notebook wrote besides its trainings


def test_park_keeps_the_sft_adapter_a_finished_cold_start_run_began_from(tmp_path):
    """An SFT cold start (qrlib.rl.coldstart: ``<run>-sft/`` with its adapter and the
    settings marker written last) has no summary and no checkpoint, yet the notebook's SFT
    row and a resumed RL run read it: park keeps it whole; one without the marker (cut
    short) is left out."""
    run = _stopped_run(tmp_path)
    sft = [_write(run / "rl" / "a-sft" / "sft" / "adapter" / "adapter_model.safetensors",
                  "s" * 50, T0 + 300),
           _write(run / "rl" / "a-sft" / "sft_settings.json", '{"sft_steps": "24"}', T0 + 300),
           _write(run / "rl" / "c-sft" / "sft" / "adapter" / "adapter_config.json", "{}",
                  T0 + 1100)]
    with open(run / "reads" / f"{NB}.log", "a") as f:
        f.write("".join(f"w\t{p}\n" for p in sft))
    dest = park.park(PROFILE, ["08"], tmp_path)
    meta = json.loads((dest / carry.CARRY_FILE).read_text())
    assert meta["parked"]["runs"]["a-sft"] == {"finished": True, "steps": 24}
    assert "c-sft" not in meta["parked"]["runs"]
    names = _archived(dest, meta)
    assert {"rl/a-sft/sft/adapter/adapter_model.safetensors",
            "rl/a-sft/sft_settings.json"} <= names
    assert not any(n.startswith("rl/c-sft/") for n in names)


def test_park_refuses_a_finished_run_a_running_one_and_two_notebooks(tmp_path):
    run = _stopped_run(tmp_path)
    with run_lock(run), pytest.raises(QrlibError, match="in use"):
        park.park(PROFILE, ["08"], tmp_path)
    with pytest.raises(QrlibError, match="one notebook"):
        park.park(PROFILE, ["08", "15"], tmp_path)
    (run / "notebooks" / f"INCOMPLETE-{NB}.ipynb").unlink()
    with pytest.raises(QrlibError, match="no cut-short run"):
        park.park(PROFILE, ["08"], tmp_path)
    assert not (tmp_path / "artifacts").exists()


def test_a_parked_run_is_restored_only_at_the_same_static_fingerprint(tmp_path, monkeypatch):
    _stopped_run(tmp_path / "a")
    park.park(PROFILE, ["08"], tmp_path / "a")
    assert "parked at abc1234567, 20 min so far: a finished step 60, b at step 15" \
        in park.parked_note("cpu", NB, tmp_path / "a")
    assert park.parked_note("cpu", "15_sage_ablation", tmp_path / "a") == ""
    assert "08_sage.parked is left over" in park.parked_note("cpu", NB, tmp_path / "a",
                                                             fresh=True)
    other = tmp_path / "b"
    shutil.copytree(tmp_path / "a" / "artifacts", other / "artifacts")
    profile = {"name": "cpu"}
    said: list[str] = []
    monkeypatch.setattr(park, "static_fingerprint", lambda p, n, r: "static2")
    assert park.restore_parked(profile, NB, other, say=said.append) is None
    assert "not restored" in said[-1] and not (other / "runs").exists()
    monkeypatch.setattr(park, "static_fingerprint", lambda p, n, r: "static1")
    rec = park.restore_parked(profile, NB, other, say=said.append)
    assert rec["runs"]["b"]["checkpoint"] == "checkpoint-15" and "20.0 min" in said[-1]
    run = other / "runs" / "cpu"
    assert (run / "rl" / "b" / "checkpoint-15" / ".qrlib-complete").exists()
    assert (run / "rl" / "a" / "summary.json").exists()
    assert not (run / "reads" / f"{NB}.log").exists()  # the resuming run logs its own reads
    assert json.loads((run / "parked" / f"{NB}.json").read_text()) == rec
    park.finish_parked("cpu", NB, other)
    assert not park.parked_folder("cpu", NB, other).exists()
    assert not (run / "parked" / f"{NB}.json").exists()


def test_a_resumed_run_records_its_run_from_scratch_as_the_sum_of_its_parts():
    parked = {"wall_s": 7200.0, "parts": 1, "runs": {"a": {}, "b": {}}}
    entry = {"wall_s": 3000.0, "commit": "c2", "reused_training": ["a (finished, step 60)",
                                                                   "resumed at step 15"],
             "reused_from": {"a": {"commit": "c1"}}, "parked": parked}
    got = publish.cold_run(entry, None)
    assert got["cold_wall_s"] == 10200.0 and got["cold_commit"] == "c2"
    assert got["cold_parts"] == 2
    # a training found in the run folder that the park did not hold: no run from scratch
    entry["reused_from"] = {"a": {}, "z": {}}
    assert "cold_wall_s" not in publish.cold_run(entry, None)


def test_a_run_in_parts_peaks_at_its_highest_part():
    assert park.whole_peak(9000, {"peak_rss_mb": 16457}) == 16457
    assert park.whole_peak(17000, {"peak_rss_mb": 16457}) == 17000
    assert park.whole_peak(9000, {"wall_s": 1.0}) == 9000  # a park from before the field
    assert park.whole_peak(None, None) is None


def test_the_runner_resumes_a_parked_run_and_records_its_parts(tmp_path, monkeypatch):
    """End to end on a toy notebook: park a stopped run, lose the run folder (a fresh
    clone), run again: the training comes back, the manifest sums the parts, the parked
    folder is gone."""
    from qrlib import workbook as wb
    from qrlib.workbook.freshness import load_manifest
    from qrlib.workbook.profiles import load_profile

    prof = _toy_workbook(tmp_path, monkeypatch, {"01_toy": 'print("trained")\n'})
    run = tmp_path / "runs" / "toyrun"
    done = _write(run / "rl" / "x" / "summary.json", '{"steps": 4}', T0 + 600)
    _write(run / "reads" / "01_toy.log", f"w\t{done}\n")
    _write(run / "notebooks" / "INCOMPLETE-01_toy.ipynb", json.dumps({"metadata": {}}))
    static = park.static_fingerprint(load_profile(prof), "01_toy", tmp_path)
    save_json({"commit": "abc", "dirty": False, "static_fingerprint": static, "started": T0},
              run / "started" / "01_toy.json")
    dest = park.park(prof, ["01"], tmp_path)
    meta = json.loads((dest / carry.CARRY_FILE).read_text())
    assert "peak_rss_mb" not in meta["parked"]  # parked by hand: no part's peak known
    meta["parked"]["peak_rss_mb"] = 10**6  # as a --park-at part that peaked that high
    (dest / carry.CARRY_FILE).write_text(json.dumps(meta))
    shutil.rmtree(run)
    row = wb.run_profile(prof, root=tmp_path)[0]
    assert row["status"] == "ok" and 0 < row["peak_rss_mb"] < 10**6
    assert (run / "rl" / "x" / "summary.json").exists()
    entry = load_manifest("toyrun", tmp_path)["01_toy"]
    assert entry["peak_rss_mb"] == 10**6  # the notebook's peak: its highest part's
    assert entry["parked"]["wall_s"] == 600.0
    assert entry["cold_wall_s"] == pytest.approx(entry["wall_s"] + 600.0, abs=0.11)
    assert entry["cold_parts"] == 2
    assert not park.parked_folder("toyrun", "01_toy", tmp_path).exists()


def test_park_names_the_published_files_a_stopped_run_left_half_written(tmp_path):
    import subprocess

    def git(*a: str) -> None:
        subprocess.run(["git", "-C", str(tmp_path), *a], check=True, capture_output=True)

    git("init", "-q")
    for rel in ("tables/cpu/08_a.csv", "tables/cpu/09_x.csv", "figures/cpu/08_f.png"):
        _write(tmp_path / rel, "old")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "published")
    for rel in ("tables/cpu/08_a.csv", "tables/cpu/09_x.csv", "tables/cpu/08_b.csv"):
        _write(tmp_path / rel, "rewritten")  # another size: git sees it whatever the time
    assert park.left_outputs("cpu", NB, tmp_path) == {"changed": ["tables/cpu/08_a.csv"],
                                                      "new": ["tables/cpu/08_b.csv"]}


def test_park_at_reads_a_clock_time_or_minutes_from_now():
    from datetime import datetime

    from qrlib.workbook.park import park_deadline

    now = datetime(2026, 12, 5, 8, 0, 30)
    assert park_deadline("09:50", now) == datetime(2026, 12, 5, 9, 50)
    assert park_deadline("7:15", now) == datetime(2026, 12, 6, 7, 15)  # past today: tomorrow
    assert park_deadline("08:00", now) == datetime(2026, 12, 6, 8, 0)
    assert park_deadline("+90", now) == datetime(2026, 12, 5, 9, 30, 30)
    assert park_deadline(" +0.5 ", now) == datetime(2026, 12, 5, 8, 1)
    for bad in ("", "24:00", "9:5", "12:60", "+0", "+-3", "tomorrow", "0950", "+1e3"):
        with pytest.raises(QrlibError, match=r"--park-at .*HH:MM.*\+MIN"):
            park_deadline(bad, now)


def test_the_park_timer_stops_the_children_at_its_deadline_and_only_then():
    import subprocess
    import sys
    import time as _time
    from datetime import datetime, timedelta

    with park.ParkTimer(None) as never:
        assert not never.passed
    assert not never.fired
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    t0 = _time.monotonic()
    with park.ParkTimer(datetime.now() + timedelta(seconds=1), grace_s=5) as timer:
        assert child.wait(timeout=30) is not None
        assert timer.passed
    assert timer.fired and 0.8 < _time.monotonic() - t0 < 20
    late = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    with park.ParkTimer(datetime.now() + timedelta(seconds=60)) as early:
        pass  # left before its deadline: fires never, stops nothing
    assert not early.fired and late.poll() is None
    late.kill()
    late.wait()


def test_run_park_at_stops_the_notebook_parks_its_checkpoint_and_starts_nothing_more(
        tmp_path, monkeypatch, capsys):
    """A toy notebook that writes a complete checkpoint and a half table, then keeps
    training: --park-at stops it, puts the table back, parks checkpoint-2, and the second
    notebook is not started; a park time already past starts nothing."""
    from qrlib import workbook as wb

    prof = _toy_workbook(tmp_path, monkeypatch, {
        "01_toy": ("import os, pathlib, time\n"
                   "ck = pathlib.Path(run_dir).resolve() / 'rl' / 'x' / 'checkpoint-2'\n"
                   "ck.mkdir(parents=True)\n"
                   "(ck / '.qrlib-complete').write_text('')\n"
                   "with open(os.environ['QRLIB_READ_LOG'], 'a') as f:\n"
                   "    f.write(f'w\\t{ck / \".qrlib-complete\"}\\n')\n"
                   "pathlib.Path(tables_dir, '01_half.csv').write_text('half')\n"
                   "pathlib.Path(tables_dir, '01_old.csv').write_text('rewritten')\n"
                   "time.sleep(600)\n"),
        "02_next": "print('should not run')\n"})
    _write(tmp_path / "tables" / "toyrun" / "01_old.csv", "published")
    marker = tmp_path / "runs" / "toyrun" / "rl" / "x" / "checkpoint-2" / ".qrlib-complete"

    class AtCheckpoint(park.ParkTimer):
        """Fires once the toy wrote its checkpoint (however slow the kernel's start)."""

        def _wait(self) -> None:
            while not marker.exists() and not self._done.wait(0.2):
                pass
            if not self._done.is_set():
                self.fired = True
                park.stop_children(self.grace_s)

    monkeypatch.setattr(park, "ParkTimer", AtCheckpoint)
    rows = wb.run_profile(prof, root=tmp_path, park_at="+30")
    assert [r["status"] for r in rows] == ["parked", "skipped"]
    out = capsys.readouterr().out
    assert "02_next: not started" in out and "git add -A artifacts/toyrun/01_toy.parked" in out
    meta = json.loads((park.parked_folder("toyrun", "01_toy", tmp_path) / carry.CARRY_FILE)
                      .read_text())
    assert meta["parked"]["runs"] == {"x": {"finished": False, "checkpoint": "checkpoint-2",
                                            "steps": 2}}
    assert meta["parked"]["peak_rss_mb"] > 0  # the stopped part's peak travels with the park
    tables = tmp_path / "tables" / "toyrun"
    assert not (tables / "01_half.csv").exists()
    assert (tables / "01_old.csv").read_text() == "published"
    assert not (tmp_path / "runs" / "toyrun" / "done" / "01_toy.json").exists()
    from datetime import datetime, timedelta

    monkeypatch.setattr(park, "park_deadline", lambda text: datetime.now() - timedelta(seconds=1))
    rows = wb.run_profile(prof, root=tmp_path, park_at="00:00")
    assert [r["status"] for r in rows] == ["skipped", "skipped"]
