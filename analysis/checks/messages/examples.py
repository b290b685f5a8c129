"""What the report shows of a run's classes: example rows, per-partition counts, and the
missing messages handed to the attribution."""

from __future__ import annotations

from typing import Any

import numpy as np

from analysis.checks.messages.classes import Masks
from analysis.checks.messages.columns import NO_ID, NULL, Reads
from analysis.checks.messages.index import Messages
from analysis.model.anomalies import ANOMALY_NAMES, AT_ACKED_OFFSET, EXAMPLE_FIELDS, AnomalyName
from analysis.model.results import ExampleRow, ExampleRows

MAX_EXAMPLES = 20


MAX_MISSING = 100_000  # missing messages per run handed to the attribution (the rest: counted)


def identity_facts(messages: Messages) -> dict[str, int]:
    """The msg_ids acked.parquet holds more than once, and its rows without a msg_id."""
    identified = messages.msg_id != NO_ID
    return {
        "repeated_msg_ids": int(np.count_nonzero(identified & (messages.acked_rows > 1))),
        "unidentified_rows": int(messages.acked_rows[~identified].sum()),
    }


def by_partition(mask: np.ndarray, partition: np.ndarray) -> dict[str, int]:
    """How many masked messages each acked partition holds ("unknown": none)."""
    values, counts = np.unique(partition[mask], return_counts=True)
    return {
        ("unknown" if p == NULL else str(p)): c
        for p, c in zip(values.tolist(), counts.tolist(), strict=True)
    }


def examples_of(
    classes: Masks,
    messages: Messages,
    reads: Reads,
    reordered: dict[str, np.ndarray],
) -> ExampleRows:
    """Up to MAX_EXAMPLES rows per class, lowest msg_id first (none last), with the fields
    EXAMPLE_FIELDS names: at the acked location or where it was read, as the class says."""
    examples: ExampleRows = {name: [] for name in ANOMALY_NAMES}
    for name, mask in classes.items():
        chosen = np.flatnonzero(mask)[:MAX_EXAMPLES]  # messages are in msg_id order
        examples[name] = [_message_example(name, messages, reads, i) for i in chosen.tolist()]
    examples[AnomalyName.REORDERED] = reordered_examples(reordered, reads)
    return examples


def reordered_examples(reordered: dict[str, np.ndarray], reads: Reads) -> list[ExampleRow]:
    """The example rows of the first MAX_EXAMPLES records read out of order, by msg_id (none
    last), partition and offset (`example_order`)."""
    order = np.lexsort((reordered["offset"], reordered["partition"], reordered["msg_id"]))
    return [
        {f: value_of(reordered[f][i]) for f in EXAMPLE_FIELDS[AnomalyName.REORDERED] if f != "key"}
        | {"key": reads.key[int(reordered["record"][i])].as_py()}
        for i in order[:MAX_EXAMPLES].tolist()
    ]


def example_order(row: ExampleRow) -> tuple[bool, int, int, int]:
    """The order examples are chosen in: lowest msg_id first (none last), then partition and
    offset (None as -1: a message's row names at most one location)."""
    msg_id = row["msg_id"]
    return (
        msg_id is None,
        0 if msg_id is None else msg_id,
        -1 if row.get("partition") is None else row["partition"],
        -1 if row.get("offset") is None else row["offset"],
    )


def _message_example(name: AnomalyName, m: Messages, reads: Reads, i: int) -> ExampleRow:
    """The example row of message i in class name: at its acked location, or where it was
    first read."""
    if name in AT_ACKED_OFFSET:
        partition, offset = value_of(m.partition[i], NULL), value_of(m.offset[i], NULL)
    elif (record := int(m.first_read[i])) >= 0:
        partition, offset = int(reads.partition[record]), int(reads.offset[record])
    else:
        partition = offset = None
    return {
        "msg_id": value_of(m.msg_id[i]),
        "partition": partition,
        "offset": offset,
        "readback_msg_id_at_offset": value_of(m.holder[i]),
        "reads": int(m.reads[i]),
    }


def value_of(value: Any, none: int = NO_ID) -> int | None:
    """value as a Python int, None where it is the none marker."""
    value = int(value)
    return None if value == none else value


def missing_of(
    loss: np.ndarray, messages: Messages
) -> list[tuple[int | None, int | None, int | None]]:
    """Up to MAX_MISSING missing acknowledged messages, lowest msg_id first: (msg_id, acked
    partition, acked offset), for the attribution."""
    chosen = np.flatnonzero(loss)[:MAX_MISSING]
    return [
        (
            value_of(messages.msg_id[i]),
            value_of(messages.partition[i], NULL),
            value_of(messages.offset[i], NULL),
        )
        for i in chosen.tolist()
    ]
