"""2WikiMultihopQA-mini: HippoRAG's pooled paragraph corpus of 1,000 dev questions (their
GFM-RAG record: answer, aliases, gold titles), and 500 further sampled dev questions with
their own 10-paragraph contexts, types and evidence triples (a pandas column-oriented
JSON). The id, text, type and split rules are the ones the workbook's offline copy was
built with (its ``PROVENANCE.md``)."""
from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from qrlib.data.build.common import add_doc, jsonl_bytes, write_bytes, write_gzip, write_qrels
from qrlib.data.build.hotpotqa import doc_id, split_of

CORPUS = "data/2wikimultihopqa_corpus.json"
GFM = "data/2wikimultihopqa/test.json"
SAMPLE = "sampled_data/2wikimultihopqa/sampled_ds.json"

TRANSFORMATIONS = [
    "Corpus: HippoRAG's pooled paragraphs of its 1,000 questions and the 10-paragraph "
    "contexts of the 500 sampled questions (sentences joined with one space, as HippoRAG's "
    "text); doc id = `2w_` + the first 16 hex digits of sha1(UTF-8 title); lines sorted by id.",
    "Queries: the 1,000 GFM-RAG records in their order, then the sampled questions not among "
    "them in sample order; `metadata` = {type, type_source, answer, answer_aliases, "
    "supporting_titles, num_supporting, context_titles, evidences, sources, split}; a "
    "question with 4 gold paragraphs and no type is `bridge_comparison` "
    "(`inferred_from_4_supporting_paragraphs`: in the typed sample, 4 gold paragraphs occur "
    "for bridge_comparison only).",
    "qrels = the distinct gold titles, score 1, in query order; split: test if "
    "int(sha256(question id), 16) % 3 == 0, else train.",
]


def _rows(columns: Mapping[str, Mapping[str, object]]) -> list[dict]:
    """A pandas column-oriented JSON object as rows, in index order."""
    keys = sorted(next(iter(columns.values())), key=int)
    return [{c: columns[c][k] for c in columns} for k in keys]


def build(files: Mapping[str, Path], out: Path) -> None:
    docs: dict[str, dict[str, str]] = {}

    def add(title: str, text: str) -> None:
        add_doc(docs, doc_id(title, "2w_"), title, text, "2wikimultihopqa-mini")

    for d in json.loads(files[CORPUS].read_text(encoding="utf-8")):
        add(d["title"], d["text"])
    sample = _rows(json.loads(files[SAMPLE].read_text(encoding="utf-8")))
    by_id = {r["_1"]: r for r in sample}
    for r in sample:
        for title, sents in r["context"]:
            add(title, " ".join(sents))
    queries = []

    def meta(gold: list[str], answer: str, aliases: list[str], r: dict | None,
             sources: list[str], qid: str) -> dict:
        typ = r["type"] if r else None
        src = "tts_sampled500" if r else None
        if typ is None and len(gold) == 4:
            typ, src = "bridge_comparison", "inferred_from_4_supporting_paragraphs"
        return {"type": typ, "type_source": src, "answer": answer, "answer_aliases": aliases,
                "supporting_titles": gold, "num_supporting": len(gold),
                "context_titles": [t for t, _ in r["context"]] if r else [],
                "evidences": r["evidences"] if r else None, "sources": sources,
                "split": split_of(qid)}

    gfm = json.loads(files[GFM].read_text(encoding="utf-8"))
    for g in gfm:
        r = by_id.get(g["id"])
        sources = ["hipporag_gfmrag_test1000"] + (["tts_sampled500"] if r else [])
        queries.append({"_id": g["id"], "text": g["question"], "metadata": meta(
            list(g["supporting_facts"]), g["answer"], list(g["answer_aliases"]), r, sources,
            g["id"])})
    seen = {g["id"] for g in gfm}
    for r in sample:
        if r["_1"] in seen:
            continue
        gold = list(dict.fromkeys(t for t, _ in r["supporting_facts"]))
        queries.append({"_id": r["_1"], "text": r["question"], "metadata": meta(
            gold, r["answer"], [], r, ["tts_sampled500"], r["_1"])})
    write_gzip(out / "corpus.jsonl.gz", jsonl_bytes(sorted(docs.values(),
                                                           key=lambda d: d["_id"])),
               header_name="corpus.jsonl")
    write_bytes(out / "queries.jsonl", jsonl_bytes(queries))
    qrels: dict[str, list[tuple[str, str]]] = {"train": [], "test": []}
    for q in queries:
        m = q["metadata"]
        qrels[m["split"]] += [(q["_id"], doc_id(t, "2w_")) for t in m["supporting_titles"]]
    write_qrels(out, qrels)
