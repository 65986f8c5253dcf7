"""What an executed notebook should not show a reader: logs, progress bars, reprs, paths.

:func:`noise_lines` reads an executed notebook (nbformat JSON) and returns, per kind, the
output lines a reader sees that are not results: library log lines (vLLM's coloured
``WARNING`` lines, PyTorch's native ``[W...]`` lines), progress bars, Python warnings,
``[record]`` lines, object reprs (``PosixPath(...)``, ``<Figure size ...>``), machine paths
and tables cut short (``[4 rows x 26 columns]``, ``...`` columns). Only what a reader sees
counts: a ``text/plain`` fallback beside an image, HTML or Markdown is not shown, so it is
not counted (but an HTML table with a ``...`` column is). :func:`qrlib.session.start` sends
all of it to the run log; the smoke tests assert every count is zero.
"""
from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["NOISE", "noise_lines", "noise_counts"]

#: kind -> pattern of one output line of that kind
NOISE: Mapping[str, re.Pattern[str]] = {
    "library log": re.compile(r"\x1b\[|^\s*(?:\(\w+ pid=\d+\)\s*)?(?:INFO|WARNING|ERROR|DEBUG)"
                              r"\s+\d\d-\d\d |^\[[WIE]\d{4} |\.cpp:\d+\]"),
    "progress bar": re.compile(r"\d+%\|.*\||\d+(?:\.\d+)?(?:it|s)/(?:s|it)\]"),
    "warning": re.compile(r"\b\w*Warning: "),
    "record": re.compile(r"^\[record\] "),
    "repr": re.compile(r"PosixPath\(|<Figure size|<matplotlib\.|<Axes[ :]| object at 0x"),
    "machine path": re.compile(r"(?:^|[\s'\"(=])/(?:work|home|tmp|usr|root|opt)/|site-packages"
                               r"|\.venv/"),
    "truncated table": re.compile(r"\[\d+ rows x \d+ columns\]|<t[hd]>\.\.\.</t[hd]>"),
}
RICH = ("image/png", "image/jpeg", "image/svg+xml", "text/html", "text/markdown")


def _shown_texts(output: Mapping[str, Any]) -> Iterator[str]:
    """The text a reader sees of one output (stream text, tracebacks, the richest display)."""
    def text(v: Any) -> str:
        return "".join(v) if isinstance(v, list) else str(v)

    kind = output.get("output_type")
    if kind == "stream":
        yield text(output.get("text", ""))
    elif kind == "error":
        yield "\n".join(output.get("traceback", []))
    else:
        data = output.get("data", {})
        if "text/html" in data:
            yield text(data["text/html"])
        elif "text/markdown" in data:
            yield text(data["text/markdown"])
        elif not any(m in data for m in RICH):
            yield text(data.get("text/plain", ""))


def noise_lines(nb: Mapping[str, Any]) -> dict[str, list[str]]:
    """``{kind: [line, ...]}`` of every :data:`NOISE` line in the notebook's code outputs
    (kinds with none are left out)."""
    found: dict[str, list[str]] = {}
    for cell in nb.get("cells", []):
        for out in cell.get("outputs", []) or []:
            for chunk in _shown_texts(out):
                for line in chunk.splitlines():
                    for kind, pat in NOISE.items():
                        if pat.search(line):
                            found.setdefault(kind, []).append(line[:200])
    return found


def noise_counts(nb: Mapping[str, Any]) -> dict[str, int]:
    """``{kind: number of lines}`` for every kind of :data:`NOISE` (zeros included)."""
    lines = noise_lines(nb)
    return {kind: len(lines.get(kind, [])) for kind in NOISE}
