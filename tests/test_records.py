"""Typed records between notebooks (qrlib.core.records, qrlib.data.cut, ACQO's Stage I record)."""
from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest

from qrlib.core.errors import QrlibError
from qrlib.core.records import load_record, save_record
from qrlib.data.collection import Dataset
from qrlib.data.cut import CollectionCut
from qrlib.data.datasets import save_beir
from qrlib.methods.acqo.artifacts import Stage1Record


@dataclass(frozen=True)
class Toy:
    name: str
    ids: list[str]
    extra: dict[str, int] = field(default_factory=dict)


def test_a_record_round_trips_and_defaults_fill_in(tmp_path):
    p = save_record(Toy("a", ["x", "y"], {"k": 1}), tmp_path / "toy.json")
    assert load_record(Toy, p) == Toy("a", ["x", "y"], {"k": 1})
    p.write_text(json.dumps({"name": "b", "ids": []}))
    assert load_record(Toy, p) == Toy("b", [], {})


@pytest.mark.parametrize("content, message", [
    (None, "no Toy here; run notebook 99 first"),
    ("{not json", "not JSON"),
    ("[1, 2]", "a Toy is a JSON object, found list"),
    ('{"name": "a"}', "lacks ids"),
    ('{"name": "a", "ids": [], "colour": 1}', "has undeclared colour"),
])
def test_a_bad_record_file_is_a_one_line_error(tmp_path, content, message):
    p = tmp_path / "toy.json"
    if content is not None:
        p.write_text(content)
    with pytest.raises(QrlibError, match=message) as err:
        load_record(Toy, p, writer="notebook 99")
    assert "\n" not in str(err.value)


def test_save_record_wants_a_dataclass_instance(tmp_path):
    with pytest.raises(QrlibError, match="dataclass instance"):
        save_record({"name": "a"}, tmp_path / "x.json")


def _toy_beir(tmp_path):
    corpus = {f"d{i}": {"title": "", "text": f"doc {i}"} for i in range(6)}
    ds = Dataset("toy", corpus, {"q1": "one", "q2": "two", "q3": "three"},
                 {"q1": {"d1": 1}, "q2": {"d2": 1}, "q3": {"d5": 1}}, meta={"split": "test"})
    return save_beir(ds, tmp_path / "toy")


def test_a_collection_cut_rebuilds_the_queries_and_the_corpus_in_its_order(tmp_path):
    folder = _toy_beir(tmp_path)
    from qrlib.data.datasets import load_dataset

    full = load_dataset(str(folder), "test")
    te = Dataset(full.name, {}, {"q2": "two", "q1": "one"}, {"q2": {"d2": 1}, "q1": {"d1": 1}},
                 meta={"split": "test"})
    corpus = {d: full.corpus[d] for d in ("d4", "d2", "d1")}
    cut = CollectionCut.of(te, corpus)
    save_record(cut, tmp_path / "cut.json")
    back = load_record(CollectionCut, tmp_path / "cut.json")
    assert back == cut and back.doc_ids == ["d4", "d2", "d1"]
    ds, corp = CollectionCut(str(folder), "test", back.qids, back.doc_ids).load()
    assert list(ds.queries) == ["q2", "q1"] and ds.qrels["q1"] == {"d1": 1}
    assert list(corp) == ["d4", "d2", "d1"]
    with pytest.raises(QrlibError, match="1 saved document ids are not in the dataset"):
        CollectionCut(str(folder), "test", ["q1"], ["d1", "gone"]).load()


def test_stage1_record_names_the_missing_retriever(tmp_path):
    rec = Stage1Record(summaries={"bm25": {"adapter": "a"}}, train_rows=[], prompt="p",
                       prefill="", train_datasets=["x"], corpus_ids=["d1"], eta=0.6,
                       delta=-1.0, reward_k=100, n_distractors=None, max_completion_length=24,
                       warm_start_samples=0, sft_steps=0)
    rec.save(tmp_path)
    back = Stage1Record.load(tmp_path)
    assert back == rec and back.summary("bm25") == {"adapter": "a"}
    with pytest.raises(QrlibError, match="no Stage I adapter for 'dense' \\(it trained: bm25\\)"):
        back.summary("dense")
    with pytest.raises(QrlibError, match="run notebook 06_acqo_stage1 first"):
        Stage1Record.load(tmp_path / "elsewhere")
