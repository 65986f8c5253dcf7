"""Papers register through the ``qrlib.methods`` entry-point group (qrlib.core.registry)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from _astutil import code_text

from qrlib.core import registry
from qrlib.core.errors import QrlibError

REPO = Path(__file__).resolve().parents[1]


def test_every_paper_folder_registers_through_an_entry_point():
    entries = registry.pyproject_entries(REPO / "pyproject.toml")
    folders = sorted(p.parent.name for p in (REPO / "qrlib" / "methods").glob("*/prompts.py"))
    assert sorted(entries) == folders
    for name, module in entries.items():
        assert module == f"qrlib.methods.{name}.register"
        assert (REPO / "qrlib" / "methods" / name / "register.py").is_file()
    # the order of the reward and format listings: DeepRetrieval first, the baselines last
    assert list(entries)[:2] == ["deepretrieval", "acqo"] and list(entries)[-1] == "prompting"


def test_no_shared_registry_module_names_a_paper():
    names = registry.pyproject_entries(REPO / "pyproject.toml")
    for path in (REPO / "qrlib" / "core" / "registry.py", REPO / "qrlib" / "methods" / "registry.py"):
        text = code_text(path)
        for name in names:
            assert not re.search(rf"qrlib\.methods\.{name}\b", text), (path.name, name)


def test_installed_plugins_join_the_repository_papers(monkeypatch):
    import importlib.metadata as md

    class EP:
        def __init__(self, name, value):
            self.name, self.value = name, value

    monkeypatch.setattr(md, "entry_points", lambda group: [EP("acqo", "elsewhere.acqo"),
                                                            EP("toy", "toy_method.register:x")])
    found = registry.paper_entries()
    assert found["acqo"] == "qrlib.methods.acqo.register"  # the checkout's declaration wins
    assert list(found)[-1] == "toy" and found["toy"] == "toy_method.register"


def test_no_paper_at_all_is_a_one_line_error(monkeypatch, tmp_path):
    import importlib.metadata as md

    monkeypatch.setattr(registry, "PYPROJECT", tmp_path / "missing.toml")
    monkeypatch.setattr(registry, "pyproject_entries", lambda path=None, group=None: {})
    monkeypatch.setattr(md, "entry_points", lambda group: [])
    with pytest.raises(QrlibError, match="no paper is registered: no entry point of group "
                                         "'qrlib.methods'"):
        registry.paper_entries()


def test_freshness_sees_the_papers_behind_the_registry(tmp_path):
    from qrlib.workbook.freshness import module_closure

    nb = tmp_path / "99_toy.py"
    nb.write_text("import qrlib.methods.registry\n")
    closure = module_closure(nb)
    for name in registry.pyproject_entries(REPO / "pyproject.toml"):
        assert f"qrlib/methods/{name}/register.py" in closure
    assert "qrlib/methods/sage/rewards.py" in closure and "qrlib/methods/acqo/formats.py" in closure


def test_freshness_counts_every_papers_published_numbers(tmp_path):
    from qrlib.workbook.freshness import module_closure

    nb = tmp_path / "99_toy.py"
    nb.write_text("from qrlib.eval import published\n")
    closure = module_closure(nb)
    for name in ("deepretrieval", "acqo", "sage", "rlqr", "bandits"):
        assert f"qrlib/methods/{name}/published.yaml" in closure, name
        assert f"qrlib/methods/{name}/register.py" not in closure  # the folder, not its registrations
