"""Fixtures for the engine's tests: the Adult benchmark data and small seeded random tables."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from releases.engine import Hierarchy
from tests.conftest import ADULT as ADULT_DIR
from tests.conftest import ADULT_QUASI_IDENTIFIERS as ADULT_QIS


@pytest.fixture(scope="session")
def adult() -> pd.DataFrame:
    return pd.read_csv(ADULT_DIR / "adult.csv", sep=";", dtype=str, keep_default_na=False)


@pytest.fixture(scope="session")
def adult_hierarchies() -> dict[str, Hierarchy]:
    return {
        q: Hierarchy.from_arx_csv(ADULT_DIR / f"adult_hierarchy_{q}.csv", attribute=q)
        for q in ADULT_QIS
    }


def make_table(seed: int, n: int = 400) -> tuple[pd.DataFrame, dict[str, Hierarchy], Hierarchy]:
    """A small table with 4 quasi-identifiers and 2 sensitive attributes.

    Returns (data, quasi-identifier hierarchies, hierarchy of ``disease``)."""
    rng = np.random.default_rng(seed)
    zips = ["13053", "13068", "13067", "14850", "14853", "14857", "15001"]
    data = pd.DataFrame(
        {
            "name": [f"person{i}" for i in range(n)],
            "age": rng.integers(18, 70, n).astype(str),
            "zip": rng.choice(zips, n, p=[0.25, 0.2, 0.15, 0.15, 0.1, 0.1, 0.05]),
            "sex": rng.choice(["F", "M", ""], n, p=[0.48, 0.48, 0.04]),
            "marital": rng.choice(["married", "single", "divorced", "widowed"], n),
            "disease": rng.choice(
                ["flu", "cold", "bronchitis", "hiv", "cancer"], n, p=[0.3, 0.3, 0.2, 0.1, 0.1]
            ),
            "salary": rng.choice([str(v) for v in range(10, 100, 10)], n),
            "row": [str(i) for i in range(n)],
        }
    )
    marital = Hierarchy(
        (
            ("married", "together", "*"),
            ("single", "alone", "*"),
            ("divorced", "alone", "*"),
            ("widowed", "alone", "*"),
        ),
        attribute="marital",
    )
    hierarchies = {
        "age": Hierarchy.intervals(data["age"], widths=[10, 20], attribute="age"),
        "zip": Hierarchy.masking(data["zip"], attribute="zip"),
        "sex": Hierarchy.categorical(data["sex"], attribute="sex"),
        "marital": marital,
    }
    disease = Hierarchy(
        (
            ("flu", "respiratory", "*"),
            ("cold", "respiratory", "*"),
            ("bronchitis", "respiratory", "*"),
            ("hiv", "severe", "*"),
            ("cancer", "severe", "*"),
        ),
        attribute="disease",
    )
    return data, hierarchies, disease


@pytest.fixture(scope="session")
def small_table():
    return make_table(7)


@pytest.fixture(scope="session")
def table_factory():
    """``make_table`` as a fixture (test modules here are not a package)."""
    return make_table
