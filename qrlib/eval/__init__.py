"""Evaluation layer: metrics, statistics, scale notes, recorded numbers, published numbers.

* :mod:`~qrlib.eval.metrics`: ``evaluate`` (ir-measures), labels, easy/hard splits;
* :mod:`~qrlib.eval.stats`: paired bootstrap, verdicts, intervals;
* :mod:`~qrlib.eval.scale`: the training-scale columns every trained row states;
* :mod:`~qrlib.eval.record`: :class:`~qrlib.eval.record.Recorder`, the numbers a notebook
  records for the tests;
* :mod:`~qrlib.eval.published`: the papers' published numbers, read from each paper's
  ``qrlib/methods/<paper>/published.yaml`` (and ``references.yaml`` beside the loader).

No re-exports: import the module you need.
"""
