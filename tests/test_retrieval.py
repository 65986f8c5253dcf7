"""qrlib.retrieval.retrievers: hand-computed BM25 scores, engine agreement, bad input, dense retrieval."""
from __future__ import annotations

import math

import numpy as np
import pytest

from qrlib.data.datasets import load_dataset, subset
from qrlib.core.errors import QrlibError
from qrlib.eval.metrics import evaluate
from qrlib.retrieval.retrievers import (BM25Retriever, DenseRetriever, Retriever, Tokenizer,
                             build_retriever, run_queries)

# d1 "apple banana apple" (3 tokens), d2 "banana cherry" (2), d3 "Cherry date elderberry
# fig grape" (5), d4 "kiwi lemon mango" (3): N = 4, avgdl = 13/4
CORPUS = {"d1": {"title": "", "text": "apple banana apple"},
          "d2": {"title": "", "text": "banana cherry"},
          "d3": {"title": "Cherry", "text": "date elderberry fig grape"},
          "d4": {"title": "", "text": "kiwi lemon mango"}}
K1, B, AVGDL, N = 1.2, 0.75, 13 / 4, 4


def _tf_part(tf, dl, with_k1_plus_1):
    norm = K1 * (1 - B + B * dl / AVGDL)
    return tf * ((K1 + 1) if with_k1_plus_1 else 1) / (tf + norm)


def test_bm25s_lucene_scores_by_hand():
    r = BM25Retriever(CORPUS, stemmer=None, stopwords=None)
    (res,) = r.search(["apple"], k=10)
    idf = math.log(1 + (N - 1 + 0.5) / (1 + 0.5))
    assert [d for d, _ in res] == ["d1"]  # zero-score docs are not returned
    assert res[0][1] == pytest.approx(idf * _tf_part(2, 3, False), rel=1e-5)
    (res,) = r.search(["cherry banana"], k=10)
    idf2 = math.log(2)  # df = 2 for both terms
    want = {"d2": 2 * idf2 * _tf_part(1, 2, False), "d1": idf2 * _tf_part(1, 3, False),
            "d3": idf2 * _tf_part(1, 5, False)}
    assert [d for d, _ in res] == ["d2", "d1", "d3"]
    for d, s in res:
        assert s == pytest.approx(want[d], rel=1e-5)


def test_rank_bm25_okapi_scores_by_hand():
    r = BM25Retriever(CORPUS, engine="rank_bm25", stemmer=None, stopwords=None)
    (res,) = r.search(["apple"], k=10)
    idf = math.log((N - 1 + 0.5) / (1 + 0.5))
    assert res == [("d1", pytest.approx(idf * _tf_part(2, 3, True), rel=1e-9))]


def test_k_larger_than_corpus_and_batching():
    r = build_retriever("bm25", CORPUS, stemmer=None, stopwords=None, model="ignored")
    out = r.search(["cherry banana", "mango", "apple"], k=50)
    assert [len(x) for x in out] == [3, 1, 1]
    assert isinstance(r, Retriever)


def test_empty_inputs():
    for engine in ("bm25s", "rank_bm25"):
        r = BM25Retriever(CORPUS, engine=engine)
        with pytest.raises(QrlibError, match="empty query list"):
            r.search([], k=10)
        with pytest.raises(QrlibError, match="single string"):
            r.search("apple", k=10)
        with pytest.raises(QrlibError, match="positive"):
            r.search(["apple"], k=0)
        # empty, whitespace, stopword-only and out-of-vocabulary queries: empty lists
        assert r.search(["", "   ", "the of and", "zyzzyva"], k=5) == [[], [], [], []]


def test_bad_constructor_input():
    with pytest.raises(QrlibError, match="unknown retriever"):
        build_retriever("splade", CORPUS)
    with pytest.raises(QrlibError, match="engine"):
        BM25Retriever(CORPUS, engine="lucene")
    with pytest.raises(QrlibError, match="empty"):
        BM25Retriever({})
    with pytest.raises(QrlibError, match="stemmer"):
        Tokenizer(stemmer="klingon")


def test_tokenizer_stems_and_drops_stopwords():
    tok = Tokenizer()
    assert tok(["The runners are running quickly"]) == [["runner", "run", "quick"]]
    assert Tokenizer(stemmer=None, stopwords=None)(["The cats"]) == [["the", "cats"]]


def test_engines_agree_on_scifact_subset(shared_data):
    ds = subset(load_dataset("scifact", data_dir=shared_data), n_queries=60, n_distractors=1500)
    runs = {e: run_queries(BM25Retriever(ds, engine=e), ds.queries, k=10)
            for e in ("bm25s", "rank_bm25")}
    nd = {e: evaluate(runs[e], ds.qrels, ["nDCG@10"])["nDCG@10"][0] for e in runs}
    assert abs(nd["bm25s"] - nd["rank_bm25"]) < 0.02
    overlap = np.mean([len({d for d, _ in runs["bm25s"][q]} & {d for d, _ in runs["rank_bm25"][q]})
                       / max(1, len(runs["bm25s"][q])) for q in ds.queries])
    assert overlap > 0.8


def test_bm25_index_cache(tmp_path):
    a = BM25Retriever(CORPUS, cache=tmp_path)
    b = BM25Retriever(CORPUS, cache=tmp_path)
    assert (a.loaded_from_cache, b.loaded_from_cache) == (False, True)
    assert a.search(["banana"], 5) == b.search(["banana"], 5)


# ------------------------------------------------------------------ dense (MiniLM, offline)
DOCS = {"cat": {"title": "", "text": "The cat sat on the mat and purred."},
        "car": {"title": "", "text": "The engine of my car needs new oil."},
        "bake": {"title": "", "text": "Bake the bread in a hot oven for forty minutes."},
        "rain": {"title": "", "text": "Heavy rain and thunderstorms are expected tomorrow."}}


@pytest.fixture(scope="module")
def dense_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module")
def dense(dense_cache):
    return DenseRetriever(DOCS, cache_dir=dense_cache, show_progress=False)


def test_dense_semantic_match(dense):
    res = dense.search(["a kitten resting on a rug", "weather forecast storm", ""], k=2)
    assert res[0][0][0] == "cat" and res[1][0][0] == "rain" and res[2] == []
    assert res[0][0][1] >= res[0][1][1]
    assert np.allclose(np.linalg.norm(dense.embeddings, axis=1), 1, atol=1e-5)


def test_dense_cache_reused_and_hnsw(dense, dense_cache):
    again = DenseRetriever(DOCS, cache_dir=dense_cache, index="hnsw",
                           hnsw_m=8, ef_construction=16, show_progress=False)
    assert again.loaded_from_cache and dense.cache_path.exists()
    assert np.array_equal(again.embeddings, dense.embeddings)
    assert again.search(["bread oven"], 1)[0][0][0] == "bake"
    with pytest.raises(QrlibError, match="empty query list"):
        again.search([], 3)
    with pytest.raises(QrlibError, match="unknown dense index"):
        DenseRetriever(DOCS, index="ivf")


def test_embedding_cache_is_per_document(dense, dense_cache, monkeypatch):
    """A subset reuses every cached vector; a superset encodes only its new documents."""
    sub = DenseRetriever({k: DOCS[k] for k in ("rain", "cat")}, cache_dir=dense_cache,
                         show_progress=False)
    assert sub.loaded_from_cache
    assert np.array_equal(sub.embeddings, dense.embeddings[[3, 0]])
    encoded = []
    real = DenseRetriever.encode

    def spy(self, texts, **kw):
        encoded.extend(texts)
        return real(self, texts, **kw)

    monkeypatch.setattr(DenseRetriever, "encode", spy)
    extra = {"sea": {"title": "", "text": "Waves crash on the rocky shore."}}
    sup = DenseRetriever({**DOCS, **extra}, cache_dir=dense_cache, show_progress=False)
    assert not sup.loaded_from_cache and encoded == ["Waves crash on the rocky shore."]
    assert np.allclose(sup.embeddings[:4], dense.embeddings)


# ------------------------------------------------------------------ parameters, caches
def test_build_retriever_rejects_unknown_parameters():
    with pytest.raises(QrlibError, match=r"build_retriever\('dense'\): unknown parameter "
                                         r"'hnsw_mm'") as info:
        build_retriever("dense", CORPUS, hnsw_mm=32)
    assert "\n" not in str(info.value) and "hnsw_m" in str(info.value)
    with pytest.raises(QrlibError, match=r"unknown parameter 'k_1'"):
        build_retriever("bm25", CORPUS, k_1=0.9)
    # a parameter of another retriever kind is still ignored (one section, several kinds)
    assert build_retriever("bm25", CORPUS, model="minilm", k1=0.9).k1 == 0.9


def _perturbed_copy(src, dest, scale):
    """A copy of an encoder folder whose word embeddings are scaled (other weights, same name)."""
    import shutil

    from safetensors.numpy import load_file, save_file

    shutil.copytree(src, dest)
    weights = load_file(str(dest / "model.safetensors"))
    key = next(k for k in weights if "word_embeddings" in k)
    weights[key] = (weights[key] * scale).astype(weights[key].dtype)
    save_file(weights, str(dest / "model.safetensors"), metadata={"format": "pt"})
    return dest


def test_embedding_cache_is_keyed_by_encoder_weights_not_folder_name(tmp_path):
    """Two different encoders in folders of the same name must not share cached vectors."""
    from qrlib.retrieval.retrievers import offline_minilm_path

    a = _perturbed_copy(offline_minilm_path(), tmp_path / "a" / "encoder", 1.0)
    b = _perturbed_copy(offline_minilm_path(), tmp_path / "b" / "encoder", 0.3)
    cache = tmp_path / "cache"
    ra = DenseRetriever(DOCS, model=str(a), cache_dir=cache, show_progress=False)
    rb = DenseRetriever(DOCS, model=str(b), cache_dir=cache, show_progress=False)
    fresh_b = DenseRetriever(DOCS, model=str(b), cache_dir=False, show_progress=False)
    assert not rb.loaded_from_cache and ra.cache_path != rb.cache_path
    assert np.abs(ra.embeddings - fresh_b.embeddings).max() > 0.01  # the encoders differ
    assert np.allclose(rb.embeddings, fresh_b.embeddings, atol=1e-5)
    again = DenseRetriever(DOCS, model=str(b), cache_dir=cache, show_progress=False)
    assert again.loaded_from_cache and np.array_equal(again.embeddings, rb.embeddings)


def test_corrupt_embedding_shard_is_rebuilt_with_a_note(dense, tmp_path, capsys):
    cache = tmp_path / "cache"
    first = DenseRetriever(DOCS, cache_dir=cache, show_progress=False)
    (shard,) = first.cache_path.glob("shard-*.npz")
    shard.write_bytes(shard.read_bytes()[:200])  # truncated (a killed copy, a full disk)
    capsys.readouterr()
    again = DenseRetriever(DOCS, cache_dir=cache, show_progress=False)
    assert f"embedding cache file {shard} is unreadable" in capsys.readouterr().err
    assert not again.loaded_from_cache
    assert np.allclose(again.embeddings, dense.embeddings, atol=1e-5)
    assert DenseRetriever(DOCS, cache_dir=cache, show_progress=False).loaded_from_cache


def test_legacy_name_keyed_cache_is_reused_only_after_checking_vectors(dense, tmp_path, capsys):
    import shutil

    cache = tmp_path / "cache"
    legacy = cache / "embeddings" / f"all-MiniLM-L6-v2-msl{dense.encoder.max_seq_length}"
    legacy.mkdir(parents=True)
    for shard in dense.cache_path.glob("shard-*.npz"):
        shutil.copy(shard, legacy / shard.name)
    r = DenseRetriever(DOCS, cache_dir=cache, show_progress=False)
    assert r.loaded_from_cache and np.allclose(r.embeddings, dense.embeddings, atol=1e-5)
    assert "checked against the encoder" in capsys.readouterr().err
    # a legacy cache written by another encoder under the same name is not reused
    cache2 = tmp_path / "cache2"
    legacy2 = cache2 / "embeddings" / legacy.name
    legacy2.mkdir(parents=True)
    from qrlib.retrieval.retrievers import EmbeddingStore

    EmbeddingStore(legacy2).add([d["text"] for d in DOCS.values()],
                                np.roll(dense.embeddings, 1, axis=1))
    r2 = DenseRetriever(DOCS, cache_dir=cache2, show_progress=False)
    assert not r2.loaded_from_cache and np.allclose(r2.embeddings, dense.embeddings, atol=1e-5)
    assert "written by another encoder" in capsys.readouterr().err


def test_corrupt_bm25_index_cache_is_rebuilt(tmp_path, capsys):
    first = BM25Retriever(CORPUS, stemmer=None, stopwords=None, cache=tmp_path)
    assert not first.loaded_from_cache
    (folder,) = tmp_path.glob("bm25s-*")
    for f in folder.glob("*.npy"):
        f.write_bytes(f.read_bytes()[:10])
    again = BM25Retriever(CORPUS, stemmer=None, stopwords=None, cache=tmp_path)
    assert "is unreadable" in capsys.readouterr().err and not again.loaded_from_cache
    assert again.search(["apple"], 3) == first.search(["apple"], 3)
    assert BM25Retriever(CORPUS, stemmer=None, stopwords=None, cache=tmp_path).loaded_from_cache


def test_default_dense_model_is_set_per_notebook(monkeypatch, tmp_path):
    """A profile's ``dense_model`` (gpu: BGE) reaches dense retrievers built without a model
    (issue 43: dense retrieval defaulted to MiniLM outside 02/03/08/15)."""
    from qrlib import session
    from qrlib.retrieval import retrievers as R

    monkeypatch.setattr(R, "DEFAULT_DENSE_MODEL", "minilm")
    seen = []
    monkeypatch.setattr(R, "resolve_model", lambda m: seen.append(m) or (m, m))

    class Stop(Exception):
        pass

    def stop(*a, **k):
        raise Stop

    monkeypatch.setattr(R, "load_encoder", stop)
    session.start("x", run_dir=tmp_path, figures_dir=tmp_path, tables_dir=tmp_path,
                  dense_model="BAAI/bge-base-en-v1.5")
    with pytest.raises(Stop):
        R.build_retriever("dense", {"d1": "text"})
    with pytest.raises(Stop):
        R.build_retriever("dense", {"d1": "text"}, model="minilm")
    assert seen == ["BAAI/bge-base-en-v1.5", "minilm"]  # a named model still wins
    assert R.set_default_dense_model(None) == "BAAI/bge-base-en-v1.5"
    with pytest.raises(QrlibError, match="dense model must be a non-empty name"):
        R.set_default_dense_model("  ")
