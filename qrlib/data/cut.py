"""Which queries and documents a notebook evaluated on, as a record a later notebook can load.

Notebook 05 cuts each test collection (seeded queries, their judged documents, distractors,
and the judged documents of its training queries) and saves one :class:`CollectionCut` per
dataset; notebook 10 rebuilds exactly that collection from it with :meth:`CollectionCut.load`
instead of re-deriving the cut from 05's settings. Document order is kept: it is the order
the retrievers index, which decides ties.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from qrlib.core.errors import QrlibError
from qrlib.data.collection import Dataset
from qrlib.data.datasets import load_dataset, subset


@dataclass(frozen=True)
class CollectionCut:
    """A test collection cut: dataset name, split, query ids and document ids, in order."""

    dataset: str
    split: str
    qids: list[str]
    doc_ids: list[str]

    @classmethod
    def of(cls, ds: Dataset, corpus: Mapping[str, Any]) -> "CollectionCut":
        """The cut of ``ds``'s queries searched over ``corpus`` (which may hold more documents
        than ``ds.corpus``, e.g. the training queries' judged documents)."""
        return cls(ds.name, str(ds.meta.get("split", "test")), list(ds.queries), list(corpus))

    def load(self, data_dir: str | os.PathLike | None = None) -> tuple[Dataset, dict[str, Any]]:
        """(the queries with their qrels, the corpus in its saved order) from the dataset
        folder; a one-line error when the folder no longer holds a saved id."""
        full = load_dataset(self.dataset, self.split, data_dir=data_dir)
        lost = [d for d in self.doc_ids if d not in full.corpus]
        if lost:
            raise QrlibError(f"CollectionCut of {self.dataset}/{self.split}: {len(lost)} saved "
                             f"document ids are not in the dataset (first: {lost[0]!r})")
        return (subset(full, qids=self.qids, n_distractors=0),
                {d: full.corpus[d] for d in self.doc_ids})
