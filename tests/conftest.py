"""Shared test fixtures."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
SHARED_DATA = REPO.parent / "shared" / "data"

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# The tests run vLLM's CPU engine eagerly: its torch.compile of the model took ~130 of a
# 186 s three-step GRPO test here (AVX2, 2 cores), on every engine start, because this vLLM
# build fails to load its AOT compile cache ("Compiling model again due to a load
# failure"). The engine tests' assertions hold eagerly; the notebooks keep the compiled forward.
# TORCH_COMPILE_DISABLE=0 in the environment keeps compilation on.
os.environ.setdefault("TORCH_COMPILE_DISABLE", "1")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The offline BEIR copies beside the checkout (CI has them too)."""
    if not SHARED_DATA.exists():
        pytest.fail(f"offline data missing at {SHARED_DATA}; set QRLIB_DATA")
    return SHARED_DATA


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    return FIXTURES


@pytest.fixture
def tiny_db(tmp_path):
    """A three-row SQLite database (table t: a INTEGER, b TEXT) for the SQL sandbox tests."""
    import sqlite3

    path = tmp_path / "db" / "t.sqlite"
    path.parent.mkdir()
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (a INTEGER, b TEXT)")
    con.executemany("INSERT INTO t VALUES (?, ?)", [(1, "x"), (2, "y"), (3, "x")])
    con.commit()
    con.close()
    return path

