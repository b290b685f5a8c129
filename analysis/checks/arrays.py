"""Arrow columns as numpy, and index arithmetic over them that stays defined on empty runs.

`np.where(i >= 0, values[np.maximum(i, 0)], fill)` evaluates both branches, so it raises
IndexError when `values` is empty (a run whose read-back holds nothing, a transaction journal
with no rows) even though no index is >= 0. Every lookup by a possibly-missing index goes
through `gather` instead.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["SLOT_BITS", "filled_ints", "gather", "slot_of"]

SLOT_BITS = 40  # a record's slot is partition << 40 | offset (offsets stay far below 2^40)


def slot_of(partition: np.ndarray, offset: np.ndarray) -> np.ndarray:
    """partition << SLOT_BITS | offset, one int64 per record location."""
    slots: np.ndarray = (partition << SLOT_BITS) + offset
    return slots


def filled_ints(column: pa.ChunkedArray | pa.Array, fill: int) -> np.ndarray:
    """An integer column as int64 numpy, nulls as `fill`."""
    values = pc.fill_null(column.cast(pa.int64()), fill).to_numpy(zero_copy_only=False)
    ints: np.ndarray = values.astype(np.int64, copy=False)
    return ints


def gather(values: np.ndarray, index: np.ndarray, fill: Any) -> np.ndarray:
    """values[index] where index >= 0, `fill` where index < 0; defined when values is empty
    (then every index must be < 0)."""
    index = np.asarray(index)
    out = np.full(index.shape, fill, dtype=np.result_type(values.dtype, fill))
    present = index >= 0
    if present.any():
        out[present] = values[index[present]]
    return out
