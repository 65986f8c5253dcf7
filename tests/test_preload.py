"""The kernel LD_PRELOAD of qrlib.workbook.preload: both libraries or none, opt-out, order."""
from __future__ import annotations

import pytest

from qrlib.workbook import preload


@pytest.fixture
def libs(monkeypatch, tmp_path):
    tc = tmp_path / "libtcmalloc_minimal.so.4"
    lib = tmp_path / "venv" / "lib"
    lib.mkdir(parents=True)
    tc.write_text("")
    (lib / "libiomp5.so").write_text("")
    monkeypatch.setattr(preload, "TCMALLOC", str(tmp_path / "libtcmalloc_minimal.so.4*"))
    monkeypatch.setattr(preload.sys, "prefix", str(tmp_path / "venv"))
    monkeypatch.delenv("QRLIB_PRELOAD", raising=False)
    return str(tc), str(lib / "libiomp5.so")


def test_both_libraries_go_first_without_duplicates(libs):
    tc, iomp = libs
    assert preload.preload_env(None)["LD_PRELOAD"] == f"{tc}:{iomp}"
    assert preload.preload_env(f"/a.so:{tc}")["LD_PRELOAD"] == f"{tc}:{iomp}:/a.so"
    # tcmalloc keeps its default release policy (aggressive decommit cost 38 % of the CPU
    # in page faults); the trainings release once per step instead
    assert set(preload.preload_env(None)) == {"LD_PRELOAD"}


def test_one_library_missing_or_opt_out_adds_nothing(libs, monkeypatch, tmp_path):
    monkeypatch.setenv("QRLIB_PRELOAD", "0")
    assert preload.preload_env("/a.so") == {}
    monkeypatch.delenv("QRLIB_PRELOAD")
    monkeypatch.setattr(preload, "TCMALLOC", str(tmp_path / "absent*"))
    assert preload.preload_libs() == []
