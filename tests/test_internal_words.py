"""No internal bookkeeping words (issue numbers, work sessions) in what a reader reads: the
README, RESULTS.md, docs, profiles, notebook sources, qrlib's docstrings and comments (they
reach the published notebooks, tables and help texts) and the benchmarks."""
from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
INTERNAL = re.compile(r"\b[Ii]ssues? #?\d+|\bissue-\d+|\b[Ss]ession \d+|\bsession's\b")
SOURCES = ["README.md", "RESULTS.md", "docs", "params", "notebooks/src", "qrlib", "benchmarks",
           "Makefile", "environment.yml"]


def _files():
    for s in SOURCES:
        p = REPO / s
        if p.is_file():
            yield p
        elif p.is_dir():
            yield from (f for f in sorted(p.rglob("*")) if f.is_file() and
                        f.suffix in (".py", ".md", ".yaml", ".yml", ".sh", ".txt", ""))


def test_no_internal_words_in_what_readers_read():
    hits = []
    for f in _files():
        for i, line in enumerate(f.read_text(encoding="utf-8", errors="ignore").splitlines(), 1):
            if INTERNAL.search(line):
                hits.append(f"{f.relative_to(REPO)}:{i}: {line.strip()[:100]}")
    assert not hits, "\n".join(hits[:20])


def test_the_pattern_catches_what_it_should():
    for text in ("as issue 26 asked", "Issue #41", "the issue-24 recipe", "since session 5"):
        assert INTERNAL.search(text), text
    for text in ("known issues", "issue a one-line error", "a session of the notebook"):
        assert not INTERNAL.search(text), text
