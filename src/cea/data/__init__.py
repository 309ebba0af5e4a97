"""Data: a catalog of named data sets and local files, all turned into :class:`TextDataset`."""

from .catalog import CATALOG, DatasetSpec, get_spec, list_datasets, load_dataset
from .dataset import CLASSIFICATION, SIMILARITY, TextDataset
from .fetch import PyPIArchive
from .readers import load_file

__all__ = [
    "CATALOG",
    "CLASSIFICATION",
    "SIMILARITY",
    "DatasetSpec",
    "PyPIArchive",
    "TextDataset",
    "get_spec",
    "list_datasets",
    "load_dataset",
    "load_file",
]
