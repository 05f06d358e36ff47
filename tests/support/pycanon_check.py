"""pycanon's measures of one CSV file, printed as one JSON object.

Runs in .venv-pycanon (pycanon and its own pandas), never in the app's venv, and imports
nothing of the project. The request is a JSON object on standard input::

    {"csv": "/path/extract.csv", "sep": ",", "qi": ["age", "sex"], "sensitive": ["disease"],
     "numeric": ["salary"], "measures": ["k", "l", "t"]}

Cells are read as text with "" kept as a value (as the app writes and the tests read them);
the columns in ``numeric`` are read as integers, for which pycanon measures t-closeness with
the ordered distance instead of the equal one.
"""

from __future__ import annotations

import json
import sys

import pandas as pd
from pycanon import anonymity

MEASURES = {
    "k": lambda df, qi, _sa: anonymity.k_anonymity(df, qi),
    "l": anonymity.l_diversity,
    "entropy_l": anonymity.entropy_l_diversity,
    "t": anonymity.t_closeness,
    "delta": anonymity.delta_disclosure,
    "basic_beta": anonymity.basic_beta_likeness,
    "enhanced_beta": anonymity.enhanced_beta_likeness,
}


def main() -> None:
    request = json.load(sys.stdin)
    data = pd.read_csv(request["csv"], sep=request["sep"], dtype=str, keep_default_na=False)
    for column in request["numeric"]:
        data[column] = data[column].astype(int)
    qi, sensitive = request["qi"], request["sensitive"]
    measured = {name: MEASURES[name](data, qi, sensitive) for name in request["measures"]}
    # numpy scalars (pycanon returns some) as plain numbers for JSON.
    print(json.dumps({name: float(value) for name, value in measured.items()}))


if __name__ == "__main__":
    main()
