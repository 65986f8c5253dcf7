"""Every offline data set rebuilt from its public sources (``python -m qrlib data fetch``).

* :mod:`.sources` -- the one table of pieces (repository, commit, path, sha256), license and
  citation of each set;
* :mod:`.fetch` -- download with resume and sha256 check, build into a temporary folder,
  write ``PROVENANCE.md``, move into place (nothing half-written is left);
* one small module per set that converts its pieces into the layout the loaders read
  (:mod:`.scifact`, :mod:`.nfcorpus`, :mod:`.spider`, :mod:`.hotpotqa`, :mod:`.hotpotqa_large`, :mod:`.twowiki`);
* :mod:`.clones` -- the same pieces read from local git clones, and a loopback server that
  serves them as the raw URLs do (the tests; a machine without the internet).
"""
