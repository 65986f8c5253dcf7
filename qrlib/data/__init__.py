"""Data layer: datasets and what they are made of.

* :mod:`~qrlib.data.datasets` (``load_dataset``, ``subset``, ``load_spider`` ...): every
  dataset the workbook reads, from offline folders, ``$QRLIB_DATA`` or ``ir_datasets``;
* :mod:`~qrlib.data.loaders`: readers of the non-BEIR layouts (MultiHop-RAG, Spider ...);
* :mod:`~qrlib.data.collection`: the :class:`~qrlib.data.collection.Dataset` container and
  ``doc_text``;
* :mod:`~qrlib.data.rows`: training/evaluation rows (question, qrels, answers) of a dataset;
* :mod:`~qrlib.data.sql`: the sandboxed SQLite executor. It is here, not with
  DeepRetrieval's SQL reward that also uses it, because the Spider loader executes gold SQL
  with it: a data module must not import a paper's folder.

This ``__init__`` re-exports nothing (import the module you need, e.g.
``from qrlib.data import datasets as qdata``): an import of :mod:`qrlib.data.rows` then
loads only that module, and :mod:`qrlib.freshness` counts only what a notebook reaches.
"""
