"""HotpotQA-large: every public HotpotQA sample with paragraph text that the workbook could
pool (948 questions), a strict superset of HotpotQA-mini.

Sources, in the order their questions are taken: IRCoT's 500 dev questions (distractor
contexts; HotpotQA-mini), AMOR's "dev" file (100 training questions, distractor contexts),
HippoRAG's 100 training questions (distractor contexts), AMOR's "test" file and the TTS
sample (500 dev questions each, fullwiki top-10 contexts: a question is kept only when both
gold paragraphs are among its 10). A question is taken from the first source that has it
with both gold paragraphs; type and level from the HF subset (IRCoT questions), else AMOR
test, else the TTS sample, else the source itself."""
from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from qrlib.data.build.common import add_doc, jsonl_bytes, write_bytes, write_gzip, write_qrels
from qrlib.data.build.hotpotqa import HF_SUBSET, IRCOT, norm_question, collapse, doc_id, \
    split_of

AMOR_TEST = "data/hotpotqa/test.json"
AMOR_DEV = "data/hotpotqa/dev.json"
TTS = "sampled_data/hotpotqa/sampled_ds.json"
HIPPO = "data/hotpotqa_train.json"

TRANSFORMATIONS = [
    "Paragraph text: a source's sentences joined with a space, then every whitespace run "
    "collapsed (IRCoT's `paragraph_text` collapsed the same way, as HotpotQA-mini); title "
    "verbatim; doc id = `hp_` + the first 16 hex digits of sha1(UTF-8 title); corpus lines "
    "sorted by id (the union of each kept question's own context list).",
    "Queries in source order (IRCoT, AMOR dev, HippoRAG train, AMOR test, TTS sample), each "
    "question once, from the first source that has it with both gold paragraphs in its "
    "context; `metadata` = {type, level, type_level_source, answer, supporting_titles, "
    "context_titles, context_setting, context_source, hotpot_split, sources, split}.",
    "qrels = the 2 gold titles (IRCoT: `is_supporting`; else `supporting_facts`), score 1, "
    "in query order; split: test if int(sha256(question id), 16) % 3 == 0, else train.",
]

# source -> (context setting, HotpotQA split)
_SETTING = {"ircot_dev_subsampled": ("distractor", "dev"),
            "amor_dev": ("distractor", "train_inferred"),
            "hipporag_train": ("distractor", "train"),
            "amor_test": ("fullwiki_top10", "dev"),
            "tts_sampled": ("fullwiki_top10", "dev")}
_ORDER = ["ircot_dev_subsampled", "amor_dev", "hipporag_train", "amor_test", "tts_sampled"]


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def _records(files: Mapping[str, Path]) -> dict[str, list[dict]]:
    """Each source as records ``{id, question, answer, type, level, gold, context}`` with
    ``context`` a list of (title, text)."""
    out: dict[str, list[dict]] = {}
    out["ircot_dev_subsampled"] = [
        {"id": r["question_id"], "question": r["question_text"],
         "answer": (r["answers_objects"][0]["spans"] or [""])[0], "type": None, "level": None,
         "gold": [c["title"] for c in r["contexts"] if c["is_supporting"]],
         "context": [(c["title"], collapse(c["paragraph_text"])) for c in r["contexts"]]}
        for r in _jsonl(files[IRCOT])]

    def hotpot(r: dict) -> dict:
        return {"id": r["_id"], "question": r["question"], "answer": r["answer"],
                "type": r.get("type"), "level": r.get("level"),
                "gold": list(dict.fromkeys(f[0] for f in r["supporting_facts"])),
                "context": [(t, collapse(" ".join(s))) for t, s in r["context"]]}

    out["amor_dev"] = [hotpot(r) for r in _jsonl(files[AMOR_DEV])]
    out["hipporag_train"] = [hotpot(r) for r in
                             json.loads(files[HIPPO].read_text(encoding="utf-8"))]
    out["amor_test"] = [hotpot(r) for r in _jsonl(files[AMOR_TEST])]
    cols = json.loads(files[TTS].read_text(encoding="utf-8"))
    keys = sorted(cols["_1"], key=int)
    out["tts_sampled"] = [hotpot({**{c: cols[c][k] for c in cols}, "_id": cols["_1"][k]})
                          for k in keys]
    return out


def build(files: Mapping[str, Path], out: Path) -> None:
    recs = _records(files)
    labels = {norm_question(r["question"]): (r["type"], r["level"])
              for r in json.loads(files[HF_SUBSET].read_text(encoding="utf-8"))}
    by_source = {s: {r["id"]: r for r in rs} for s, rs in recs.items()}
    docs: dict[str, dict[str, str]] = {}
    queries, taken = [], set()
    for src in _ORDER:
        for r in recs[src]:
            titles = [t for t, _ in r["context"]]
            if r["id"] in taken or not all(g in titles for g in r["gold"]):
                continue
            taken.add(r["id"])
            sources = [s for s in _ORDER if r["id"] in by_source[s]]
            typ, level, tls = None, None, None
            if src == "ircot_dev_subsampled":
                typ, level = labels.get(norm_question(r["question"]), (None, None))
                tls = "hf_distractor_validation_subset" if typ is not None else None
            for s in (["amor_test", "tts_sampled"] if tls is None and src in (
                    "ircot_dev_subsampled", "amor_test", "tts_sampled") else []):
                other = by_source[s].get(r["id"])
                if other is not None and other["type"] is not None:
                    typ, level, tls = other["type"], other["level"], s
                    break
            if tls is None and r["type"] is not None:
                typ, level, tls = r["type"], r["level"], src
            if tls is None:
                level, tls = "hard", "level_inferred_dev_is_all_hard"
            for t, text in r["context"]:
                add_doc(docs, doc_id(t), t, text, "hotpotqa-large")
            setting, hsplit = _SETTING[src]
            queries.append({"_id": r["id"], "text": r["question"], "metadata": {
                "type": typ, "level": level, "type_level_source": tls, "answer": r["answer"],
                "supporting_titles": r["gold"], "context_titles": titles,
                "context_setting": setting, "context_source": src, "hotpot_split": hsplit,
                "sources": sources, "split": split_of(r["id"])}})
    write_gzip(out / "corpus.jsonl.gz",
               jsonl_bytes(sorted(docs.values(), key=lambda d: d["_id"])),
               header_name="corpus.jsonl")
    write_bytes(out / "queries.jsonl", jsonl_bytes(queries))
    qrels: dict[str, list[tuple[str, str]]] = {"train": [], "test": []}
    for q in queries:
        m = q["metadata"]
        qrels[m["split"]] += [(q["_id"], doc_id(t)) for t in m["supporting_titles"]]
    write_qrels(out, qrels)
