"""The labelling loop after deployment: which labels are wrong (:mod:`cea.labelling.check`)."""
