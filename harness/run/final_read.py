"""The last phase of a repetition: after the final heal, wait (bounded) for a full ISR, then
read every partition to its high watermark (both isolation levels for transactional runs) and
record what the read-back reached."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from harness.rundir import layout
from harness.rundir.events import EventLog, PhaseEvent, ReadbackDone
from harness.workload.readback import read_back

if TYPE_CHECKING:
    from harness.platform.cluster import KafkaCluster
    from harness.run.runner import Progress, Repetition, RepetitionSummary

__all__ = ["read_back_all"]

TOPIC = layout.TOPIC
log = logging.getLogger("kafka_chaos")


def read_back_all(
    repetition: Repetition,
    cluster: KafkaCluster,
    events: EventLog,
    summary: RepetitionSummary,
    progress: Progress,
) -> None:
    """Wait (bounded) for a full ISR everywhere, then read every partition to its HW."""
    spec = repetition.cell.spec
    progress.phase("waiting for full ISR")
    started = time.monotonic()
    full_isr = True
    try:
        cluster.wait_full_isr(TOPIC, timeout_s=spec.faults.final_heal_timeout_s)
    except Exception as exc:
        full_isr = False
        log.warning("no full ISR after heal: %s", exc)
    waited = time.monotonic() - started
    progress.phase("read-back")
    events.write(PhaseEvent(phase="readback-start"))
    extra: dict[str, Any] = {}
    isolation = "read_uncommitted"
    if spec.workload.transactions is not None:
        # Both views of the log: what read_committed may see (readback.parquet, judged) and
        # everything written (the evidence telling a hidden record from a missing one).
        uncommitted = read_back(
            cluster.bootstrap_servers,
            TOPIC,
            spec.topic.partitions,
            repetition.run_dir / layout.READBACK_UNCOMMITTED,
        )
        isolation = "read_committed"
        extra["uncommitted"] = {
            "complete": uncommitted.complete,
            "records": uncommitted.records,
            "high_watermarks": uncommitted.high_watermarks,
            "seconds": round(uncommitted.seconds, 3),
        }
    result = read_back(
        cluster.bootstrap_servers,
        TOPIC,
        spec.topic.partitions,
        repetition.run_dir / layout.READBACK,
        isolation=isolation,
    )
    extra["isolation"] = isolation
    extra["end_offsets"] = result.end_offsets
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
            **extra,
        )
    )
    summary.read, summary.readback_complete = result.records, result.complete
