"""A profiled dataset's cells as strings in a Parquet file beside its original.

Pages that need a few columns (the risk of the chosen quasi-identifiers, a hierarchy preview,
a type override) read them from here instead of parsing the whole original file again. The
release run still reads the original, checked against its SHA-256.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..models import Dataset
from . import storage


def _path(dataset: Dataset) -> Path:
    return Path(storage.private_storage().path(f"{dataset.file_path}.columns.parquet"))


def write(dataset: Dataset, frame: pd.DataFrame) -> None:
    path = _path(dataset)
    partial = path.with_suffix(".partial")
    frame.to_parquet(partial, index=False)
    partial.replace(path)  # readers never see half a file


def read(dataset: Dataset, columns: list[str]) -> pd.DataFrame:
    """The named columns, as strings ("" for missing values)."""
    path = _path(dataset)
    if path.exists():
        return pd.read_parquet(path, columns=columns)
    # Datasets profiled before the store existed: parse the original once and keep the store.
    from .profiling import read_dataset_file

    frame, _ = read_dataset_file(dataset)
    write(dataset, frame)
    return frame[columns]


def delete(dataset: Dataset) -> None:
    _path(dataset).unlink(missing_ok=True)
