"""Shared foundations of qrlib: atomic I/O and cache folders (:mod:`qrlib.core.io`), run
locks (:mod:`qrlib.core.lock`), the read log (:mod:`qrlib.core.readlog`), the one error
type (:mod:`qrlib.core.errors`) and the loading of every paper into the registries
(:mod:`qrlib.core.registry`)."""
