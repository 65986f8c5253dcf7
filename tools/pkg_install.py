"""`pip install` for the Makefile's install steps, through uv where it is installed.

Usage (the venv's Python runs it; stdlib only, since it runs before qrlib's dependencies)::

    .venv/bin/python tools/pkg_install.py [pip install arguments ...]

With ``INSTALLER=uv`` (the Makefile's default) and ``uv`` beside the venv's Python, it runs
``uv pip install`` (parallel downloads and unpacking, to the same package versions; the
times of both in README, "Installer"), else ``pip install``.
uv reads none of pip's configuration, so :func:`uv_flags` carries it over from ``pip config
list`` (pip's files and ``PIP_*`` variables): indexes, find-links, constraints, trusted hosts.
``--index-strategy unsafe-best-match`` gives pip's choice of the best version across all
indexes (uv's default stops at the first index that has the package). Where uv fails, the
same arguments go to pip, so a configuration uv cannot follow still installs.
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

#: pip option -> uv option (uv pip install accepts each, repeated for lists)
OPTIONS = {"index-url": "--index-url", "extra-index-url": "--extra-index-url",
           "find-links": "--find-links", "constraint": "--constraint",
           "trusted-host": "--allow-insecure-host"}
_LINE = re.compile(r"^(?:global|install|:env:)\.([a-z-]+)=(.*)$")


def uv_flags(config_list: str) -> list[str]:
    """uv options for what ``pip config list`` printed (one ``section.key='value'`` per
    line; list values are space- or newline-separated). Keys without a uv twin are left out;
    ``no-index`` set true gives ``--no-index``."""
    values: dict[str, list[str]] = {}
    no_index = False
    for line in config_list.splitlines():
        m = _LINE.match(line.strip())
        if not m:
            continue
        key, raw = m.groups()
        try:
            parts = shlex.split(raw)
        except ValueError:
            continue
        items = [item for part in parts for item in part.split()]
        if key == "no-index":
            no_index = bool(items) and items[0].lower() in ("1", "true", "yes", "on")
        elif key in OPTIONS:
            for item in items:  # the same value from a file and a PIP_ variable: once
                if item not in values.setdefault(key, []):
                    values[key].append(item)
    flags = ["--no-index"] if no_index else []
    for key, option in OPTIONS.items():
        for item in values.get(key, []):
            flags += [option, item]
    return flags


def commands(python: str, args: list[str], installer: str) -> list[list[str]]:
    """The install commands to try in order: uv's (when ``installer`` is ``uv`` and uv lies
    beside ``python``), then pip's."""
    pip = [python, "-m", "pip", "install", "-q", *args]
    uv = Path(python).with_name("uv")
    if installer != "uv" or not uv.exists():
        return [pip]
    config = subprocess.run([python, "-m", "pip", "config", "list"], capture_output=True,
                            text=True).stdout
    return [[str(uv), "pip", "install", "-q", "--python", python, "--compile-bytecode",
             "--index-strategy", "unsafe-best-match", *uv_flags(config), *args], pip]


def main(argv: list[str]) -> int:
    tries = commands(sys.executable, argv, os.environ.get("INSTALLER", "uv"))
    for i, cmd in enumerate(tries):
        rc = subprocess.run(cmd).returncode
        if rc == 0:
            return 0
        if i + 1 < len(tries):
            print(f"tools/pkg_install.py: uv exited {rc}; installing with pip instead",
                  file=sys.stderr)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
