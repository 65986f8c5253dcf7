"""Carried run artifacts (qrlib.workbook.carry): what is packed, what is restored, and when."""
from __future__ import annotations

import json
import shutil
import tarfile
import time
from pathlib import Path

import pytest

from qrlib.core.errors import QrlibError
from qrlib.core.io import save_json
from qrlib.workbook import carry
from qrlib.workbook.freshness import declared_reads
from qrlib.workbook.profiles import REPO_ROOT, notebook_names

P, NB, UP = "cpu", "06_acqo_stage1", "05_vanilla_rl"


def _write(path: Path, text: str = "x") -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


def _run_folder(root: Path) -> Path:
    """A run folder where 05 wrote one training and 06 wrote a training (with a checkpoint),
    a record and its own folder, and read 05's training and a dataset."""
    run = (root / "runs" / P).resolve()
    own = [_write(run / "rl" / "stage1" / "adapter" / "adapter_config.json", "{}"),
           _write(run / "rl" / "stage1" / "adapter" / "adapter_model.safetensors", "w" * 500),
           _write(run / "rl" / "stage1" / "checkpoint-5" / "optimizer.pt", "o" * 500),
           _write(run / "records" / f"{NB}.json", "{}"),
           _write(run / NB / "summary.json", '{"adapter": "../runs/cpu/rl/stage1/adapter"}'),
           _write(run / "rl" / ".locks" / "stage1.lock", "")]  # shared lock folder: not carried
    theirs = _write(run / "rl" / "vanilla" / "adapter" / "adapter_config.json", "{}")
    _write(run / "reads" / f"{UP}.log", f"w\t{theirs}\n")
    _write(run / "reads" / f"{NB}.log", "".join(f"w\t{p}\n" for p in own)
           + f"r\t{theirs}\nr\t/data/scifact/corpus.jsonl\nw\t{run / 'timings.csv'}\n")
    save_json({"notebook": NB, "status": "ok", "hash": "fp1"}, run / "done" / f"{NB}.json")
    return run


def test_owned_keys_are_what_the_notebook_wrote_not_what_it_read(tmp_path):
    run = _run_folder(tmp_path)
    assert carry.owned_keys(NB, run) == [(NB,), ("records", f"{NB}.json"), ("rl", "stage1")]
    assert carry.owned_keys(UP, run) == [("rl", "vanilla")]
    with pytest.raises(QrlibError, match="no read log"):
        carry.owned_keys("07_acqo_stage2", run)


def test_pack_leaves_checkpoints_out_and_restore_rebuilds_the_run_folder(tmp_path, monkeypatch):
    run = _run_folder(tmp_path / "a")
    dest = carry.pack(P, NB, tmp_path / "a", commit="abc", fingerprint="fp1")
    meta = json.loads((dest / carry.CARRY_FILE).read_text())
    assert sorted(meta["archives"]) == [f"{NB}.tar.gz", f"records__{NB}.json.tar.gz",
                                        "rl__stage1.tar.gz"]
    with tarfile.open(dest / "rl__stage1.tar.gz") as tar:
        assert sorted(tar.getnames()) == ["rl/stage1/adapter/adapter_config.json",
                                          "rl/stage1/adapter/adapter_model.safetensors"]
    assert (meta["commit"], meta["fingerprint"], meta["done"]["hash"]) == ("abc", "fp1", "fp1")
    assert all(p.startswith(carry.RUN_DIR_TOKEN + "/") for _, p in meta["log"])  # no /data

    other = tmp_path / "b"  # a fresh clone: the committed artifacts and manifest, no runs/
    shutil.copytree(tmp_path / "a" / carry.ARTIFACTS, other / carry.ARTIFACTS)
    save_json({NB: {"fingerprint": "fp2"}}, other / "tables" / P / "manifest.json")
    monkeypatch.setattr(carry, "carried_notebooks", lambda root: [UP, NB])
    said: list[str] = []
    assert carry.restore_missing(P, other, say=said.append) == []  # not the published run
    assert "not the published run" in said[0] and not (other / "runs").exists()
    save_json({NB: {"fingerprint": "fp1"}}, other / "tables" / P / "manifest.json")
    assert carry.restore_missing(P, other, say=said.append) == [NB]
    new = (other / "runs" / P).resolve()
    got = sorted(str(p.relative_to(new)) for p in new.rglob("*") if p.is_file())
    assert got == sorted([f"{NB}/summary.json", "done/06_acqo_stage1.json",
                          f"reads/{NB}.log", f"records/{NB}.json",
                          "rl/stage1/adapter/adapter_config.json",
                          "rl/stage1/adapter/adapter_model.safetensors"])
    assert (new / "rl/stage1/adapter/adapter_model.safetensors").read_text() == "w" * 500
    log = (new / "reads" / f"{NB}.log").read_text().split("\n")[0]
    assert log == f"w\t{new}/rl/stage1/adapter/adapter_config.json"
    assert carry.owned_keys(NB, new) == [(NB,), ("records", f"{NB}.json"), ("rl", "stage1")]
    assert carry.restore_missing(P, other, say=said.append) == []  # done here: left alone


def test_restore_refuses_an_altered_archive(tmp_path):
    _run_folder(tmp_path)
    dest = carry.pack(P, NB, tmp_path, commit="abc", fingerprint="fp1")
    (dest / "rl__stage1.tar.gz").write_bytes(b"not the archive")
    with pytest.raises(QrlibError, match="sha256 differs"):
        carry.restore(P, NB, tmp_path)
    with pytest.raises(QrlibError, match="nothing of 07_acqo_stage2 is carried"):
        carry.restore(P, "07_acqo_stage2", tmp_path)


def test_a_big_run_is_split_across_archives_and_restored_whole(tmp_path, monkeypatch):
    run = _run_folder(tmp_path / "a")
    monkeypatch.setattr(carry, "CHUNK_BYTES", 600)  # the adapter and the config: 502 bytes
    _write(run / "rl" / "stage1" / "log.csv", "l" * 300)
    dest = carry.pack(P, NB, tmp_path / "a", commit="abc", fingerprint="fp1")
    meta = json.loads((dest / carry.CARRY_FILE).read_text())
    parts = {k: v["files"] for k, v in meta["archives"].items() if k.startswith("rl__")}
    assert parts == {"rl__stage1.tar.gz": 2, "rl__stage1.2.tar.gz": 1}
    shutil.copytree(tmp_path / "a" / carry.ARTIFACTS, tmp_path / "b" / carry.ARTIFACTS)
    carry.restore(P, NB, tmp_path / "b")
    new = tmp_path / "b" / "runs" / P / "rl" / "stage1"
    assert sorted(str(p.relative_to(new)) for p in new.rglob("*") if p.is_file()) == [
        "adapter/adapter_config.json", "adapter/adapter_model.safetensors", "log.csv"]


def test_pack_refuses_an_archive_a_git_host_would_refuse(tmp_path, monkeypatch):
    _run_folder(tmp_path)
    monkeypatch.setattr(carry, "MAX_ARCHIVE_BYTES", 100)
    with pytest.raises(QrlibError, match="MiB a git host accepts"):
        carry.pack(P, NB, tmp_path, commit="abc", fingerprint="fp1")
    assert not (tmp_path / carry.ARTIFACTS / P / NB).exists()  # nothing half-written
    assert [p.name for p in (tmp_path / carry.ARTIFACTS / P).iterdir()] == []


def test_the_carried_notebooks_are_those_whose_runs_a_later_notebook_reads():
    got = carry.carried_notebooks(REPO_ROOT)
    assert {"06_acqo_stage1", "07_acqo_stage2", "08_sage", "12_acqo_vanilla_rl"} <= set(got)
    assert "20_trained_rows" not in got
    for reader in carry.TABLE_READERS:  # they read the upstream's tables, not its run folder
        src = (REPO_ROOT / "notebooks" / "src" / f"{reader}.py").read_text()
        for up in declared_reads(reader):
            assert f'run_dir / "{up}' not in src and f"runs/{up}" not in src, (reader, up)
    assert set(got) <= set(notebook_names())


def test_carry_is_on_for_the_committed_profiles_only():
    assert carry.carry_enabled("cpu", REPO_ROOT)
    assert not carry.carry_enabled("smoke", REPO_ROOT)


def test_packing_the_same_run_twice_gives_the_same_bytes(tmp_path):
    """Deterministic archives: a run packed again (parked, then carried) is one git blob."""
    _run_folder(tmp_path)
    first = carry.pack(P, NB, tmp_path, commit="abc", fingerprint="fp1")
    sums = {a: i["sha256"] for a, i in json.loads((first / carry.CARRY_FILE).read_text())
            ["archives"].items()}
    time.sleep(1.1)  # gzip stamps seconds: a second later, a time in the header would differ
    again = carry.pack(P, NB, tmp_path, commit="abd", fingerprint="fp2")
    assert {a: i["sha256"] for a, i in json.loads((again / carry.CARRY_FILE).read_text())
            ["archives"].items()} == sums
