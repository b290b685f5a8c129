"""The last phase of a repetition: after the final heal, wait (bounded) for a full ISR, then
read every partition to its high watermark (both isolation levels for transactional runs) and
record what the read-back reached, for any topic and run directory."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from harness.rundir import layout
from harness.rundir.events import EventLog, PhaseEvent, ReadbackDone, UncommittedView
from harness.workload.readback import Decoder, Readback, read_back
from harness.workload.values import decode_value

if TYPE_CHECKING:
    from harness.platform.cluster import KafkaCluster

__all__ = ["read_back_topic"]

log = logging.getLogger("kafka_chaos")


def read_back_topic(
    cluster: KafkaCluster,
    topic: str,
    partitions: int,
    run_dir: Path,
    events: EventLog,
    *,
    full_isr_timeout_s: float,
    transactional: bool = False,
    phase: Callable[[str], None] = lambda name: None,
    decode: Decoder = decode_value,
) -> Readback:
    """The final read of any topic into `run_dir`: wait up to `full_isr_timeout_s` for a full
    ISR, read every partition to its HW (both isolation levels when `transactional`) and write
    the `readback` event; `phase` hears each phase as it begins."""
    phase("waiting for full ISR")
    started = time.monotonic()
    full_isr = True
    try:
        cluster.wait_full_isr(topic, timeout_s=full_isr_timeout_s)
    except Exception as exc:
        full_isr = False
        log.warning("no full ISR after heal: %s", exc)
    waited = time.monotonic() - started
    phase("read-back")
    events.write(PhaseEvent(phase="readback-start"))
    view: dict[str, UncommittedView] = {}  # set only in a transactional run's event
    isolation = "read_uncommitted"
    if transactional:
        # Both views of the log: what read_committed may see (readback.parquet, judged) and
        # everything written (the evidence telling a hidden record from a missing one).
        uncommitted = read_back(
            cluster.bootstrap_servers, topic, partitions, run_dir / layout.READBACK_UNCOMMITTED
        )
        isolation = "read_committed"
        view["uncommitted"] = UncommittedView(
            complete=uncommitted.complete,
            records=uncommitted.records,
            high_watermarks=uncommitted.high_watermarks,
            seconds=round(uncommitted.seconds, 3),
        )
    result = read_back(
        cluster.bootstrap_servers,
        topic,
        partitions,
        run_dir / layout.READBACK,
        isolation=isolation,
        decode=decode,
    )
    events.write(
        ReadbackDone(
            waited_s=round(waited, 3),
            full_isr=full_isr,
            log_start_offsets=result.log_start_offsets,
            high_watermarks=result.high_watermarks,
            complete=result.complete,
            records=result.records,
            seconds=round(result.seconds, 3),
            log_start_is_zero=all(v == 0 for v in result.log_start_offsets.values()),
            isolation=isolation,
            end_offsets=result.end_offsets,
            **view,
        )
    )
    return result
