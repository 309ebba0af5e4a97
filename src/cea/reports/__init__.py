"""Reports: plots (:mod:`cea.reports.plots`) and one HTML page of runs (:mod:`cea.reports.html`)."""
