"""Datasets in one shape: BEIR folders, ir_datasets, pooled multi-hop corpora, Spider.

Every retrieval dataset becomes a :class:`Dataset` (corpus, queries, qrels, per-query
metadata). The BEIR layout (``corpus.jsonl[.gz]``, ``queries.jsonl``,
``qrels/<split>.tsv``; Thakur et al., NeurIPS 2021) is the lingua franca: the qrels file of
a split decides which queries belong to it.

Lookup order for a name (first hit wins; a miss raises one line naming every place):

1. ``name_or_path`` itself if it is a folder (a BEIR folder path works as a name);
2. ``data_dir/<name>`` (explicit argument);
3. ``$QRLIB_DATA/<name>``;
4. ``./data/<name>`` relative to the current directory, then to the repository root;
5. ``../shared/data/<name>`` relative to the repository root, then to the current directory;
6. ``ir_datasets`` (e.g. ``beir/scifact/test``) for the names it knows (needs network or
   an already populated ``~/.ir_datasets`` cache).

MultiHop-RAG and TopiOCQA have no offline copy; their loaders read the official files from
a given path (see :mod:`qrlib.data.loaders`).
"""
from __future__ import annotations

import gzip
import json
import os
import random
import sqlite3
import sys
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from qrlib.core.errors import QrlibError
from qrlib.core.io import REPO_ROOT, atomic_path, atomic_write
from qrlib.data import loaders
from qrlib.data.collection import Dataset, doc_text
from qrlib.data.rows import rows_from_dataset
from qrlib.data.sql import query_rows


#: Offline folders shipped beside the checkout (``/work/shared/data``).
KNOWN_DATASETS = ("scifact", "nfcorpus", "hotpotqa-mini", "hotpotqa-large",
                  "2wikimultihopqa-mini")
#: Names that only ``ir_datasets`` (online) provides, mapped per split.
IR_DATASETS_IDS: dict[str, dict[str, str]] = {
    "scifact": {"test": "beir/scifact/test", "train": "beir/scifact/train"},
    "nfcorpus": {"test": "beir/nfcorpus/test", "dev": "beir/nfcorpus/dev",
                 "train": "beir/nfcorpus/train"},
    "hotpotqa": {"test": "beir/hotpotqa/test", "dev": "beir/hotpotqa/dev",
                 "train": "beir/hotpotqa/train"},
    "fiqa": {"test": "beir/fiqa/test", "dev": "beir/fiqa/dev", "train": "beir/fiqa/train"},
    "trec-covid": {"test": "beir/trec-covid"},
    "nq": {"test": "beir/nq"},
    "msmarco": {"dev": "beir/msmarco/dev", "train": "beir/msmarco/train"},
    "scidocs": {"test": "beir/scidocs"},
    "arguana": {"test": "beir/arguana"},
    "quora": {"test": "beir/quora/test", "dev": "beir/quora/dev"},
    "dbpedia-entity": {"test": "beir/dbpedia-entity/test", "dev": "beir/dbpedia-entity/dev"},
    "fever": {"test": "beir/fever/test", "dev": "beir/fever/dev", "train": "beir/fever/train"},
    "climate-fever": {"test": "beir/climate-fever"},
    "webis-touche2020": {"test": "beir/webis-touche2020/v2"},
}


# --------------------------------------------------------------------------- Dataset
# Dataset and doc_text live in qrlib.data.collection (shared with qrlib.data.loaders);
# re-exported here.


# --------------------------------------------------------------------------- readers
#: What to do with an id seen twice in one file: "error" (default) or "first" (keep the
#: first copy, count the others in ``meta``).
DUPLICATE_POLICIES = ("error", "first")


def _check_policy(on_duplicate: str) -> None:
    if on_duplicate not in DUPLICATE_POLICIES:
        raise QrlibError(f"on_duplicate must be one of {', '.join(DUPLICATE_POLICIES)}, got "
                         f"{on_duplicate!r}")


def _iter_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of every line of a UTF-8 text file, gzip-compressed if it ends
    in ``.gz``. Undecodable bytes, a fake or truncated gzip stream: one-line
    :class:`QrlibError` naming the file and line."""
    lineno = 0
    try:
        with (gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb")) as fh:
            for lineno, raw in enumerate(fh, 1):
                try:
                    yield lineno, raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    hint = ("; it is gzip-compressed: name it " + path.name + ".gz"
                            if lineno == 1 and raw[:2] == b"\x1f\x8b" else
                            "; re-save it as UTF-8")
                    raise QrlibError(f"{path}:{lineno}: not UTF-8 text (byte "
                                     f"0x{raw[exc.start]:02x} at column {exc.start + 1})"
                                     f"{hint}") from None
    except gzip.BadGzipFile as exc:
        raise QrlibError(f"{path}: not a gzip file ({exc}); re-download it, or drop the .gz "
                         "suffix if it is plain text") from None
    except EOFError:
        raise QrlibError(f"{path}: the gzip stream ends early, after line {lineno} (a "
                         "truncated download?); re-download or re-create the file") from None
    except zlib.error as exc:
        raise QrlibError(f"{path}: corrupt gzip data after line {lineno} ({exc}); "
                         "re-download or re-create the file") from None
    except OSError as exc:
        raise QrlibError(f"{path}: cannot read ({exc.strerror or exc})") from None


def _iter_jsonl(path: Path) -> Iterator[tuple[int, dict]]:
    """(line number, record) of a JSON-lines file; each line must be one JSON object."""
    for lineno, line in _iter_lines(path):
        line = line.strip()
        if not line:
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise QrlibError(f"{path}:{lineno} is not valid JSON ({exc.msg})") from None
        except RecursionError:
            raise QrlibError(f"{path}:{lineno} is not valid JSON (nested too deeply)") from None
        if not isinstance(rec, dict):
            raise QrlibError(f"{path}:{lineno}: expected one JSON object per line, got a JSON "
                             f"{type(rec).__name__}")
        yield lineno, rec


def _record_id(path: Path, lineno: int, rec: dict) -> str:
    if "_id" not in rec:
        raise QrlibError(f"{path}:{lineno}: record has no '_id' field; BEIR lines look like "
                         '{"_id": "...", "text": "..."}')
    rid = rec["_id"]
    if isinstance(rid, bool) or not isinstance(rid, (str, int)) or str(rid) == "":
        raise QrlibError(f"{path}:{lineno}: '_id' must be a non-empty string or integer, got "
                         f"{rid!r}")
    return str(rid)


def _text_field(path: Path, lineno: int, rec: dict, key: str) -> str:
    val = rec.get(key)
    if val is None:
        return ""
    if not isinstance(val, str):
        raise QrlibError(f"{path}:{lineno}: field {key!r} must be a string, got "
                         f"{type(val).__name__}")
    return val


def _first_existing(folder: Path, names: Sequence[str]) -> Path | None:
    for n in names:
        if (folder / n).exists():
            return folder / n
    return None


def read_corpus(path: str | os.PathLike, *, on_duplicate: str = "error",
                stats: dict | None = None) -> dict[str, dict]:
    """BEIR ``corpus.jsonl[.gz]`` -> ``{doc_id: {"title", "text"}}``.

    A document id given twice is an error naming both lines' file and the second line;
    ``on_duplicate="first"`` keeps the first copy and counts the others in
    ``stats["duplicate_doc_ids_dropped"]`` (the old silent last-copy-wins changed scores).
    """
    _check_policy(on_duplicate)
    path = Path(path)
    corpus: dict[str, dict] = {}
    dropped = 0
    for lineno, rec in _iter_jsonl(path):
        did = _record_id(path, lineno, rec)
        doc = {"title": _text_field(path, lineno, rec, "title"),
               "text": _text_field(path, lineno, rec, "text")}
        if did in corpus:
            if on_duplicate == "error":
                raise QrlibError(f"{path}:{lineno}: document id {did!r} appears a second time; "
                                 "fix the file, or load with on_duplicate='first' to keep the "
                                 "first copy")
            dropped += 1
            continue
        corpus[did] = doc
    if stats is not None:
        stats["duplicate_doc_ids_dropped"] = dropped
    return corpus


def read_queries(path: str | os.PathLike, *, on_duplicate: str = "error",
                 stats: dict | None = None) -> tuple[dict[str, str], dict[str, dict]]:
    """BEIR ``queries.jsonl`` -> (``{qid: text}``, ``{qid: metadata}``).

    Duplicated query ids follow ``on_duplicate`` as in :func:`read_corpus`.
    """
    _check_policy(on_duplicate)
    path = Path(path)
    texts: dict[str, str] = {}
    meta: dict[str, dict] = {}
    dropped = 0
    for lineno, rec in _iter_jsonl(path):
        qid = _record_id(path, lineno, rec)
        if qid in texts:
            if on_duplicate == "error":
                raise QrlibError(f"{path}:{lineno}: query id {qid!r} appears a second time; "
                                 "fix the file, or load with on_duplicate='first' to keep the "
                                 "first copy")
            dropped += 1
            continue
        texts[qid] = _text_field(path, lineno, rec, "text")
        md = rec.get("metadata")
        meta[qid] = md if isinstance(md, dict) else {}
    if stats is not None:
        stats["duplicate_query_ids_dropped"] = dropped
    return texts, meta


def _grade(path: Path, lineno: int, rel: str) -> int:
    try:
        return int(rel)
    except ValueError:
        pass
    try:
        val = float(rel)
    except ValueError:
        val = float("nan")
    if val != val or val in (float("inf"), float("-inf")) or not val.is_integer():
        raise QrlibError(f"{path}:{lineno}: relevance grade {rel!r} is not an integer; qrels "
                         "grades are integers (0 = judged not relevant)")
    return int(val)


def read_qrels(path: str | os.PathLike) -> dict[str, dict[str, int]]:
    """BEIR ``qrels/<split>.tsv`` (header ``query-id corpus-id score``) -> nested dict.

    Also accepts TREC qrels (``qid 0 docid rel``, whitespace separated, no header). A row
    with another number of fields or a non-integer grade is an error naming file and line.
    """
    path = Path(path)
    qrels: dict[str, dict[str, int]] = {}
    tabs = None
    for lineno, line in _iter_lines(path):
        line = line.rstrip("\r\n")
        if tabs is None:
            if not line.strip():
                continue
            tabs = "\t" in line
        row = line.split("\t") if tabs else line.split()
        if not row or not row[0].strip():
            continue
        if row[0] == "query-id" and not qrels:
            continue  # header
        if len(row) == 3:
            qid, did, rel = row
        elif len(row) == 4:  # TREC: qid iter docid rel
            qid, _, did, rel = row
        else:
            raise QrlibError(f"{path}:{lineno}: qrels row {row!r} has {len(row)} fields; "
                             "expected 3 (BEIR tsv) or 4 (TREC)")
        qrels.setdefault(qid, {})[did] = _grade(path, lineno, rel.strip())
    return qrels


# --------------------------------------------------------------------------- lookup
def _is_beir_folder(p: Path) -> bool:
    return p.is_dir() and _first_existing(p, ("corpus.jsonl.gz", "corpus.jsonl")) is not None


def candidate_dirs(name: str, data_dir: str | os.PathLike | None = None) -> list[Path]:
    """Every folder searched for dataset ``name``, in lookup order (see module docstring)."""
    cwd = Path.cwd()
    out: list[Path] = []
    if data_dir is not None:
        out.append(Path(data_dir) / name)
    if os.environ.get("QRLIB_DATA"):
        out.append(Path(os.environ["QRLIB_DATA"]) / name)
    out += [cwd / "data" / name, REPO_ROOT / "data" / name,
            REPO_ROOT.parent / "shared" / "data" / name, cwd.parent / "shared" / "data" / name]
    seen: set[Path] = set()
    uniq = []
    for p in out:
        rp = p.resolve() if p.exists() else p.absolute()
        if rp not in seen:
            seen.add(rp)
            uniq.append(p)
    return uniq


def data_root(data_dir: str | os.PathLike | None = None) -> Path:
    """The first existing data root (folder holding dataset folders) in lookup order."""
    for p in candidate_dirs("x", data_dir):
        if p.parent.is_dir():
            return p.parent
    raise QrlibError("no data folder found; set QRLIB_DATA or pass data_dir=")


def ir_datasets_id(name: str, split: str) -> str | None:
    """The ``ir_datasets`` id for a BEIR name and split (``scifact``/test -> beir/scifact/test).

    Names with a ``-mini``/``-large`` suffix are local subsamples with no ir_datasets twin.
    An id given directly (``beir/...``) is returned unchanged.
    """
    if "/" in name:
        return name
    return IR_DATASETS_IDS.get(name.lower(), {}).get(split)


def _is_ir_datasets_id(raw: str) -> bool:
    if raw.startswith("beir/"):
        return True
    try:
        import ir_datasets

        return raw in ir_datasets.registry
    except Exception:  # noqa: BLE001
        return False


def load_ir_datasets(ds_id: str, name: str | None = None, *,
                     on_duplicate: str = "error") -> Dataset:
    """Load a collection through ``ir_datasets`` (downloads on first use; needs network)."""
    import ir_datasets

    _check_policy(on_duplicate)
    ds = ir_datasets.load(ds_id)
    corpus: dict[str, dict] = {}
    dup = 0
    for d in ds.docs_iter():
        if d.doc_id in corpus:
            if on_duplicate == "error":
                raise QrlibError(f"ir_datasets:{ds_id}: document id {d.doc_id!r} appears twice; "
                                 "load with on_duplicate='first' to keep the first copy")
            dup += 1
            continue
        corpus[d.doc_id] = {"title": getattr(d, "title", "") or "", "text": d.text}
    qrels: dict[str, dict[str, int]] = {}
    for q in ds.qrels_iter():
        qrels.setdefault(q.query_id, {})[q.doc_id] = int(q.relevance)
    queries: dict[str, str] = {}
    qmeta: dict[str, dict] = {}
    for q in ds.queries_iter():
        if q.query_id in qrels:
            queries[q.query_id] = q.text
            qmeta[q.query_id] = {k: v for k, v in q._asdict().items()
                                 if k not in ("query_id", "text")}
    meta = {"source": f"ir_datasets:{ds_id}", "split": ds_id.rsplit("/", 1)[-1],
            "duplicate_doc_ids_dropped": dup}
    meta.update(_load_counts(corpus, queries, qrels))
    return _reported(Dataset(name or ds_id, corpus, queries, qrels, qmeta, meta))


def _load_counts(corpus: dict, queries: dict, qrels: dict) -> dict[str, int]:
    """Counts of questionable entries a loader reports (see :meth:`Dataset.notes`)."""
    return {"empty_queries": sum(1 for t in queries.values() if not t.strip()),
            "qrels_docs_missing_from_corpus": sum(1 for q in queries for d in qrels.get(q, {})
                                                  if d not in corpus)}


def _reported(ds: Dataset) -> Dataset:
    """Print the dataset's load notes (if any) on stderr: never silent, one line."""
    notes = ds.notes()
    if notes:
        print(f"[qrlib] note: {ds.name} ({ds.meta.get('split')}): {'; '.join(notes)}",
              file=sys.stderr, flush=True)
    return ds


# --------------------------------------------------------------------------- loading
def load_beir_folder(folder: str | os.PathLike, split: str = "test", *,
                     name: str | None = None, on_duplicate: str = "error") -> Dataset:
    """Load a BEIR folder. Queries without qrels in ``split`` are dropped (counted in meta).

    Malformed files raise one line naming file and line; duplicated ids follow
    ``on_duplicate`` (see :func:`read_corpus`). Empty queries and qrels pointing at
    documents missing from the corpus are kept, counted in ``meta`` and printed as a note.
    """
    folder = Path(folder)
    name = name or folder.name
    corpus_path = _first_existing(folder, ("corpus.jsonl.gz", "corpus.jsonl"))
    queries_path = _first_existing(folder, ("queries.jsonl.gz", "queries.jsonl"))
    if corpus_path is None or queries_path is None:
        raise QrlibError(f"{folder} is not a BEIR folder: need corpus.jsonl[.gz] and "
                         "queries.jsonl")
    splits = sorted(p.name.split(".")[0] for p in (folder / "qrels").glob("*.tsv"))
    qrels_path = folder / "qrels" / f"{split}.tsv"
    if not qrels_path.exists():
        raise QrlibError(f"dataset {name!r} has no split {split!r} ({qrels_path} missing); "
                         f"available splits: {', '.join(splits) or 'none'}")
    counts: dict[str, int] = {}
    corpus = read_corpus(corpus_path, on_duplicate=on_duplicate, stats=counts)
    all_q, all_meta = read_queries(queries_path, on_duplicate=on_duplicate, stats=counts)
    qrels_all = read_qrels(qrels_path)
    missing_q = sorted(q for q in qrels_all if q not in all_q)
    qrels = {q: r for q, r in qrels_all.items() if q in all_q}
    queries = {q: all_q[q] for q in all_q if q in qrels}
    qmeta = {q: all_meta[q] for q in queries}
    meta: dict[str, Any] = {
        "source": str(folder), "split": split, "available_splits": splits,
        "queries_in_file": len(all_q), "qrels_queries_without_text": len(missing_q),
        **_load_counts(corpus, queries, qrels), **counts,
    }
    # Multi-hop sets also record the split in metadata; the qrels file decides, we check.
    tagged = [q for q in queries if isinstance(qmeta[q], dict) and "split" in qmeta[q]]
    if tagged:
        meta["metadata_split_mismatch"] = sum(1 for q in tagged if qmeta[q]["split"] != split)
    prov = folder / "PROVENANCE.md"
    if prov.exists():
        meta["provenance"] = str(prov)
    return _reported(Dataset(name, corpus, queries, qrels, qmeta, meta))


def load_dataset(name_or_path: str | os.PathLike, split: str = "test", *,
                 data_dir: str | os.PathLike | None = None,
                 extra_corpora: Sequence[str | os.PathLike] | None = None,
                 use_ir_datasets: bool = True, on_duplicate: str = "error",
                 **loader_kwargs: Any) -> Dataset:
    """Load a dataset by name or folder path (lookup order in the module docstring).

    ``extra_corpora`` pools other paragraph collections into the corpus as additional
    distractors (e.g. hotpotqa-mini + 2wikimultihopqa-mini): their queries are not added.
    ``multihop-rag`` and ``topiocqa`` are read from a folder holding their official files
    (``data_dir/<name>``, ``$QRLIB_DATA/<name>`` ...); ``loader_kwargs`` go to their loader.
    ``on_duplicate``: ``"error"`` (default) when a document or query id appears twice in a
    file, or ``"first"`` to keep the first copy (the count is reported in ``meta``).
    """
    _check_policy(on_duplicate)
    if name_or_path is None or str(name_or_path).strip() == "":
        raise QrlibError("dataset name is empty; give a name such as "
                         f"{', '.join(KNOWN_DATASETS)} or a BEIR folder path")
    raw = str(name_or_path)
    path = Path(raw).expanduser()
    looks_like_path = isinstance(name_or_path, os.PathLike) or os.path.sep in raw \
        or raw.startswith((".", "~"))
    # a bare name that happens to match an unrelated folder in cwd is still a name
    as_path = path.is_dir() and (looks_like_path or _is_beir_folder(path)
                                 or (path / "MultiHopRAG.json").exists())
    name = path.name if as_path else raw
    key = name.lower()
    ds: Dataset | None = None
    searched: list[str] = []
    if key in ("multihop-rag", "multihoprag", "topiocqa") and not as_path:
        for cand in candidate_dirs(name, data_dir):
            searched.append(str(cand))
            if cand.is_dir():
                fn = loaders.load_multihop_rag if key.startswith("multihop") else loaders.load_topiocqa
                ds = fn(cand, split=split, **loader_kwargs)
                break
        if ds is None:
            raise QrlibError(f"dataset {name!r} has no offline copy; searched {'; '.join(searched)}"
                             f"; put its official files in one of these folders")
    elif as_path:
        if key in ("multihop-rag", "multihoprag") or (path / "MultiHopRAG.json").exists():
            ds = loaders.load_multihop_rag(path, split=split, **loader_kwargs)
        elif _is_beir_folder(path):
            ds = load_beir_folder(path, split, name=path.name, on_duplicate=on_duplicate)
        else:
            raise QrlibError(f"{path} is a folder but not a BEIR folder (corpus.jsonl[.gz], "
                             "queries.jsonl, qrels/<split>.tsv)")
    else:
        if (os.path.sep in raw or raw.startswith(("~", "."))) and not _is_ir_datasets_id(raw):
            raise QrlibError(f"dataset path {raw} does not exist; give an existing BEIR folder, "
                             f"an ir_datasets id or a name ({', '.join(KNOWN_DATASETS)})")
        for cand in candidate_dirs(name, data_dir):
            searched.append(str(cand))
            if _is_beir_folder(cand):
                ds = load_beir_folder(cand, split, name=name, on_duplicate=on_duplicate)
                break
        if ds is None:
            ird = ir_datasets_id(name, split) if use_ir_datasets else None
            if ird is None:
                searched.append(f"ir_datasets (no id for {name!r}/{split!r})")
            else:
                try:
                    ds = load_ir_datasets(ird, name, on_duplicate=on_duplicate)
                except Exception as exc:  # noqa: BLE001 - network, missing id, ...
                    reason = " ".join(str(exc).split())[:120] or type(exc).__name__
                    searched.append(f"ir_datasets:{ird} ({type(exc).__name__}: {reason})")
        if ds is None:
            raise QrlibError(f"dataset {name!r} (split {split!r}) not found; searched: "
                             f"{'; '.join(searched)}; known offline names: "
                             f"{', '.join(KNOWN_DATASETS)}; set QRLIB_DATA or data_dir")
    if extra_corpora:
        ds = add_distractor_corpora(ds, extra_corpora, data_dir=data_dir,
                                    on_duplicate=on_duplicate)
    return ds


def add_distractor_corpora(ds: Dataset, extra: Sequence[str | os.PathLike | Dataset], *,
                           data_dir: str | os.PathLike | None = None,
                           on_duplicate: str = "error") -> Dataset:
    """Pool further paragraph collections into ``ds.corpus`` as distractors.

    Ids are namespaced by construction (``hp_``/``2w_`` + sha1(title)); an id seen in both
    corpora must have the same text (hotpotqa-mini is a subset of hotpotqa-large), otherwise
    this raises. Queries and qrels of ``ds`` are unchanged.
    """
    corpus = dict(ds.corpus)
    added: dict[str, int] = {}
    shared: dict[str, int] = {}
    for item in extra:
        other = item if isinstance(item, Dataset) else load_dataset(
            item, "test", data_dir=data_dir, use_ir_datasets=False, on_duplicate=on_duplicate)
        n_new = n_same = 0
        for did, doc in other.corpus.items():
            if did in corpus:
                if doc_text(corpus[did]) != doc_text(doc):
                    raise QrlibError(f"doc id {did} occurs in {ds.name} and {other.name} with "
                                     "different text; cannot pool these corpora")
                n_same += 1
            else:
                corpus[did] = doc
                n_new += 1
        added[other.name] = n_new
        shared[other.name] = n_same
    meta = dict(ds.meta)
    meta["extra_corpora"] = added
    meta["extra_corpora_shared_ids"] = shared
    meta["docs_own"] = len(ds.corpus)
    names = "+".join([ds.name, *added])
    return replace(ds, name=names, corpus=corpus, meta=meta)


# --------------------------------------------------------------------------- subsets
def subset(ds: Dataset, n_queries: int | None = None, n_distractors: int | None = None,
           seed: int = 0, *, qids: Sequence[str] | None = None) -> Dataset:
    """A smaller collection for small profiles.

    Keeps ``n_queries`` queries chosen at random (seeded; or exactly ``qids``), every doc
    judged for them (any relevance, including 0), and ``n_distractors`` other docs drawn at
    random from the rest of the corpus (``None`` keeps the whole corpus). Deterministic for
    a given seed, whatever the dict order of the input.
    """
    rng = random.Random(seed)
    all_q = sorted(ds.queries)
    if qids is not None:
        unknown = [q for q in qids if q not in ds.queries]
        if unknown:
            raise QrlibError(f"subset: {len(unknown)} query ids not in {ds.name} "
                             f"(first: {unknown[0]!r})")
        chosen = list(qids)
    elif n_queries is None or n_queries >= len(all_q):
        chosen = all_q
    else:
        if n_queries <= 0:
            raise QrlibError(f"subset: n_queries must be a positive int or None, got {n_queries}")
        chosen = sorted(rng.sample(all_q, n_queries))
    judged = {d for q in chosen for d in ds.qrels.get(q, {}) if d in ds.corpus}
    if n_distractors is None:
        keep = set(ds.corpus)
    else:
        if n_distractors < 0:
            raise QrlibError(f"subset: n_distractors must be >= 0 or None, got {n_distractors}")
        rest = sorted(d for d in ds.corpus if d not in judged)
        keep = judged | set(rng.sample(rest, min(n_distractors, len(rest))))
    corpus = {d: v for d, v in ds.corpus.items() if d in keep}
    meta = dict(ds.meta)
    meta.update({"subset_of": ds.name, "subset_seed": seed, "subset_n_queries": len(chosen),
                 "subset_n_judged_docs": len(judged),
                 "subset_n_distractors": len(corpus) - len(judged)})
    return Dataset(ds.name, corpus, {q: ds.queries[q] for q in chosen},
                   {q: dict(ds.qrels[q]) for q in chosen},
                   {q: ds.query_meta.get(q, {}) for q in chosen}, meta)


def filter_queries(ds: Dataset, predicate) -> Dataset:
    """Keep the queries whose ``predicate(qid, text, meta)`` is true (corpus unchanged)."""
    keep = [q for q in ds.queries if predicate(q, ds.queries[q], ds.query_meta.get(q, {}))]
    return replace(ds, queries={q: ds.queries[q] for q in keep},
                   qrels={q: ds.qrels[q] for q in keep},
                   query_meta={q: ds.query_meta.get(q, {}) for q in keep})


def save_beir(ds: Dataset, folder: str | os.PathLike) -> Path:
    """Write ``ds`` as a BEIR folder (corpus.jsonl.gz, queries.jsonl, qrels/<split>.tsv)."""
    folder = Path(folder)
    split = ds.meta.get("split", "test")
    with atomic_path(folder / "corpus.jsonl.gz") as tmp:
        with gzip.open(tmp, "wt", encoding="utf-8") as fh:
            for did, doc in ds.corpus.items():
                fh.write(json.dumps({"_id": did, "title": doc.get("title", ""),
                                     "text": doc.get("text", "")}, ensure_ascii=False) + "\n")
    atomic_write(folder / "queries.jsonl", "".join(
        json.dumps({"_id": q, "text": t, "metadata": ds.query_meta.get(q, {})},
                   ensure_ascii=False) + "\n" for q, t in ds.queries.items()))
    lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t{r}" for q, rs in ds.qrels.items()
                                              for d, r in rs.items()]
    atomic_write(folder / "qrels" / f"{split}.tsv", "\n".join(lines) + "\n")
    return folder


# --------------------------------------------------------------------------- Spider
@dataclass
class SpiderData:
    """Spider dev (Yu et al., EMNLP 2018) for text-to-SQL rewards.

    ``examples``: one dict per usable question (``question``, ``query`` = gold SQL,
    ``db_id``, ``db_path``, ``question_id`` = index in dev.json); ``schemas``: db_id ->
    {"tables": [{"name", "columns": [(name, type)], "primary_keys"}], "foreign_keys": [...]};
    ``skipped``: db_id -> number of questions dropped because the SQLite file is missing.
    """

    examples: list[dict]
    schemas: dict[str, dict]
    db_paths: dict[str, Path]
    skipped: dict[str, int]
    meta: dict = field(default_factory=dict)

    def schema_text(self, db_id: str) -> str:
        """Schema as ``CREATE TABLE`` statements read from the SQLite file (tables.json if absent)."""
        path = self.db_paths.get(db_id)
        if path is not None and path.exists():
            con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                rows = con.execute("SELECT sql FROM sqlite_master WHERE type='table' AND sql "
                                   "IS NOT NULL AND name != 'sqlite_sequence'").fetchall()
            finally:
                con.close()
            return "\n".join(r[0].strip() + ";" for r in rows)
        sch = self.schemas[db_id]
        parts = []
        for t in sch["tables"]:
            cols = ", ".join(f"{c} {ty}" for c, ty in t["columns"])
            parts.append(f"CREATE TABLE {t['name']} ({cols});")
        return "\n".join(parts)

    def execute(self, db_id: str, sql: str, timeout: float = 5.0) -> list[tuple]:
        """Run ``sql`` on ``db_id`` in :mod:`qrlib.data.sql`'s sandbox; QrlibError on bad SQL."""
        return query_rows(self.db_paths[db_id], sql, timeout_s=timeout)


def _spider_schemas(tables: list[dict]) -> dict[str, dict]:
    out = {}
    for db in tables:
        tnames = db["table_names_original"]
        cols: list[list[tuple[str, str]]] = [[] for _ in tnames]
        col_ref = []
        for (ti, cname), ctype in zip(db["column_names_original"], db["column_types"]):
            col_ref.append((ti, cname))
            if ti >= 0:
                cols[ti].append((cname, ctype))
        pks: list[list[str]] = [[] for _ in tnames]
        for pk in db.get("primary_keys", []):
            for ci in (pk if isinstance(pk, list) else [pk]):
                ti, cname = col_ref[ci]
                pks[ti].append(cname)
        fks = []
        for a, b in db.get("foreign_keys", []):
            (ta, ca), (tb, cb) = col_ref[a], col_ref[b]
            fks.append({"from": f"{tnames[ta]}.{ca}", "to": f"{tnames[tb]}.{cb}"})
        out[db["db_id"]] = {"tables": [{"name": n, "columns": c, "primary_keys": p}
                                       for n, c, p in zip(tnames, cols, pks)],
                            "foreign_keys": fks}
    return out


def load_spider(data_dir: str | os.PathLike | None = None, *, split: str = "dev",
                keep_missing: bool = False) -> SpiderData:
    """Load Spider dev: questions, gold SQL, schemas (tables.json), SQLite paths.

    Questions whose database file is missing (wta_1 in the offline copy: 62 questions) are
    skipped and counted in ``skipped`` (kept, with ``db_path=None``, if ``keep_missing``).
    ``data_dir`` may be the spider folder itself or a data root holding ``spider-dev``.
    """
    searched = []
    folder = None
    if data_dir is not None and (Path(data_dir) / f"{split}.json").exists():
        folder = Path(data_dir)
    else:
        for name in (f"spider-{split}", "spider"):
            for cand in candidate_dirs(name, data_dir):
                searched.append(str(cand))
                if (cand / f"{split}.json").exists():
                    folder = cand
                    break
            if folder:
                break
    if folder is None:
        raise QrlibError(f"Spider {split}.json not found; searched: {'; '.join(searched)}")
    examples_raw = json.loads((folder / f"{split}.json").read_text(encoding="utf-8"))
    tables = json.loads((folder / "tables.json").read_text(encoding="utf-8"))
    schemas = _spider_schemas(tables)
    db_ids = sorted({e["db_id"] for e in examples_raw})
    db_paths = {d: folder / "database" / d / f"{d}.sqlite" for d in db_ids}
    present = {d for d, p in db_paths.items() if p.exists()}
    examples, skipped = [], {}
    for i, e in enumerate(examples_raw):
        d = e["db_id"]
        if d not in present:
            skipped[d] = skipped.get(d, 0) + 1
            if not keep_missing:
                continue
        examples.append({"question_id": i, "question": e["question"], "query": e["query"],
                         "db_id": d, "db_path": db_paths[d] if d in present else None})
    meta = {"source": str(folder), "split": split, "n_questions": len(examples_raw),
            "n_usable": sum(1 for e in examples if e["db_path"] is not None),
            "n_databases": len(db_ids), "n_databases_present": len(present),
            "missing_databases": sorted(set(db_ids) - present)}
    return SpiderData(examples, {d: schemas[d] for d in db_ids if d in schemas},
                      {d: p for d, p in db_paths.items() if d in present}, skipped, meta)


def pooled_subsets(names: Sequence[str], split: str, *, n_queries: int | None,
                   n_distractors: int | None, seed: int = 0,
                   data_dir: str | os.PathLike | None = None
                   ) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any], dict[str, tuple[int, int]]]:
    """The :func:`subset` of each dataset's ``split``, pooled: rows
    (:func:`qrlib.data.rows.rows_from_dataset`), one corpus, one qrels, and per dataset
    (questions, documents). The same call with the same seed rebuilds the same pool, which
    is how a notebook retrains on another notebook's questions (ACQO 06 and 12)."""
    rows: list[dict[str, Any]] = []
    corpus: dict[str, Any] = {}
    qrels: dict[str, Any] = {}
    sizes: dict[str, tuple[int, int]] = {}
    for name in names:
        ds = subset(load_dataset(name, split, data_dir=data_dir), n_queries=n_queries,
                    n_distractors=n_distractors, seed=seed)
        rows += rows_from_dataset(ds)
        corpus.update(ds.corpus)
        qrels.update(ds.qrels)
        sizes[name] = (len(ds.queries), len(ds.corpus))
    return rows, corpus, qrels, sizes
