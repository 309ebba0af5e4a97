"""Reports: result files (CSV, JSON) now; plots and HTML pages build on them."""

from .tables import write_probe

__all__ = ["write_probe"]
