

def test_the_index_cache_builds_each_index_once():
    from qrlib.retrieval.retrievers import IndexCache

    corpus = {"d1": {"title": "", "text": "coffee beans"}, "d2": {"title": "", "text": "tea leaves"}}
    cache = IndexCache()
    a = cache.get("toy", "bm25", corpus)
    assert cache.get("toy", "bm25", corpus) is a and list(cache.built) == [("toy", "bm25")]
    assert cache.get("other", "bm25", corpus) is not a
