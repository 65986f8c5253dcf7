"""``python -m qrlib.workbook build [NN_name ...]``: the same as ``python -m qrlib
build-notebooks``."""
from __future__ import annotations

import sys

from qrlib.core.io import REPO_ROOT
from qrlib.workbook.runner import build_notebooks

if sys.argv[1:2] == ["build"]:
    for p in build_notebooks(sys.argv[2:] or None):
        print(p.relative_to(REPO_ROOT))
else:
    print("usage: python -m qrlib.workbook build [NN_name ...]", file=sys.stderr)
    sys.exit(2)
