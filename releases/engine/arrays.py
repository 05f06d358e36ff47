"""The array types the engine passes around: numpy arrays named by their element type."""

from __future__ import annotations

from typing import Any, TypeAlias

import numpy as np
from numpy.typing import NDArray

__all__ = ["BoolArray", "CodeArray", "FloatArray", "IntArray", "ObjectArray", "SmallIntArray"]

#: Counts, class numbers and integer codes.
IntArray: TypeAlias = NDArray[np.int64]
#: Codes of quasi-identifier values, kept at 32 bits (12 million rows of 8 attributes are
#: 384 MB, not 768 MB).
CodeArray: TypeAlias = NDArray[np.int32]
#: Integer codes of whatever width they come in (pandas' categorical codes are int8 or int16:
#: widening them would cost memory for nothing).
SmallIntArray: TypeAlias = NDArray[np.integer[Any]]
#: Measures, shares and distances.
FloatArray: TypeAlias = NDArray[np.float64]
#: Per-class or per-row flags.
BoolArray: TypeAlias = NDArray[np.bool_]
#: Labels (Python strings) per class or per row.
ObjectArray: TypeAlias = NDArray[np.object_]
