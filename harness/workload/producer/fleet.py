"""Several client programs at once (`workload.producers` > 1 with the Java client): each its
own process, journal slot (msg_id base, key prefix, journal files) and share of the workload,
as the librdkafka ProducerFleet runs recorders; `finalize` merges their journals.

The runner sees one `Producing`: summed live stats, one summed recorder_tally, one error (the
first producer's that made the run incomplete).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Sequence

from harness.rundir.events import EventLog, ProducerTally, RecorderTally
from harness.workload.producer.command import CommandProducer, run_error
from harness.workload.producer.librdkafka import summed_stats
from harness.workload.producer.recorder import DeliveryTally, RecorderStats

__all__ = ["CommandFleet"]


class CommandFleet:
    """n CommandProducers run side by side, seen as one."""

    def __init__(self, producers: Sequence[CommandProducer]):
        self.producers = list(producers)

    @property
    def stats(self) -> RecorderStats:
        """Sends and outcomes so far, summed over the producers."""
        return summed_stats([p.stats for p in self.producers])

    def start(self) -> None:
        """Nothing to create before the workload starts: each program starts in run()."""

    def run(self, stop: threading.Event) -> RecorderStats:
        """Run every program to its end (see CommandProducer.run), each in a thread."""
        threads = [
            threading.Thread(target=p.run, args=(stop,), name=f"client-{i}", daemon=True)
            for i, p in enumerate(self.producers)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return self.stats

    def close(self, events: EventLog) -> Exception | None:
        """Finish every producer, then write one summed tally (and the first client_config);
        the first producer's error, or None. Never raises."""
        outcomes = [p.finish() for p in self.producers]
        summed = DeliveryTally()
        for producer in self.producers:
            summed.ok += producer.tally.ok
            summed.failed += producer.tally.failed
            summed.indeterminate += producer.tally.indeterminate
        journal_error = next((e for e, _ in outcomes if e is not None), None)
        per_producer = [
            ProducerTally(producer=i, reports=p.tally.as_dict(), journal_error=error, problem=why)
            for i, (p, (error, why)) in enumerate(zip(self.producers, outcomes, strict=True))
        ]
        with contextlib.suppress(Exception):
            events.write(
                RecorderTally(
                    reports=summed.as_dict(), journal_error=journal_error, producers=per_producer
                )
            )
            config = next((c for p in self.producers if (c := p.config_event())), None)
            if config is not None:
                events.write(config)
        for index, (error, problem) in enumerate(outcomes):
            if error is not None or problem is not None:
                return run_error(error, problem and f"producer {index}: {problem}")
        return None
