"""What the builders share: deterministic JSON lines and gzip (the bytes of the shared
copies: ``ensure_ascii=False``, default separators, gzip level 9 with mtime 0 and no file
name in the header)."""
from __future__ import annotations

import gzip
import io
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from qrlib.core.errors import QrlibError

__all__ = ["jsonl_bytes", "write_gzip", "write_bytes", "lf", "add_doc", "write_qrels"]


def jsonl_bytes(records: Iterable[Mapping[str, Any]]) -> bytes:
    """One JSON object per line, UTF-8, ``ensure_ascii=False``."""
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode("utf-8")


def write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def write_gzip(path: str | os.PathLike, data: bytes, header_name: str = "") -> Path:
    """``data`` gzipped at level 9 with mtime 0 (reproducible); ``header_name``: the file
    name the gzip header records (empty: none, as ``GzipFile(fileobj=...)`` writes; the
    multi-hop sets' copies were written by ``gzip.open`` and record ``corpus.jsonl``)."""
    buf = io.BytesIO()
    with gzip.GzipFile(filename=header_name, mode="wb", fileobj=buf, mtime=0,
                       compresslevel=9) as g:
        g.write(data)
    return write_bytes(path, buf.getvalue())


def lf(data: bytes) -> bytes:
    """CRLF line ends as LF."""
    return data.replace(b"\r\n", b"\n")


def add_doc(docs: dict[str, dict[str, str]], did: str, title: str, text: str, what: str) -> None:
    """Add one paragraph to a pooled corpus; the same title with another text is an error
    (``what`` names the set)."""
    if did in docs and docs[did]["text"] != text:
        raise QrlibError(f"{what}: title {title!r} has two texts")
    docs[did] = {"_id": did, "title": title, "text": text}


def write_qrels(out: Path, rows: Mapping[str, Iterable[tuple[str, str]]]) -> None:
    """``qrels/<split>.tsv`` with BEIR's header and score 1, rows (query, doc) in order."""
    for split, pairs in rows.items():
        body = "".join(f"{q}\t{d}\t1\n" for q, d in pairs)
        write_bytes(out / "qrels" / f"{split}.tsv",
                    ("query-id\tcorpus-id\tscore\n" + body).encode("utf-8"))
