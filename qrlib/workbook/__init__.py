"""The workbook: profiles, notebook runner, freshness, publishing, RESULTS.md. No science.

One package with a strict layering (each module imports only the ones above it in this
list, at module top level; ``tests/test_imports.py`` checks that there is no cycle):

* :mod:`.profiles`: profiles (``params/*.yaml``) and notebooks, everything but running them;
* :mod:`.freshness`: per-notebook inputs, fingerprints and ``qrlib status``;
* :mod:`.publish`: stamps on tables and captions, executed notebooks, the timing table;
* :mod:`.results`: RESULTS.md, generated from a profile's tables;
* :mod:`.runner`: ``python -m qrlib run``, the top layer (calls all of the above).

No notebook imports this package (a notebook's fingerprint hashes the qrlib files it
imports, and the runner is not a result input); notebooks use :mod:`qrlib.core.io`.
The names below are what callers use as ``from qrlib import workbook as wb; wb.X``.
"""
from __future__ import annotations

from qrlib.core.io import (REPO_ROOT, atomic_path, atomic_write, cache_dir, current_umask,
                           load_json, read_table, save_json, save_table)
from qrlib.core.lock import LOCK_NAME, run_lock
from qrlib.workbook import profiles
from qrlib.workbook.profiles import (INJECTED, NOTEBOOK_DIR, NOTEBOOK_SRC_DIR, PROFILE_KEYS,
                                     check_value_type, data_roots, load_profile,
                                     notebook_names, notebook_parameters, parameters_for,
                                     run_paths, select_notebooks, validate_profile,
                                     long_notebooks, profile_notebooks)
from qrlib.workbook import freshness
from qrlib.workbook.freshness import profile_status
from qrlib.workbook import publish
from qrlib.workbook.publish import PUBLISHED_PROFILES, publish_notebooks, timing_table
from qrlib.workbook import results
from qrlib.workbook.results import write_results
from qrlib.workbook import runner
from qrlib.workbook.runner import (after_run, build_notebooks, classify_reads,
                                   published_outputs_guard, run_profile, stale_selection)

__all__ = [
    # modules
    "profiles", "freshness", "publish", "results", "runner",
    # qrlib.core, re-exported for the runner's callers
    "REPO_ROOT", "LOCK_NAME", "atomic_path", "atomic_write", "cache_dir", "current_umask",
    "load_json", "read_table", "run_lock", "save_json", "save_table",
    # profiles
    "INJECTED", "NOTEBOOK_DIR", "NOTEBOOK_SRC_DIR", "PROFILE_KEYS", "check_value_type",
    "data_roots", "load_profile", "notebook_names", "notebook_parameters", "parameters_for",
    "run_paths", "select_notebooks", "validate_profile", "long_notebooks", "profile_notebooks",
    # freshness, publish, results
    "profile_status", "PUBLISHED_PROFILES", "publish_notebooks", "timing_table",
    "write_results",
    # runner
    "after_run", "build_notebooks", "classify_reads", "published_outputs_guard",
    "run_profile", "stale_selection",
]
