"""Loaders for collections with no offline copy here: MultiHop-RAG and TopiOCQA.

Both read the *official* release files from a folder (or from the Hugging Face hub when
online, via ``datasets``) and return a :class:`qrlib.data.collection.Dataset` (also importable as ``qrlib.data.datasets.Dataset``).

MultiHop-RAG (Tang & Yang, COLM 2024; github.com/yixuantt/MultiHop-RAG):
  ``corpus.json`` — list of news articles ``{title, author, source, published_at,
  category, url, body}``; ``MultiHopRAG.json`` — list of ``{query, answer, question_type,
  evidence_list: [{title, author, url, source, category, published_at, fact}]}``.
  Articles are chunked as in ACQO appendix A.1 (LlamaIndex sentence splitter,
  ``chunk_size=256``, ``chunk_overlap=20`` tokens; 609 articles -> 7,786 chunks with
  LlamaIndex's tiktoken tokenizer). Relevance follows the benchmark's own evaluation script:
  a chunk is relevant when it contains an evidence ``fact`` verbatim once all whitespace is
  removed from both (case-sensitive). Then ir-measures' ``RR@10`` is the benchmark's MRR@10
  and ``Success@k`` its Hits@k exactly; its MAP@10 is fact-level (each fact counts once, AP
  divided by min(#facts, k)) and is provided as :func:`multihop_rag_ap`. A fact split across
  two chunks matches neither (as in the benchmark); ``fact_fallback=True`` instead marks the
  evidence article's chunk with the largest word overlap. Each evidence item is a subtopic
  (``meta["subtopic_qrels"]``, for alpha-nDCG). ``null_query`` questions have no evidence and
  are skipped; questions none of whose facts match a chunk are dropped (both counted).

TopiOCQA (Adlakha et al., TACL 2022; github.com/McGill-NLP/topiocqa):
  ``topiocqa_{train,dev}.json`` (a JSON list, or JSON lines) of turns ``{Conversation_no,
  Turn_no, Question, Answer, Topic, Topic_section, Rationale, is_nq, Context,
  Additional_answers, Gold_passage: {id, title, text}}`` where ``Context`` lists the
  previous questions and answers in order. Following ACQO (section 1 example), the query
  is the history and the current question joined by ``[SEP]``:
  ``q_1 [SEP] a_1 [SEP] ... [SEP] q_t``. Qrels = the gold passage id (``wiki:123`` ->
  ``123``). The corpus is ``full_wiki_segments.tsv`` (``id  text  title``, 25.7M passages)
  when present, else the pool of gold passages of the loaded turns (flagged in meta: a
  pooled corpus is far easier than the full Wikipedia one). The test split maps to the
  official dev file (TopiOCQA's test set is hidden).
"""
from __future__ import annotations

import csv
import json
import os
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from qrlib.core.errors import QrlibError
from qrlib.data.collection import Dataset

_WORD = re.compile(r"\w+|[^\w\s]", re.UNICODE)
_SENT = re.compile(r"(?<=[.!?])\s+(?=[\"'“‘(\[]?[A-Z0-9])")


# --------------------------------------------------------------------------- chunking
def default_token_counter() -> Callable[[str], int]:
    """Token counter for chunking: tiktoken cl100k (LlamaIndex's default) if available,
    else a word/punctuation regex (close to BPE counts for English news: within ~15%)."""
    try:
        import tiktoken

        enc = tiktoken.get_encoding("cl100k_base")
        return lambda s: len(enc.encode(s))
    except Exception:  # noqa: BLE001 - not installed or no cached BPE file offline
        return lambda s: len(_WORD.findall(s))


def split_sentences(text: str) -> list[str]:
    """Paragraphs, then sentence ends followed by a capital/digit (keeps the text intact)."""
    out: list[str] = []
    for para in re.split(r"\n\s*\n", text):
        para = para.strip()
        if para:
            out += [s for s in _SENT.split(para) if s.strip()]
    return out


def chunk_text(text: str, chunk_size: int = 256, chunk_overlap: int = 20,
               count_tokens: Callable[[str], int] | None = None) -> list[str]:
    """Sentence-packing chunker in the spirit of LlamaIndex's ``SentenceSplitter``.

    Whole sentences are packed into a chunk while it stays within ``chunk_size`` tokens; the
    next chunk starts with the trailing sentences of the previous one that fit in
    ``chunk_overlap`` tokens. A sentence longer than ``chunk_size`` is cut into windows of
    ``chunk_size`` words with ``chunk_overlap`` words overlap.
    """
    if chunk_size <= 0 or not 0 <= chunk_overlap < chunk_size:
        raise QrlibError(f"chunking needs chunk_size > chunk_overlap >= 0, got "
                         f"{chunk_size}/{chunk_overlap}")
    count = count_tokens or default_token_counter()
    units: list[tuple[str, int]] = []
    for sent in split_sentences(text):
        n = count(sent)
        if n <= chunk_size:
            units.append((sent, n))
            continue
        words = sent.split()
        step = max(1, int(len(words) * (chunk_size - chunk_overlap) / max(n, 1)))
        width = max(1, int(len(words) * chunk_size / max(n, 1)))
        for s in range(0, len(words), step):
            piece = " ".join(words[s:s + width])
            units.append((piece, count(piece)))
            if s + width >= len(words):
                break
    chunks: list[str] = []
    cur: list[tuple[str, int]] = []
    cur_n = 0
    for unit in units:
        if cur and cur_n + unit[1] > chunk_size:
            chunks.append(" ".join(u for u, _ in cur))
            keep: list[tuple[str, int]] = []
            kn = 0
            for u in reversed(cur):
                if kn + u[1] > chunk_overlap:
                    break
                keep.insert(0, u)
                kn += u[1]
            cur, cur_n = keep, kn
        cur.append(unit)
        cur_n += unit[1]
    if cur:
        chunks.append(" ".join(u for u, _ in cur))
    return chunks


def _norm(s: str) -> str:
    return " ".join(s.lower().split())


def _squash(s: str) -> str:
    """The MultiHop-RAG evaluation's normalisation: drop every whitespace character."""
    return "".join(s.split())


def multihop_rag_ap(ranked_texts: Sequence[str], facts: Sequence[str], k: int = 10) -> float:
    """MultiHop-RAG's fact-level AP@k for one query (its ``map_at``; Tang & Yang, 2024).

    Walking the top ``k`` texts, each rank adds (number of facts found there for the first
    time) / rank; the sum is divided by min(#facts, k). Matching is substring containment
    after removing all whitespace. ir-measures has no such novelty-aware AP, hence this one.
    """
    golds = [_squash(f) for f in facts]
    if not golds:
        return 0.0
    found: set[int] = set()
    total = 0.0
    for r, text in enumerate(ranked_texts[:k], 1):
        t = _squash(text)
        new = [i for i, g in enumerate(golds) if i not in found and g in t]
        found.update(new)
        total += len(new) / r
    return total / min(len(golds), k)


# --------------------------------------------------------------------------- MultiHop-RAG
def _read_json_records(path: Path) -> list[dict]:
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise QrlibError(f"{path}:{line}: not UTF-8 text (byte 0x{raw[exc.start]:02x}); "
                         "re-save it as UTF-8") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = []
        for lineno, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                data.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise QrlibError(f"{path}:{lineno}: neither a JSON list nor JSON lines "
                                 f"({exc.msg})") from None
    if isinstance(data, dict):
        data = data.get("data", list(data.values()))
    if not isinstance(data, list):
        raise QrlibError(f"{path}: expected a list of records")
    return data


def build_multihop_rag(articles: Sequence[dict], questions: Sequence[dict], *,
                       chunk_size: int = 256, chunk_overlap: int = 20,
                       count_tokens: Callable[[str], int] | None = None,
                       fact_fallback: bool = False,
                       name: str = "multihop-rag", source: str = "") -> Dataset:
    """MultiHop-RAG records -> chunked :class:`Dataset` (see module docstring)."""
    count = count_tokens or default_token_counter()
    corpus: dict[str, dict] = {}
    chunks_of: dict[str, list[str]] = {}
    key_of: dict[str, str] = {}
    for ai, art in enumerate(articles):
        body = art.get("body") or ""
        aid = f"mh{ai:04d}"
        for key in (art.get("url"), art.get("title")):
            if key:
                key_of.setdefault(_norm(key), aid)
        ids = []
        for ci, ch in enumerate(chunk_text(body, chunk_size, chunk_overlap, count)):
            cid = f"{aid}_c{ci:03d}"
            corpus[cid] = {"title": art.get("title") or "", "text": ch}
            ids.append(cid)
        chunks_of[aid] = ids
    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    qmeta: dict[str, dict] = {}
    subtopics: dict[str, dict[str, dict[str, int]]] = {}
    squashed = {c: _squash(v["text"]) for c, v in corpus.items()}
    skipped_null = unresolved = fallback = unmatched_facts = dropped = 0
    for qi, q in enumerate(questions):
        ev = q.get("evidence_list") or []
        if not ev:
            skipped_null += 1
            continue
        qid = f"mhq{qi:04d}"
        rels: dict[str, int] = {}
        subs: dict[str, dict[str, int]] = {}
        for ei, e in enumerate(ev):
            aid = key_of.get(_norm(e.get("url") or "")) or key_of.get(_norm(e.get("title") or ""))
            if aid is None:
                unresolved += 1
                continue
            fact = _squash(e.get("fact") or "")
            hits = [c for c in chunks_of[aid] if fact and fact in squashed[c]]
            if not hits:
                unmatched_facts += 1
                if fact_fallback and chunks_of[aid]:
                    fw = set(_WORD.findall(_norm(e.get("fact") or "")))
                    best = max(chunks_of[aid], key=lambda c: len(
                        fw & set(_WORD.findall(_norm(corpus[c]["text"])))))
                    hits = [best]
                    fallback += 1
            for c in hits:
                rels[c] = 1
            if hits:
                subs[f"e{ei}"] = dict.fromkeys(hits, 1)
        if not rels:
            dropped += 1
            continue
        queries[qid] = q.get("query") or ""
        qrels[qid] = rels
        subtopics[qid] = subs
        qmeta[qid] = {"question_type": q.get("question_type"), "answer": q.get("answer"),
                      "evidence_titles": [e.get("title") for e in ev],
                      "facts": [e.get("fact") or "" for e in ev], "num_evidence": len(ev)}
    meta = {"source": source, "split": "test", "n_articles": len(articles),
            "n_chunks": len(corpus), "chunk_size": chunk_size, "chunk_overlap": chunk_overlap,
            "paper_n_chunks": 7786, "skipped_null_queries": skipped_null,
            "unresolved_evidence": unresolved, "unmatched_facts": unmatched_facts,
            "evidence_fact_fallback": fallback, "dropped_no_matching_chunk": dropped,
            "subtopic_qrels": subtopics}
    return Dataset(name, corpus, queries, qrels, qmeta, meta)


def load_multihop_rag(path: str | os.PathLike | None = None, split: str = "test", *,
                      chunk_size: int = 256, chunk_overlap: int = 20,
                      count_tokens: Callable[[str], int] | None = None,
                      fact_fallback: bool = False, from_hub: bool = False) -> Dataset:
    """MultiHop-RAG from a folder with ``corpus.json`` + ``MultiHopRAG.json`` (or the hub).

    The benchmark has one split (all 2,556 queries); ``split`` is accepted for symmetry and
    must be ``test``.
    """
    if split != "test":
        raise QrlibError(f"MultiHop-RAG has a single evaluation split 'test', got {split!r}")
    if from_hub or path is None:
        if os.environ.get("HF_HUB_OFFLINE") == "1" or os.environ.get("HF_DATASETS_OFFLINE") == "1":
            raise QrlibError("MultiHop-RAG: no folder given and the hub is offline "
                             "(HF_HUB_OFFLINE=1); pass a folder with corpus.json and "
                             "MultiHopRAG.json")
        import datasets

        arts = list(datasets.load_dataset("yixuantt/MultiHopRAG", "corpus", split="train"))
        qs = list(datasets.load_dataset("yixuantt/MultiHopRAG", "MultiHopRAG", split="train"))
        return build_multihop_rag(arts, qs, chunk_size=chunk_size, chunk_overlap=chunk_overlap,
                                  count_tokens=count_tokens, fact_fallback=fact_fallback,
                                  source="hf:yixuantt/MultiHopRAG")
    folder = Path(path)
    cp, qp = folder / "corpus.json", folder / "MultiHopRAG.json"
    missing = [p.name for p in (cp, qp) if not p.exists()]
    if missing:
        raise QrlibError(f"MultiHop-RAG folder {folder} lacks {', '.join(missing)}; expected "
                         "the official corpus.json and MultiHopRAG.json")
    for p in (cp, qp):
        head = p.read_bytes()[:64]
        if head.startswith(b"version https://git-lfs"):
            raise QrlibError(f"{p} is a git-LFS pointer, not the data; fetch the real file")
    return build_multihop_rag(_read_json_records(cp), _read_json_records(qp),
                              chunk_size=chunk_size, chunk_overlap=chunk_overlap,
                              count_tokens=count_tokens, fact_fallback=fact_fallback,
                              source=str(folder))


# --------------------------------------------------------------------------- TopiOCQA
SEP = " [SEP] "


def topiocqa_query(context: Sequence[str], question: str, sep: str = SEP,
                   max_history: int | None = None) -> str:
    """History turns then the current question, joined by ``[SEP]`` (ACQO section 1).

    ``max_history`` keeps only the last ``max_history`` history strings (None = all).
    """
    hist = [c.strip() for c in context if c and c.strip()]
    if max_history is not None:
        hist = hist[-max_history:] if max_history > 0 else []
    return sep.join([*hist, question.strip()])


def _passage_id(pid: Any) -> str:
    s = str(pid)
    return s.split(":", 1)[1] if s.startswith("wiki:") else s


def build_topiocqa(turns: Sequence[dict], *, corpus: dict[str, dict] | None = None,
                   max_history: int | None = None, name: str = "topiocqa",
                   split: str = "test", source: str = "") -> Dataset:
    """Official TopiOCQA turn records -> :class:`Dataset` (see module docstring)."""
    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    qmeta: dict[str, dict] = {}
    pooled: dict[str, dict] = {}
    no_gold = 0
    for t in turns:
        if "Conversation_no" not in t or "Question" not in t:
            raise QrlibError("TopiOCQA record lacks Conversation_no/Question; expected the "
                             "official topiocqa_{train,dev}.json turn format")
        qid = f"{t['Conversation_no']}_{t['Turn_no']}"
        gold = t.get("Gold_passage") or {}
        pid = gold.get("id")
        if pid is None:
            no_gold += 1
            continue
        did = _passage_id(pid)
        pooled.setdefault(did, {"title": gold.get("title") or "", "text": gold.get("text") or ""})
        queries[qid] = topiocqa_query(t.get("Context") or [], t["Question"],
                                      max_history=max_history)
        qrels[qid] = {did: 1}
        qmeta[qid] = {"conversation": t["Conversation_no"], "turn": t["Turn_no"],
                      "question": t["Question"], "answer": t.get("Answer"),
                      "topic": t.get("Topic"), "topic_section": t.get("Topic_section"),
                      "is_nq": t.get("is_nq"), "history_turns": len(t.get("Context") or []) // 2}
    # a topic switch: the gold topic differs from the previous turn's
    prev: dict[Any, Any] = {}
    for qid in sorted(qmeta, key=lambda q: (str(qmeta[q]["conversation"]), int(qmeta[q]["turn"]))):
        m = qmeta[qid]
        m["topic_shift"] = bool(prev.get(m["conversation"]) not in (None, m["topic"]))
        prev[m["conversation"]] = m["topic"]
    pooled_corpus = corpus is None
    corpus = pooled if corpus is None else corpus
    meta = {"source": source, "split": split, "turns_without_gold": no_gold,
            "corpus": "pooled gold passages (much easier than full Wikipedia)" if pooled_corpus
            else "full_wiki_segments", "max_history": max_history}
    return Dataset(name, corpus, queries, qrels, qmeta, meta)


def read_wiki_segments(path: str | os.PathLike, limit: int | None = None) -> dict[str, dict]:
    """DPR-style ``full_wiki_segments.tsv`` (``id  text  title`` header) -> corpus dict."""
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    out: dict[str, dict] = {}
    with open(path, encoding="utf-8", newline="") as fh:
        reader = csv.reader(fh, delimiter="\t")
        header = next(reader)
        cols = {h: i for i, h in enumerate(header)}
        if not {"id", "text", "title"} <= set(cols):
            raise QrlibError(f"{path}: header must contain id, text, title; got {header}")
        for row in reader:
            out[_passage_id(row[cols["id"]])] = {"title": row[cols["title"]],
                                                 "text": row[cols["text"]]}
            if limit and len(out) >= limit:
                break
    return out


def load_topiocqa(path: str | os.PathLike | None = None, split: str = "test", *,
                  max_history: int | None = None, full_corpus: bool = True,
                  from_hub: bool = False) -> Dataset:
    """TopiOCQA from a folder with ``topiocqa_{train,dev}.json[l]`` (or the hub).

    ``split``: train, dev, or test (= dev). ``full_corpus`` reads
    ``full_wiki_segments.tsv`` when the folder has it.
    """
    official = {"train": "train", "dev": "dev", "test": "dev", "validation": "dev"}
    if split not in official:
        raise QrlibError(f"TopiOCQA split must be one of train, dev, test; got {split!r}")
    fsplit = official[split]
    if from_hub or path is None:
        if os.environ.get("HF_HUB_OFFLINE") == "1" or os.environ.get("HF_DATASETS_OFFLINE") == "1":
            raise QrlibError("TopiOCQA: no folder given and the hub is offline (HF_HUB_OFFLINE=1); "
                             "pass a folder with topiocqa_dev.json")
        import datasets

        hub_split = "validation" if fsplit == "dev" else "train"
        turns = list(datasets.load_dataset("McGill-NLP/TopiOCQA", split=hub_split))
        return build_topiocqa(turns, max_history=max_history, split=split,
                              source="hf:McGill-NLP/TopiOCQA")
    folder = Path(path)
    cands = [folder / f"topiocqa_{fsplit}.json", folder / f"topiocqa_{fsplit}.jsonl"]
    fp = next((p for p in cands if p.exists()), None)
    if fp is None:
        raise QrlibError(f"TopiOCQA folder {folder} lacks {cands[0].name} (or .jsonl); "
                         "expected the official release files")
    corpus = None
    seg = folder / "full_wiki_segments.tsv"
    if full_corpus and seg.exists():
        corpus = read_wiki_segments(seg)
    return build_topiocqa(_read_json_records(fp), corpus=corpus, max_history=max_history,
                          split=split, source=str(fp))
