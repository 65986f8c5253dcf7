"""Shared foundations of qrlib: atomic I/O and cache folders (:mod:`qrlib.core.io`)."""
