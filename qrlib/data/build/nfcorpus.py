"""NFCorpus (BEIR) from the Cocktail repository's ``dataset/nfcorpus.zip``.

The archive is BEIR's nfcorpus with ``corpus/human.jsonl`` (the original, human-written
corpus; its LLM-rewritten sibling is not used). ``corpus.jsonl.gz`` keeps ``_id, title,
text`` of each document; ``queries.jsonl`` is re-serialised as it is (``metadata.url``
kept); the qrels are copied with LF line ends (header ``query-id, corpus-id, score``)."""
from __future__ import annotations

import json
import zipfile
from collections.abc import Mapping
from pathlib import Path

from qrlib.data.build.common import jsonl_bytes, lf, write_bytes, write_gzip

TRANSFORMATIONS = [
    "corpus.jsonl.gz: corpus/human.jsonl with `_id, title, text` kept (the per-document "
    "`metadata.url` dropped), one JSON object per line (`ensure_ascii=False`), gzip level 9, "
    "mtime 0. The LLM-rewritten corpus of the same archive is not used.",
    "queries.jsonl: re-serialised as it is (keeps `metadata.url`).",
    "qrels/{train,dev,test}.tsv: copied with LF line ends.",
]


def build(files: Mapping[str, Path], out: Path) -> None:
    with zipfile.ZipFile(files["dataset/nfcorpus.zip"]) as z:
        docs = [json.loads(line) for line in z.read("corpus/human.jsonl").decode("utf-8")
                .splitlines() if line.strip()]
        write_gzip(out / "corpus.jsonl.gz", jsonl_bytes(
            {"_id": d["_id"], "title": d["title"], "text": d["text"]} for d in docs))
        queries = [json.loads(line) for line in z.read("queries.jsonl").decode("utf-8")
                   .splitlines() if line.strip()]
        write_bytes(out / "queries.jsonl", jsonl_bytes(queries))
        for split in ("train", "dev", "test"):
            write_bytes(out / "qrels" / f"{split}.tsv", lf(z.read(f"qrels/{split}.tsv")))
