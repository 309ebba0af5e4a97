"""The defaults a user meets on several paths (the CLI, the Python API, the service, training), each written once.

The module imports nothing, so every ``cea`` command shows them in its help without loading torch; the modules
that use them say why each is what it is.
"""

DEFAULT_MODEL = "all-MiniLM-L6-v2"  # the encoder when none is named: cea.encoders.catalog
# the encoder cea discover groups texts with when none is named (a bundle's unknowns keep the bundle's own): frozen, it
# found the classes of 11 of 12 settings better than all-MiniLM-L6-v2 (banking77, clinc150, stackoverflow and HWU64,
# a set nothing was chosen on, at 25 / 50 / 75 % known, 3 seeds: +0.9 to +4.6 points a set; docs/discover.md), at
# about five times its encoding time, once per set (cached)
DISCOVER_MODEL = "all-mpnet-base-v2"
# clusters cea discover draws per cluster asked for, the smallest new ones then dropped (cea.discover.groups.
# anchored_kmeans; docs/discover.md, the clusters drawn beyond the count); the ways it estimates their count
DISCOVER_OVER, DISCOVER_ESTIMATES = 1.2, ("labelled", "sizes", "silhouette")
UNKNOWN_RATE = 0.15  # the share of known texts the unknown threshold turns away: cea.knn.unknown

AUTO = "auto"  # TrainConfig.objective: the objective for the data, from DEFAULT_OBJECTIVES (cea.training.tasks)
# the objective cea train uses when none is named (the figures page, docs/benchmarks.md: softmax from the probe's
# head): softmax, its head started from the linear probe, for texts with one label (few-shot and full sets); cea's
# Jaccard targets for texts with several
DEFAULT_OBJECTIVES = {"classes": "softmax", "labelsets": "cea"}
REFERENCE_BATCH = 32  # the batch the objectives' learning rates and minimum steps were chosen at
LR_SCALE_POWER = 0.5  # a larger batch (a GPU's) trains at lr x (batch / REFERENCE_BATCH) ** this: docs/records
PATIENCE = 2  # dev judgements without a better one before training stops: cea.training.schedule
# the service's batching (cea.service.app) and cea fit --latency's timing of a bundle as the service runs it
# (cea.bundle.speed): texts per encoder call; seconds a batch waits to fill. With one batch per core, 8 served 1.6x the
# texts/s of 64 on 2 cores at 16 clients (two batches of 8 side by side where one of 16 leaves a core idle: the
# figures page)
BATCHING = {"max_batch": 8, "max_wait": 0.005}
