"""Nodes that stopped with no fault acting on them, noted. A broker that exits on its own is
worth a look, and its log says why: a fatal error, or a documented shutdown such as a broker
that could not register within initial.broker.registration.timeout.ms after a long pause. The
liveness bounds count the time it stood stopped as a crash's (analysis.checks.windows)."""

from __future__ import annotations

from analysis.checks.windows import acting, final_heal_us, stopped_spans
from analysis.judge.history import timeline_t
from analysis.judge.outcomes import Finding, Verdict
from analysis.model.evidence import RunEvidence

__all__ = ["stopped_notes", "unexplained_stops"]


def unexplained_stops(events: RunEvidence) -> list[tuple[str, int, int]]:
    """Each span the sampler saw a node stopped (checks.windows.stopped_spans: host, last seen
    up, seen up again or the final heal) that overlaps no fault on that node, from its
    injection to its heal; in time order; none for a run whose samples did not record stopped
    nodes."""
    faults = acting(events)
    return [
        (host, down, up)
        for host, down, up in stopped_spans(events.samples, final_heal_us(events))
        if not any(host in f.hosts and begin <= up and down <= end for f, begin, end in faults)
    ]


def stopped_notes(events: RunEvidence, origin_us: float) -> list[Finding]:
    """A PASS note for each of the run's unexplained_stops, in time order."""
    final = final_heal_us(events)
    notes = []
    for host, down, up in unexplained_stops(events):
        until = "the final heal" if up == final else timeline_t(up, origin_us)
        detail = (
            f"{host} stopped with no fault acting on it: last seen up at "
            f"{timeline_t(down, origin_us)}, stopped until {until} (its log says why; the "
            "liveness bounds count that time as a crash's)"
        )
        notes.append(Finding(None, Verdict.PASS, detail))
    return notes
