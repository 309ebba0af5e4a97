"""The defaults a user meets on several paths (the CLI, the Python API, the service), each written once.

The module imports nothing, so every ``cea`` command shows them in its help without loading torch; the modules
that use them say why each is what it is.
"""

DEFAULT_MODEL = "all-MiniLM-L6-v2"  # the encoder when none is named: cea.encoders.catalog
UNKNOWN_RATE = 0.15  # the share of known texts the unknown threshold turns away: cea.knn.unknown
