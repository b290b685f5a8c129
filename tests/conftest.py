"""Hypothesis profiles for every test package.

`ci` (the default) keeps the property tests near a minute in `make test`; `deep` is what
`make fuzz` runs (HYPOTHESIS_PROFILE=deep): 5,000 examples a property, tens of thousands in
all. Neither has a deadline: a Spark-backed example or a slow CI machine must not fail on time
alone. A failing example either profile finds is kept as an explicit `@example` beside its
property.
"""

import os

from hypothesis import HealthCheck, Phase, settings

settings.register_profile(
    "ci",
    max_examples=200,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "deep",
    max_examples=5_000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
# make mutation: every mutant runs the property tests, so they must be few, and the same for
# every mutant (derandomized) so that a kill is repeatable. No shrinking: a failing example is
# all a kill needs, and shrinking one takes longer than mutmut waits for a mutant, which would
# count a mutant the property caught as a timeout.
settings.register_profile(
    "mutation",
    max_examples=30,
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
