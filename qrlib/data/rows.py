"""Training and evaluation rows: one dict per question, carrying everything a prompt and a
reward need.

A row always has ``qid``; the rest depends on the source:

* ``queries`` (a retrieval collection, :func:`qrlib.data.datasets.load_dataset`): ``query`` and
  ``question`` (the same text, so both DeepRetrieval's ``{query}`` and ACQO's
  ``{question}`` templates fill), ``context`` (conversation history; empty for one-turn
  collections), ``answers`` (answer strings and aliases from the query metadata, when the
  collection has them: HotpotQA, 2Wiki).
* ``spider`` (:func:`qrlib.data.datasets.load_spider`): ``question``, ``schema`` (CREATE TABLE
  statements), ``db_id``, ``db_path``, ``gold_sql``; the databases are split into train
  and test databases by :func:`spider_db_split` so no database is in both.
* a path to a ``.jsonl`` file: rows as written (each must have ``qid``).

:func:`check_rows` turns a missing template field or reward column into one line naming
it. Rows are plain lists of dicts, so they can be inspected and edited in a notebook
before training.
"""
from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from qrlib.core.errors import QrlibError

SOURCES = ("queries", "spider")


def answers_of(meta: Mapping[str, Any] | None) -> list[str]:
    """Answer strings of one query's metadata (``answer`` plus ``answer_aliases``,
    ``answers``), deduplicated, order kept; [] when the collection has none."""
    meta = meta or {}
    out: list[str] = []
    for key in ("answer", "answers", "answer_aliases"):
        val = meta.get(key)
        vals = val if isinstance(val, (list, tuple)) else [val]
        out += [str(v) for v in vals if v not in (None, "")]
    return list(dict.fromkeys(out))


def rows_from_queries(queries: Mapping[str, str]) -> list[dict[str, Any]]:
    """Rows of a plain qid -> text mapping (``query`` and ``question`` the same text, no
    conversation context), for single-query and ACQO prompts alike."""
    return [{"qid": str(q), "query": t, "question": t, "context": ""} for q, t in queries.items()]


def rows_from_dataset(ds: Any, qids: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """Rows of a retrieval :class:`qrlib.data.datasets.Dataset` (see module docstring)."""
    rows = []
    for q in (qids if qids is not None else sorted(ds.queries)):
        meta = ds.query_meta.get(q, {}) if getattr(ds, "query_meta", None) else {}
        ctx = meta.get("context") if isinstance(meta.get("context"), str) else ""
        rows.append({"qid": str(q), "query": ds.queries[q], "question": ds.queries[q],
                     "context": ctx, "answers": answers_of(meta)})
    return rows


def spider_db_split(db_ids: Sequence[str], test_fraction: float = 0.3) -> dict[str, str]:
    """db_id -> ``"train"`` or ``"test"``: a database is a test database when the first
    8 hex digits of sha1(db_id), read as a fraction of 16^8, fall below ``test_fraction``.
    Deterministic and independent of which other databases are present."""
    if not 0.0 < test_fraction < 1.0:
        raise QrlibError(f"test_fraction must be in (0, 1), got {test_fraction}")
    out = {}
    for d in db_ids:
        h = int(hashlib.sha1(d.encode("utf-8")).hexdigest()[:8], 16) / 16 ** 8
        out[d] = "test" if h < test_fraction else "train"
    return out


def rows_from_spider(spider: Any, split: str = "train", *,
                     test_fraction: float = 0.3) -> list[dict[str, Any]]:
    """Spider rows of the train or test databases (``split``: train | test | all)."""
    if split not in ("train", "test", "all"):
        raise QrlibError(f"spider split must be train, test or all, got {split!r}")
    dbs = sorted({e["db_id"] for e in spider.examples if e["db_path"] is not None})
    part = spider_db_split(dbs, test_fraction)
    schemas: dict[str, str] = {}
    rows = []
    for e in spider.examples:
        d = e["db_id"]
        if e["db_path"] is None or (split != "all" and part[d] != split):
            continue
        if d not in schemas:
            schemas[d] = spider.schema_text(d)
        rows.append({"qid": f"spider-{e['question_id']}", "question": e["question"],
                     "query": e["question"], "schema": schemas[d], "db_id": d,
                     "db_path": str(e["db_path"]), "gold_sql": e["query"]})
    return rows


def read_rows(path: str | os.PathLike) -> list[dict[str, Any]]:
    """Rows from a JSONL file (one object per line, each with ``qid``)."""
    p = Path(path)
    if not p.is_file():
        raise QrlibError(f"row file {p} not found; a row source is 'queries', 'spider' or a "
                         ".jsonl file of rows")
    rows = []
    with open(p, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise QrlibError(f"{p}:{n}: not JSON ({exc.msg})") from None
            if not isinstance(row, dict) or "qid" not in row:
                raise QrlibError(f"{p}:{n}: a row must be a JSON object with a 'qid'")
            row["qid"] = str(row["qid"])
            rows.append(row)
    return rows


def check_rows(rows: Sequence[Mapping[str, Any]], *, fields: Sequence[str] = (),
               columns: Sequence[str] = (), what: str = "training") -> None:
    """One-line errors for rows that lack a template field or a reward column."""
    if not rows:
        raise QrlibError(f"{what}: no rows")
    have = set(rows[0])
    for name, need in (("prompt field", fields), ("reward column", columns)):
        missing = [c for c in need if c not in have]
        if missing:
            raise QrlibError(f"{what} rows lack {name}(s) {missing}; the rows have "
                             f"{sorted(have)}")
    for i, r in enumerate(rows):
        if set(r) != have:
            raise QrlibError(f"{what} row {i} (qid {r.get('qid')!r}) has columns "
                             f"{sorted(r)}, unlike row 0's {sorted(have)}")
