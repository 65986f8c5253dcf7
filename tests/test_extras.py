"""A notebook's declared extras: read from its source, refused when missing in a published
profile (qrlib.workbook.extras)."""
from __future__ import annotations

import pytest

from qrlib.core.errors import QrlibError
from qrlib.workbook import extras


def test_notebook_11_declares_the_lucene_extra_and_no_other_notebook_does():
    from qrlib.workbook.profiles import notebook_names

    declared = {n: extras.declared_extras(n) for n in notebook_names()}
    assert declared["11_deepretrieval_tasks"] == ["lucene"]
    assert not any(v for n, v in declared.items() if n != "11_deepretrieval_tasks")


def test_a_missing_extra_is_refused_when_publishing_and_reported_otherwise(tmp_path,
                                                                          monkeypatch):
    (tmp_path / "99_x.py").write_text("# %% [markdown]\n# Requires the `lucene` extra (x).\n")
    import types

    fake = types.ModuleType("fake_lucene")
    fake.lucene_available = lambda: (False, "pyserini is not installed")
    monkeypatch.setitem(__import__("sys").modules, "fake_lucene", fake)
    monkeypatch.setitem(extras.CHECKS, "lucene", ("fake_lucene", "lucene_available"))
    with pytest.raises(QrlibError, match=r"99_x: refusing to publish into tables/cpu without "
                                         r"the `lucene` extra it declares \(pyserini is not"):
        extras.require_extras("99_x", "cpu", published=True, src_dir=tmp_path)
    assert extras.require_extras("99_x", "smoke", published=False, src_dir=tmp_path) == {
        "lucene": "pyserini is not installed"}
    fake.lucene_available = lambda: (True, "")
    assert extras.require_extras("99_x", "cpu", published=True, src_dir=tmp_path) == {}
    (tmp_path / "98_y.py").write_text("# Requires the `cuda` extra.\n")
    with pytest.raises(QrlibError, match=r"unknown extra\(s\) \['cuda'\]"):
        extras.declared_extras("98_y", tmp_path)
