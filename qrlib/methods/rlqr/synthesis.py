"""RL-QR index-aligned query synthesis (RL-QR Sec. 3.1, Alg. 1, Table 1).

An offline model reads one document of the target index and writes a scenario, a question
that needs that document, and the answer; a document without enough information yields
nothing. The synthesised set is the training data of annotation-free RL (Sec. 3.2): each
question's only relevant document is its source.

Pure parts: :func:`parse_synthesis` (model output -> fields, linear time, never raises on
junk) and :func:`usable` (the filter). I/O at the edges: :func:`save_synthesis` writes the
set in BEIR layout (``queries.jsonl``, ``qrels/train.tsv``) plus ``manifest.json`` into a
run folder; :func:`load_synthesis` reuses it when the manifest matches and says why not
otherwise.
"""
from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from qrlib.core.errors import QrlibError
from qrlib.core.io import atomic_write, save_json
from qrlib.generation.parsing import MAX_CHARS, find_json_object

KEYS = ("scenario", "question", "answer")
PREFILL = '{"scenario": "'


def parse_synthesis(text: str, prefill: str = "") -> dict[str, str] | None:
    """``{"scenario", "question", "answer"}`` from one completion (``prefill`` is glued in
    front first), or None when no JSON object with a string ``question`` is found. Text
    over ``MAX_CHARS`` is cut first; the JSON search tries at most 20 openings."""
    s = (prefill + (text or ""))[:MAX_CHARS]
    obj = find_json_object(s)
    if obj is None and prefill:  # a completion cut inside the object: close it and retry
        obj = find_json_object(s.rstrip().rstrip(",") + '"}')
    if not obj or not isinstance(obj.get("question"), str):
        return None
    return {k: " ".join(str(obj.get(k) or "").split()) for k in KEYS}


def usable(item: Mapping[str, str] | None, document: str, *, min_words: int = 4,
           max_words: int = 64) -> tuple[bool, str]:
    """Keep a synthesised question? ``(ok, reason)``. Rejected: nothing parsed, an empty
    question (the model's "not enough information" answer), fewer than ``min_words`` or
    more than ``max_words`` words, or a question copied verbatim from the document."""
    if item is None:
        return False, "no JSON with a question"
    q = item.get("question", "").strip()
    if not q:
        return False, "empty question (document judged uninformative)"
    n = len(q.split())
    if n < min_words:
        return False, f"question shorter than {min_words} words"
    if n > max_words:
        return False, f"question longer than {max_words} words"
    if q.lower().rstrip("?. ") in " ".join(document.split()).lower():
        return False, "question copied from the document"
    return True, "ok"


def _manifest_problem(folder: Path, manifest: Mapping[str, Any]) -> str | None:
    mf = folder / "manifest.json"
    if not mf.is_file():
        return f"{folder} has no manifest.json"
    old = json.loads(mf.read_text(encoding="utf-8"))
    record = ("stats", "seconds")  # what a run records, not what it was asked for
    diff = sorted(k for k in set(old) | set(manifest)
                  if k not in record and old.get(k) != manifest.get(k))
    return f"synthesis settings differ in {diff}" if diff else None


def load_synthesis(folder: str | os.PathLike, manifest: Mapping[str, Any]
                   ) -> tuple[list[dict[str, Any]] | None, str]:
    """The saved set (all attempts, usable or not) if ``folder`` holds one made with the
    same ``manifest``; else ``(None, why)``."""
    folder = Path(folder)
    why = _manifest_problem(folder, manifest)
    if why:
        return None, why
    rows = [json.loads(line) for line in (folder / "attempts.jsonl").read_text(
        encoding="utf-8").splitlines() if line.strip()]
    return rows, "reused"


def save_synthesis(folder: str | os.PathLike, attempts: Sequence[Mapping[str, Any]],
                   manifest: Mapping[str, Any]) -> dict[str, Path]:
    """Write every attempt (``attempts.jsonl``) and the usable ones in BEIR layout:
    ``queries.jsonl`` (``_id``, ``text``, ``metadata`` with scenario/answer/source) and
    ``qrels/train.tsv`` (query -> source document, relevance 1). Each file is written
    atomically; the manifest goes last, so a crash never leaves a set that looks reusable.
    """
    folder = Path(folder)
    keep = [a for a in attempts if a.get("usable")]
    ids = [a["qid"] for a in keep]
    if len(set(ids)) != len(ids):
        raise QrlibError("synthesised queries need unique qids")
    mf = folder / "manifest.json"
    if mf.exists():
        mf.unlink()
    atomic_write(folder / "attempts.jsonl",
                 "".join(json.dumps(dict(a), ensure_ascii=False) + "\n" for a in attempts))
    atomic_write(folder / "queries.jsonl", "".join(json.dumps(
        {"_id": a["qid"], "text": a["question"],
         "metadata": {"scenario": a["scenario"], "answer": a["answer"],
                      "source_doc": a["doc_id"]}}, ensure_ascii=False) + "\n" for a in keep))
    atomic_write(folder / "qrels" / "train.tsv", "query-id\tcorpus-id\tscore\n" + "".join(
        f"{a['qid']}\t{a['doc_id']}\t1\n" for a in keep))
    stats = {"attempts": len(attempts), "usable": len(keep)}
    save_json({**manifest, "stats": stats}, mf)
    return {"queries": folder / "queries.jsonl", "qrels": folder / "qrels" / "train.tsv",
            "manifest": mf}
