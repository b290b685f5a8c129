"""Index arithmetic over numpy columns that stays defined on empty runs.

`np.where(i >= 0, values[np.maximum(i, 0)], fill)` evaluates both branches, so it raises
IndexError when `values` is empty (a run whose read-back holds nothing, a transaction journal
with no rows) even though no index is >= 0. Every lookup by a possibly-missing index goes
through `gather` instead.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["gather"]


def gather(values: np.ndarray, index: np.ndarray, fill: Any) -> np.ndarray:
    """values[index] where index >= 0, `fill` where index < 0; defined when values is empty
    (then every index must be < 0)."""
    index = np.asarray(index)
    out = np.full(index.shape, fill, dtype=np.result_type(values.dtype, fill))
    present = index >= 0
    if present.any():
        out[present] = values[index[present]]
    return out
