"""SciFact (BEIR) from a CSV dump of the Hugging Face ``allenai/scifact`` corpus, BEIR's
queries and qrels.

The corpus is rebuilt as BEIR built it: ``_id`` = doc_id, ``title``, ``text`` = the
abstract's sentences joined by one space. The CSV stores each abstract as a NumPy array
repr (``['first sentence.'\\n 'second ...']``); :func:`sentences` reads it with Python's own
tokenizer, one string literal per sentence, and refuses anything else in it. Queries and
qrels are BEIR's files, copied byte for byte."""
from __future__ import annotations

import ast
import csv
import io
import tokenize
import zipfile
from collections.abc import Mapping
from pathlib import Path

from qrlib.core.errors import QrlibError
from qrlib.data.build.common import jsonl_bytes, write_bytes, write_gzip

TRANSFORMATIONS = [
    "corpus.jsonl.gz: rebuilt from `corpus_train.csv` inside data/scifact.zip: `_id` = "
    "doc_id, `title` = title, `text` = the abstract's sentences joined with one space "
    "(BEIR's construction); each abstract is a NumPy array repr read with Python's "
    "string-literal tokenizer (no leftover token allowed); one JSON object per line "
    "(`ensure_ascii=False`, fields `_id, title, text`), gzip level 9, mtime 0.",
    "queries.jsonl, qrels/train.tsv, qrels/test.tsv: BEIR's files, copied byte for byte.",
]


def sentences(array_repr: str) -> list[str]:
    """The strings of a NumPy array repr of strings, in order (linear in its length)."""
    out, brackets = [], []
    try:
        for t in tokenize.generate_tokens(io.StringIO(array_repr).readline):
            if t.type == tokenize.STRING:
                out.append(ast.literal_eval(t.string))
            elif t.type == tokenize.OP and t.string in "[]":
                brackets.append(t.string)
            elif t.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.ENDMARKER,
                                tokenize.INDENT, tokenize.DEDENT):
                raise QrlibError(f"unexpected token {t.string!r} in an abstract")
    except (tokenize.TokenError, SyntaxError, ValueError) as exc:
        raise QrlibError(f"an abstract is not a NumPy array repr of strings ({exc})") from None
    if brackets != ["[", "]"]:
        raise QrlibError(f"an abstract is not one bracketed array ({''.join(brackets)})")
    return out


def build(files: Mapping[str, Path], out: Path) -> None:
    csv.field_size_limit(1 << 30)
    with zipfile.ZipFile(files["data/scifact.zip"]) as z:
        text = z.read("corpus_train.csv").decode("utf-8")
    rows = csv.DictReader(io.StringIO(text, newline=""))
    write_gzip(out / "corpus.jsonl.gz", jsonl_bytes(
        {"_id": r["doc_id"], "title": r["title"], "text": " ".join(sentences(r["abstract"]))}
        for r in rows))
    write_bytes(out / "queries.jsonl", files["scifact/queries.jsonl"].read_bytes())
    for split in ("train", "test"):
        write_bytes(out / "qrels" / f"{split}.tsv",
                    files[f"scifact/qrels/{split}.tsv"].read_bytes())
