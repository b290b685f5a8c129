"""How many generated examples a property test runs: a share of the loaded hypothesis profile.

A property whose examples are costlier (a Spark job, a FUSE mount, a Java program) runs a
fixed share of the profile's `max_examples` rather than a fixed count, so `make fuzz`'s deep
profile deepens it as it deepens the rest and `make mutation`'s small profile keeps it cheap.
"""

from __future__ import annotations

from hypothesis import settings


def examples(share: float, at_least: int = 5) -> int:
    """`share` of the loaded profile's max_examples, never fewer than `at_least`."""
    return max(at_least, round(settings.default.max_examples * share))
