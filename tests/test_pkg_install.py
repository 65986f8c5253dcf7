"""tools/pkg_install.py: pip's configuration carried over to uv, and pip where uv is absent."""
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("pkg_install", ROOT / "tools" / "pkg_install.py")
pkg_install = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pkg_install)

CONFIG = """global.cert='/etc/ssl/certs/ca-certificates.crt'
global.constraint='/etc/xdg/pip/constraints.txt'
global.extra-index-url='file:///opt/pypi/simple file:///opt/pypi-more/simple'
global.find-links='/opt/wheels'
:env:.find-links='/opt/wheels'
:env:.default-timeout='180'
install.trusted-host='mirror.local'
"""


def test_uv_flags_carry_indexes_find_links_and_constraints_once_each():
    assert pkg_install.uv_flags(CONFIG) == [
        "--extra-index-url", "file:///opt/pypi/simple",
        "--extra-index-url", "file:///opt/pypi-more/simple",
        "--find-links", "/opt/wheels",
        "--constraint", "/etc/xdg/pip/constraints.txt",
        "--allow-insecure-host", "mirror.local"]


def test_uv_flags_index_url_no_index_and_unparsable_lines():
    flags = pkg_install.uv_flags("global.index-url='https://example/simple'\n"
                                 "global.no-index='true'\nnot a config line\n"
                                 "global.find-links='unbalanced\n")
    assert flags == ["--no-index", "--index-url", "https://example/simple"]
    assert pkg_install.uv_flags("") == []


def test_commands_uv_first_then_pip_and_pip_alone_without_uv(tmp_path, monkeypatch):
    python = tmp_path / "python"
    pip = [str(python), "-m", "pip", "install", "-q", "six"]
    assert pkg_install.commands(str(python), ["six"], "uv") == [pip]   # no uv beside python
    (tmp_path / "uv").write_text("")
    assert pkg_install.commands(str(python), ["six"], "pip") == [pip]

    class Done:
        stdout = CONFIG
    monkeypatch.setattr(pkg_install.subprocess, "run", lambda *a, **k: Done())
    uv, then = pkg_install.commands(str(python), ["six"], "uv")
    assert uv[:3] == [str(tmp_path / "uv"), "pip", "install"] and uv[-1] == "six"
    assert "unsafe-best-match" in uv and "/opt/wheels" in uv and then == pip
