"""HotpotQA-mini: IRCoT's 500-question subsample of HotpotQA dev (distractor setting) with
its pooled context paragraphs; type and level of 100 of them from a Hugging Face
``hotpot_qa`` distractor subset, matched by question text.

Pure functions of the pieces (:func:`build`); the id, text and split rules are the ones the
workbook's offline copy was built with (its ``PROVENANCE.md``)."""
from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from pathlib import Path

from qrlib.data.build.common import add_doc, jsonl_bytes, write_bytes, write_gzip, write_qrels

IRCOT = "processed_data/hotpotqa/dev_subsampled.jsonl"
HF_SUBSET = "data/hotpot_dev_distractor_v1.json"

TRANSFORMATIONS = [
    "Doc id = `hp_` + the first 16 hex digits of sha1(UTF-8 title); title verbatim (some "
    "carry HTML entities such as `&quot;`); text = the paragraph with every whitespace run "
    "collapsed to one space. Corpus lines sorted by title, queries by id.",
    "Query `_id` = the HotpotQA id; `metadata` = {type, level, type_level_source, answer, "
    "supporting_titles, context_titles, id_source, source, split}; type and level from the "
    "Hugging Face distractor subset where the question text matches (100), else type null and "
    "level `hard` (HotpotQA dev is all hard), flagged `level_inferred_dev_is_all_hard`.",
    "qrels = the 2 paragraphs flagged `is_supporting`, score 1; split: test if "
    "int(sha256(question id), 16) % 3 == 0, else train.",
]

_WS = re.compile(r"\s+")


def doc_id(title: str, prefix: str = "hp_") -> str:
    return prefix + hashlib.sha1(title.encode("utf-8")).hexdigest()[:16]


def collapse(text: str) -> str:
    return _WS.sub(" ", text).strip()


def split_of(qid: str) -> str:
    """The workbook's deterministic split of the multi-hop sets."""
    return "test" if int(hashlib.sha256(qid.encode("utf-8")).hexdigest(), 16) % 3 == 0 \
        else "train"


def norm_question(q: str) -> str:
    return " ".join(q.lower().split())


def build(files: Mapping[str, Path], out: Path) -> None:
    records = [json.loads(line) for line in files[IRCOT].read_text(encoding="utf-8")
               .splitlines() if line.strip()]
    labels = {norm_question(r["question"]): (r["type"], r["level"])
              for r in json.loads(files[HF_SUBSET].read_text(encoding="utf-8"))}
    docs: dict[str, dict[str, str]] = {}
    queries, qrels = [], {"train": [], "test": []}
    for r in records:
        qid = r["question_id"]
        ctx = r["contexts"]
        for c in ctx:
            add_doc(docs, doc_id(c["title"]), c["title"], collapse(c["paragraph_text"]),
                    "hotpotqa-mini")
        gold = [c["title"] for c in ctx if c["is_supporting"]]
        typ, level = labels.get(norm_question(r["question_text"]), (None, None))
        split = split_of(qid)
        answers = r["answers_objects"][0]["spans"]
        queries.append({"_id": qid, "text": r["question_text"], "metadata": {
            "type": typ, "level": level or "hard",
            "type_level_source": ("hf_distractor_validation_subset" if typ is not None
                                  else "level_inferred_dev_is_all_hard"),
            "answer": answers[0] if answers else "", "supporting_titles": gold,
            "context_titles": [c["title"] for c in ctx], "id_source": "hotpotqa",
            "source": "ircot_dev_subsampled", "split": split}})
        qrels[split] += [(qid, doc_id(t)) for t in gold]
    write_gzip(out / "corpus.jsonl.gz",
               jsonl_bytes(sorted(docs.values(), key=lambda d: d["title"])))
    write_bytes(out / "queries.jsonl", jsonl_bytes(sorted(queries, key=lambda q: q["_id"])))
    write_qrels(out, {split: sorted(rows, key=lambda x: x[0]) for split, rows in qrels.items()})
