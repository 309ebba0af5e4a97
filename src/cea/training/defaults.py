"""What a run takes when its config names no objective: read by :mod:`cea.training.train` (the config, its checks)
and :mod:`cea.training.tasks` (what the data need), so that neither imports the other for it."""

AUTO = "auto"  # TrainConfig.objective: the objective for the data, from DEFAULT_OBJECTIVES

# the objective cea train uses when none is named (the figures page, docs/benchmarks.md: how the default objective was
# chosen): softmax from the probe's head for texts with one label (few-shot and full sets), cea's Jaccard targets for
# texts with several
DEFAULT_OBJECTIVES = {"classes": "softmax", "labelsets": "cea"}
