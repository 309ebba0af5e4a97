"""Batch work on a corpus, in this process or on an engine (Ray, Spark): the corpus read in batches or numbered parts,
predicted by a bundle (``cea predict``) or embedded by an encoder (``cea embed``), and indexed from its parts
(``cea index``)."""
