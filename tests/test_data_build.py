"""``qrlib data fetch`` (qrlib.data.build): the download path over loopback HTTP (hash
check, resume after an interruption, a missing network), and every buildable set rebuilt
from its public sources equal, file for file, to the shared copy.

The sources are git clones under ``$QRLIB_DATA_SOURCES`` (read with ``git show``, served by
:func:`qrlib.data.build.clones.serve` as the raw URLs serve them); without it the rebuild
test is skipped with a one-line reason. The download tests make their own tiny clone."""
from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest

from qrlib.core.errors import QrlibError
from qrlib.data.build import clones, fetch
from qrlib.data.build.sources import SOURCES, DataSet, Piece

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.fixture()
def tiny_clone(tmp_path):
    """A git repository ``own/repo`` with one file, and the piece that pins it."""
    repo = tmp_path / "clones" / "own" / "repo"
    repo.mkdir(parents=True)
    data = os.urandom(300_000)
    (repo / "f.bin").write_bytes(data)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(git + ["add", "f.bin"], check=True)
    subprocess.run(git + ["commit", "-q", "-m", "x"], check=True)
    commit = subprocess.run(git + ["rev-parse", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()
    piece = Piece("own/repo", commit, "f.bin", hashlib.sha256(data).hexdigest())
    return tmp_path / "clones", piece, data


def test_download_verifies_resumes_and_refuses_a_wrong_hash(tiny_clone, tmp_path):
    root, piece, data = tiny_clone
    dest = tmp_path / "cache" / "f.bin"
    with clones.serve(root) as (base, handler):
        url = piece.url(base)
        handler.fail_after[f"/{piece.local()}"] = 100_000  # the first transfer breaks off
        with pytest.raises(QrlibError, match=r"tiny: the download of .* stopped after 100000 "
                                             r"of 300000 bytes; run again to resume it"):
            fetch.download(url, dest, piece.sha256, what="tiny")
        part = dest.with_name("f.bin.part")
        assert not dest.exists() and part.stat().st_size == 100_000
        # the next call asks only for the rest (Range) and verifies the whole file
        assert fetch.download(url, dest, piece.sha256, what="tiny").read_bytes() == data
        assert not part.exists()
        assert handler.requests == [(f"/{piece.local()}", 0), (f"/{piece.local()}", 100_000)]
        bad = Piece(piece.repo, piece.commit, piece.path, "0" * 64)
        with pytest.raises(QrlibError, match=r"tiny: .* has sha256 .* expected 0{16}\.\.\.; "
                                             r"the file was deleted"):
            fetch.download(url, tmp_path / "other.bin", bad.sha256, what="tiny")
        assert not (tmp_path / "other.bin").exists()
        assert not (tmp_path / "other.bin.part").exists()
        with pytest.raises(QrlibError, match="HTTP 404"):
            fetch.download(f"{base}/own/repo/{piece.commit}/missing", tmp_path / "m",
                           piece.sha256, what="tiny")


def test_a_missing_network_is_one_line_naming_the_set_and_the_url(tmp_path):
    url = "http://127.0.0.1:9/own/repo/abc/f.bin"  # the discard port: nothing listens
    with pytest.raises(QrlibError, match=r"^scifact: cannot download http://127\.0\.0\.1:9/"
                                         r"own/repo/abc/f\.bin \(.*\); no network\?$"):
        fetch.download(url, tmp_path / "f", "0" * 64, what="scifact", timeout=5)


def test_fetch_set_builds_into_place_or_leaves_nothing(tiny_clone, tmp_path, monkeypatch):
    root, piece, data = tiny_clone
    import qrlib.data.build as pkg  # a builder module of our own for the tiny set
    import types

    mod = types.ModuleType("qrlib.data.build.tinyset")
    mod.TRANSFORMATIONS = ["copied"]

    def build(files, out):
        out.mkdir(parents=True, exist_ok=True)
        (out / "f.bin").write_bytes(files["f.bin"].read_bytes())

    mod.build = build
    monkeypatch.setitem(__import__("sys").modules, "qrlib.data.build.tinyset", mod)
    monkeypatch.setattr(pkg, "tinyset", mod, raising=False)
    monkeypatch.setitem(SOURCES, "tiny", DataSet("tiny", (piece,), "CC0", "none", "tinyset"))
    with clones.serve(root) as (base, _):
        out = fetch.fetch_set("tiny", tmp_path / "data", base_url=base)
        assert (out / "f.bin").read_bytes() == data
        prov = (out / "PROVENANCE.md").read_text()
        assert piece.sha256 in prov and "own/repo" in prov and "copied" in prov
        monkeypatch.setitem(SOURCES, "tiny2", DataSet("tiny2", (Piece(
            piece.repo, piece.commit, piece.path, "1" * 64),), "CC0", "none", "tinyset"))
        with pytest.raises(QrlibError, match="sha256"):
            fetch.fetch_set("tiny2", tmp_path / "data", base_url=base)
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == [".sources", "tiny"]
    with pytest.raises(QrlibError, match="unknown data set 'nope'; known: scifact"):
        fetch.fetch_set("nope", tmp_path / "data")
    monkeypatch.setitem(SOURCES, "nobuilder", DataSet("nobuilder", (piece,), "", "", None))
    with pytest.raises(QrlibError, match="nobuilder: no builder yet"):
        fetch.fetch_set("nobuilder", tmp_path / "data")


@pytest.mark.skipif(not os.environ.get("QRLIB_DATA_SOURCES"),
                    reason="QRLIB_DATA_SOURCES (a folder of clones of the pinned source "
                           "repositories) is not set")
@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data is not here to compare with")
@pytest.mark.parametrize("name", fetch.buildable())
def test_every_buildable_set_rebuilds_byte_for_byte(name, tmp_path):
    with clones.serve(os.environ["QRLIB_DATA_SOURCES"]) as (base, _):
        out = fetch.fetch_set(name, tmp_path, base_url=base)
    shared = SHARED / name
    want = {f.relative_to(shared) for f in shared.rglob("*")
            if f.is_file() and f.name != "PROVENANCE.md"}
    got = {f.relative_to(out) for f in out.rglob("*")
           if f.is_file() and f.name != "PROVENANCE.md"}
    assert got == want
    for rel in sorted(want):
        assert fetch.sha256_file(out / rel) == fetch.sha256_file(shared / rel), rel


def test_make_data_builds_only_what_the_loaders_do_not_find(monkeypatch, tmp_path, capsys):
    built = []
    monkeypatch.setattr(fetch, "present", lambda n: tmp_path if n == "scifact" else None)
    monkeypatch.setitem(SOURCES, "nobuilder", DataSet("nobuilder", (), "", "", None))
    monkeypatch.setattr(fetch, "fetch_set", lambda n, d, **kw: built.append(n) or d / n)
    fetch.fetch(dest=tmp_path, missing=True)
    out = capsys.readouterr().out
    assert built == [n for n in fetch.buildable() if n != "scifact"]
    assert "scifact: found at" in out and "nobuilder: missing, and no builder yet" in out
    assert set(fetch.buildable()) >= {"scifact", "nfcorpus", "spider-dev", "hotpotqa-mini",
                                      "hotpotqa-large", "2wikimultihopqa-mini"}
