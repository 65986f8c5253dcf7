"""qrlib.data.datasets / qrlib.data.loaders: counts from PROVENANCE.md, lookup order, errors, subsets."""
from __future__ import annotations

import pytest

from qrlib.data import datasets as qdata
from qrlib.data.datasets import (Dataset, add_distractor_corpora, ir_datasets_id, load_dataset,
                        load_spider, subset)
from qrlib.core.errors import QrlibError
from qrlib.data.loaders import chunk_text, load_multihop_rag, multihop_rag_ap, topiocqa_query

WORDS = lambda s: len(s.split())  # noqa: E731 - a transparent token counter for hand checks


# ------------------------------------------------------------------ offline collections
# (docs, queries in split, qrels lines) as stated in each folder's PROVENANCE.md
EXPECTED = {
    ("scifact", "test"): (5183, 300, 339), ("scifact", "train"): (5183, 809, 919),
    ("nfcorpus", "test"): (3633, 323, 12334), ("nfcorpus", "dev"): (3633, 324, 11385),
    ("hotpotqa-mini", "test"): (4858, 167, 334), ("hotpotqa-mini", "train"): (4858, 333, 666),
    ("hotpotqa-large", "test"): (9171, 315, 630),
    ("2wikimultihopqa-mini", "test"): (8651, 516, 1284),
    ("2wikimultihopqa-mini", "train"): (8651, 948, 2356),
}


@pytest.mark.parametrize("name,split", sorted(EXPECTED))
def test_offline_counts_match_provenance(shared_data, name, split):
    ds = load_dataset(name, split, data_dir=shared_data)
    docs, nq, nqrels = EXPECTED[(name, split)]
    assert (len(ds.corpus), len(ds.queries), sum(map(len, ds.qrels.values()))) == (docs, nq, nqrels)
    assert set(ds.queries) == set(ds.qrels)
    assert all(d in ds.corpus for rs in ds.qrels.values() for d in rs)


@pytest.mark.parametrize("name", ["hotpotqa-mini", "hotpotqa-large", "2wikimultihopqa-mini"])
def test_multihop_split_metadata_agrees_with_qrels(shared_data, name):
    ds = load_dataset(name, "test", data_dir=shared_data)
    assert ds.meta["metadata_split_mismatch"] == 0
    assert all(m["split"] == "test" for m in ds.query_meta.values())


def test_hotpot_metadata_types(shared_data):
    ds = load_dataset("hotpotqa-large", "train", data_dir=shared_data)
    types = {m["type"] for m in ds.query_meta.values()}
    assert types <= {"bridge", "comparison", None} and "bridge" in types


def test_doc_text_joins_title_and_text(fixtures_dir):
    ds = load_dataset(fixtures_dir / "foundation" / "tiny-beir")
    assert ds.doc_text("d3") == "Cherry date elderberry fig grape"
    assert ds.doc_text("d1") == "apple banana apple"


# ------------------------------------------------------------------ lookup and errors
def test_beir_folder_path_works_as_name(fixtures_dir):
    ds = load_dataset(str(fixtures_dir / "foundation" / "tiny-beir"), "test")
    assert ds.name == "tiny-beir"
    assert sorted(ds.queries) == ["q1", "q2"]  # q3 is train, q4 has no qrels
    assert ds.qrels["q2"] == {"d2": 2, "d3": 1, "d4": 0}


def test_qrlib_data_env(monkeypatch, fixtures_dir, tmp_path):
    monkeypatch.setenv("QRLIB_DATA", str(fixtures_dir / "foundation"))
    monkeypatch.chdir(tmp_path)
    ds = load_dataset("tiny-beir", "train")
    assert list(ds.queries) == ["q3"]


def test_unknown_dataset_one_line_error_names_places(monkeypatch, tmp_path):
    monkeypatch.setenv("QRLIB_DATA", str(tmp_path))
    with pytest.raises(QrlibError) as exc:
        load_dataset("no-such-set")
    msg = str(exc.value)
    assert "\n" not in msg
    assert str(tmp_path / "no-such-set") in msg and "ir_datasets" in msg


def test_missing_split_and_missing_path(shared_data, tmp_path):
    with pytest.raises(QrlibError, match="available splits: test, train"):
        load_dataset("scifact", "dev", data_dir=shared_data)
    with pytest.raises(QrlibError, match="does not exist"):
        load_dataset(str(tmp_path / "nothing-here"))
    with pytest.raises(QrlibError):
        load_dataset("")


def test_ir_datasets_mapping_without_network():
    assert ir_datasets_id("scifact", "test") == "beir/scifact/test"
    assert ir_datasets_id("nfcorpus", "dev") == "beir/nfcorpus/dev"
    assert ir_datasets_id("hotpotqa", "test") == "beir/hotpotqa/test"
    assert ir_datasets_id("hotpotqa-mini", "test") is None
    assert ir_datasets_id("beir/fiqa/dev", "test") == "beir/fiqa/dev"


def test_falls_back_to_ir_datasets(monkeypatch, tmp_path):
    calls = []

    def fake(ds_id, name=None, on_duplicate="error"):
        calls.append(ds_id)
        return Dataset(name, {"d": {"title": "", "text": "x"}}, {"q": "x"}, {"q": {"d": 1}})

    monkeypatch.setattr(qdata, "load_ir_datasets", fake)
    monkeypatch.setenv("QRLIB_DATA", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    ds = load_dataset("hotpotqa", "test", data_dir=tmp_path)
    assert calls == ["beir/hotpotqa/test"] and ds.queries == {"q": "x"}


# ------------------------------------------------------------------ subsets, pooling
def test_subset_keeps_judged_docs_and_is_seeded(shared_data):
    ds = load_dataset("scifact", data_dir=shared_data)
    a = subset(ds, n_queries=25, n_distractors=200, seed=1)
    b = subset(ds, n_queries=25, n_distractors=200, seed=1)
    c = subset(ds, n_queries=25, n_distractors=200, seed=2)
    assert a.queries == b.queries and a.corpus.keys() == b.corpus.keys()
    assert a.queries != c.queries
    judged = {d for q in a.qrels for d in a.qrels[q]}
    assert judged <= set(a.corpus)
    assert len(a.corpus) == len(judged) + 200
    assert len(a.queries) == 25


def test_subset_bad_input(shared_data):
    ds = load_dataset("scifact", data_dir=shared_data)
    with pytest.raises(QrlibError):
        subset(ds, n_queries=0)
    with pytest.raises(QrlibError):
        subset(ds, qids=["not-a-query"])


def test_pooled_multihop_corpus(shared_data):
    ds = load_dataset("hotpotqa-mini", extra_corpora=["2wikimultihopqa-mini", "hotpotqa-large"],
                      data_dir=shared_data)
    # 4,858 own + 8,651 2Wiki (disjoint 2w_ ids) + 9,171 - 4,858 hotpotqa-large (superset)
    assert len(ds.corpus) == 4858 + 8651 + (9171 - 4858)
    assert ds.meta["extra_corpora_shared_ids"] == {"2wikimultihopqa-mini": 0,
                                                   "hotpotqa-large": 4858}
    assert len(ds.queries) == 167


def test_pooling_conflicting_ids_raises(fixtures_dir):
    tiny = load_dataset(fixtures_dir / "foundation" / "tiny-beir")
    with pytest.raises(QrlibError, match="different text"):
        add_distractor_corpora(tiny, [str(fixtures_dir / "foundation" / "conflict-beir")])


# ------------------------------------------------------------------ Spider
def test_spider_skips_missing_wta_1(shared_data):
    sp = load_spider(shared_data / "spider-dev")
    assert sp.skipped == {"wta_1": 62}
    assert len(sp.examples) == 1034 - 62
    assert sp.meta["missing_databases"] == ["wta_1"] and len(sp.db_paths) == 19
    ex = sp.examples[0]
    rows = sp.execute(ex["db_id"], ex["query"])
    assert isinstance(rows, list)
    assert "CREATE TABLE" in sp.schema_text(ex["db_id"])


def test_spider_found_by_lookup(shared_data):
    assert load_spider(shared_data).meta["n_databases"] == 20


# ------------------------------------------------------------------ MultiHop-RAG, TopiOCQA
def test_chunk_text_overlap_by_hand():
    text = "One two three four. Five six seven. Eight nine ten eleven twelve."
    # sentences of 4, 3, 5 words; size 8 overlap 3: [s1+s2], then [s2 (3 <= 3) + s3]
    assert chunk_text(text, 8, 3, WORDS) == ["One two three four. Five six seven.",
                                             "Five six seven. Eight nine ten eleven twelve."]
    assert chunk_text(text, 100, 0, WORDS) == [text]
    with pytest.raises(QrlibError):
        chunk_text(text, 10, 10, WORDS)


def test_multihop_rag_fixture(fixtures_dir):
    ds = load_multihop_rag(fixtures_dir / "foundation" / "multihop-rag", chunk_size=12,
                           chunk_overlap=4, count_tokens=WORDS)
    # article 1 sentences: 10, 5, 3, 6 words -> [s1], [s2 s3], [s3 s4]; article 2: one chunk
    assert [c["text"] for c in ds.corpus.values()][:3] == [
        "Acme reported a record profit in the third quarter.",
        "The company sold many widgets. Analysts expected less.",
        "Analysts expected less. Shares rose ten percent on Monday."]
    assert len(ds.corpus) == 4
    # null_query skipped; the paraphrased fact of question 3 matches no chunk -> dropped
    assert ds.meta["skipped_null_queries"] == 1 and ds.meta["dropped_no_matching_chunk"] == 1
    assert list(ds.queries) == ["mhq0000"]
    assert ds.qrels["mhq0000"] == {"mh0000_c002": 1, "mh0001_c000": 1}
    assert ds.meta["subtopic_qrels"]["mhq0000"] == {"e0": {"mh0000_c002": 1},
                                                    "e1": {"mh0001_c000": 1}}
    assert ds.query_meta["mhq0000"]["question_type"] == "comparison_query"
    # with the fallback: the article chunk sharing most words ("company", "sold", ...)
    fb = load_multihop_rag(fixtures_dir / "foundation" / "multihop-rag", chunk_size=12,
                           chunk_overlap=4, count_tokens=WORDS, fact_fallback=True)
    assert fb.qrels["mhq0002"] == {"mh0000_c001": 1}


def test_multihop_rag_fact_level_ap_by_hand():
    # rank 1 finds nothing; rank 2 contains both facts once whitespace is removed (2 new / 2);
    # rank 3 repeats a found fact (0): AP = 1.0 / min(2 facts, k=10) = 0.5
    assert multihop_rag_ap(["xx", "a b c", "c"], ["ab", "c"], k=10) == 0.5
    assert multihop_rag_ap(["a b c"], ["ab", "c"], k=10) == 1.0
    assert multihop_rag_ap(["zz", "ab"], ["ab"], k=1) == 0.0
    assert multihop_rag_ap(["ab"], [], k=10) == 0.0


def test_multihop_rag_missing_files(tmp_path):
    with pytest.raises(QrlibError, match="corpus.json"):
        load_multihop_rag(tmp_path)


def test_topiocqa_fixture(fixtures_dir):
    ds = load_dataset("topiocqa", "test", data_dir=fixtures_dir / "foundation")
    assert ds.queries["1_2"] == ("who won the fa cup in 2005? [SEP] Arsenal [SEP] "
                                 "how many league titles do they have?")
    assert ds.qrels == {"1_1": {"101": 1}, "1_2": {"202": 1}, "2_1": {"303": 1}}
    assert len(ds.corpus) == 4  # full_wiki_segments.tsv, including the non-gold passage
    assert ds.query_meta["1_2"]["topic_shift"] is True
    assert ds.query_meta["2_1"]["topic_shift"] is False
    assert topiocqa_query(["q1", "a1", "q2", "a2"], "q3", max_history=2) == "q2 [SEP] a2 [SEP] q3"


def test_topiocqa_without_offline_copy(tmp_path):
    with pytest.raises(QrlibError, match="no offline copy"):
        load_dataset("topiocqa", data_dir=tmp_path)


def test_broken_folders_give_one_line_errors(tmp_path):
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "corpus.jsonl").write_text('{"_id": "d1", "text": "x"}\n')
    with pytest.raises(QrlibError, match="not a BEIR folder"):
        load_dataset(tmp_path / "half")
    (tmp_path / "half" / "queries.jsonl").write_text('{"_id": "q1", "text": "x"}\n')
    with pytest.raises(QrlibError, match="available splits: none"):
        load_dataset(tmp_path / "half")
    (tmp_path / "half" / "qrels").mkdir()
    (tmp_path / "half" / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    (tmp_path / "half" / "corpus.jsonl").write_text('{"_id": "d1", "text": "x"}\n{broken\n')
    with pytest.raises(QrlibError, match=r"corpus.jsonl:2 is not valid JSON"):
        load_dataset(tmp_path / "half")


# ------------------------------------------------------------------ hostile files
def _beir(tmp_path, corpus: bytes | str, queries: str | None = None, qrels: str | None = None,
          gz: bool = False):
    """A BEIR folder with the given file contents; returns the folder."""
    import gzip

    folder = tmp_path / "bad"
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    raw = corpus.encode() if isinstance(corpus, str) else corpus
    if gz:
        (folder / "corpus.jsonl.gz").write_bytes(gzip.compress(raw))
    else:
        (folder / "corpus.jsonl").write_bytes(raw)
    (folder / "queries.jsonl").write_text(
        queries if queries is not None else '{"_id": "q1", "text": "a query"}\n')
    (folder / "qrels" / "test.tsv").write_text(
        qrels if qrels is not None else "query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    return folder


GOOD = '{"_id": "d1", "text": "one"}\n{"_id": "d2", "text": "two"}\n'


@pytest.mark.parametrize("corpus, message", [
    (GOOD.encode() + b'{"_id": "d3", "text": "caf\xe9"}\n',
     r"corpus.jsonl:3: not UTF-8 text \(byte 0xe9"),
    (GOOD + '{"title": "no id", "text": "x"}\n', r"corpus.jsonl:3: record has no '_id' field"),
    (GOOD + '["d3", "a list"]\n', r"corpus.jsonl:3: expected one JSON object per line, got a JSON list"),
    (GOOD + '{"_id": null, "text": "x"}\n', r"corpus.jsonl:3: '_id' must be"),
    (GOOD + '{"_id": "d3", "text": 7}\n', r"corpus.jsonl:3: field 'text' must be a string"),
])
def test_malformed_corpus_lines_name_file_and_line(tmp_path, corpus, message):
    with pytest.raises(QrlibError, match=message) as info:
        load_dataset(_beir(tmp_path, corpus))
    assert "\n" not in str(info.value)


def test_truncated_and_fake_gzip_corpus(tmp_path):
    import gzip

    many = "".join(f'{{"_id": "d{i}", "text": "document number {i}"}}\n' for i in range(1, 3000))
    folder = _beir(tmp_path, many, gz=True)
    blob = (folder / "corpus.jsonl.gz").read_bytes()
    (folder / "corpus.jsonl.gz").write_bytes(blob[: len(blob) // 2])
    with pytest.raises(QrlibError, match=r"corpus.jsonl.gz: the gzip stream ends early, after "
                                         r"line \d+ \(a truncated download\?\)"):
        load_dataset(folder)
    (folder / "corpus.jsonl.gz").write_bytes(GOOD.encode())  # plain text named .gz
    with pytest.raises(QrlibError, match=r"corpus.jsonl.gz: not a gzip file"):
        load_dataset(folder)
    (folder / "corpus.jsonl.gz").unlink()
    (folder / "corpus.jsonl").write_bytes(gzip.compress(GOOD.encode()))  # gzip named .jsonl
    with pytest.raises(QrlibError, match=r"corpus.jsonl:1: not UTF-8 .* gzip-compressed"):
        load_dataset(folder)


@pytest.mark.parametrize("qrels, message", [
    ("query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\thigh\n", r"test.tsv:3: relevance grade 'high'"),
    ("query-id\tcorpus-id\tscore\nq1\td1\t1.5\n", r"test.tsv:2: relevance grade '1.5' is not an integer"),
    ("query-id\tcorpus-id\tscore\nq1\td1\n", r"test.tsv:2: qrels row .* has 2 fields"),
])
def test_malformed_qrels_name_file_and_line(tmp_path, qrels, message):
    with pytest.raises(QrlibError, match=message):
        load_dataset(_beir(tmp_path, GOOD, qrels=qrels))


def test_integral_float_grades_and_trec_qrels_still_load(tmp_path):
    ds = load_dataset(_beir(tmp_path, GOOD, qrels="q1 0 d1 1.0\nq1 0 d2 0\n"))
    assert ds.qrels == {"q1": {"d1": 1, "d2": 0}}


def test_queries_file_errors_name_line(tmp_path):
    with pytest.raises(QrlibError, match=r"queries.jsonl:2: record has no '_id'"):
        load_dataset(_beir(tmp_path, GOOD, queries='{"_id": "q1", "text": "a"}\n{"text": "b"}\n'))


def test_duplicate_document_ids_are_an_error_or_an_explicit_reported_policy(tmp_path, capsys):
    corpus = GOOD + '{"_id": "d1", "text": "an impostor copy of d1"}\n'
    folder = _beir(tmp_path, corpus)
    with pytest.raises(QrlibError, match=r"corpus.jsonl:3: document id 'd1' appears a second "
                                         r"time.*on_duplicate='first'"):
        load_dataset(folder)
    ds = load_dataset(folder, on_duplicate="first")
    assert ds.corpus["d1"]["text"] == "one"  # the first copy, not the last
    assert ds.meta["duplicate_doc_ids_dropped"] == 1
    assert "1 duplicated document ids (first copy kept)" in capsys.readouterr().err
    assert "duplicated document ids" in ds.summary()
    with pytest.raises(QrlibError, match="on_duplicate must be one of error, first"):
        load_dataset(folder, on_duplicate="last")


def test_empty_queries_and_qrels_to_missing_docs_are_counted_and_reported(tmp_path, capsys):
    queries = '{"_id": "q1", "text": "a query"}\n{"_id": "q2", "text": "   "}\n'
    qrels = "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\tgone\t1\nq2\td2\t1\nq2\tmissing\t2\n"
    ds = load_dataset(_beir(tmp_path, GOOD, queries=queries, qrels=qrels))
    assert ds.meta["empty_queries"] == 1 and ds.meta["qrels_docs_missing_from_corpus"] == 2
    err = capsys.readouterr().err
    assert "1 empty queries" in err and "2 qrels point at documents missing from the corpus" in err
    assert "notes=" in repr(ds) and "1 empty queries" in ds.summary()


def test_clean_datasets_load_quietly(shared_data, capsys):
    for name in qdata.KNOWN_DATASETS:
        ds = load_dataset(name, "test", data_dir=shared_data)
        assert ds.notes() == [], name
    assert capsys.readouterr().err == ""
    assert load_spider(shared_data / "spider-dev").meta["n_usable"] == 972


def test_multihop_rag_non_utf8_file_names_line(tmp_path):
    (tmp_path / "corpus.json").write_bytes(b'[{"title": "t", "body": "b"}]\n')
    (tmp_path / "MultiHopRAG.json").write_bytes(b'{"query": "q"}\n{"query": "caf\xe9"}\n')
    with pytest.raises(QrlibError, match=r"MultiHopRAG.json:2: not UTF-8"):
        load_multihop_rag(tmp_path)


def test_no_import_cycle_between_data_and_loaders():
    """qrlib.data.datasets may use qrlib.data.loaders, or the reverse, but not both (even lazily)."""
    import ast
    from pathlib import Path

    def imports(mod: str) -> set[str]:
        tree = ast.parse((Path(qdata.__file__).parent / f"{mod}.py").read_text())
        out = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                out.add(node.module)
                out.update(f"{node.module}.{a.name}" for a in node.names)
            elif isinstance(node, ast.Import):
                out.update(a.name for a in node.names)
        return out

    data_uses = imports("datasets")
    loaders_uses = imports("loaders")
    assert not ("qrlib.data.loaders" in data_uses and "qrlib.data.datasets" in loaders_uses)
    assert "qrlib.data.datasets" not in loaders_uses
    assert Dataset is __import__("qrlib.data.loaders", fromlist=["Dataset"]).Dataset
