"""Java property files as users keep them, read back against an oracle: generated key-value
pairs written with every separator style, comments, blank lines and continued lines."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from harness.experiment.properties import (
    HARNESS_KEYS,
    PRODUCER_FIELDS,
    producer_settings,
    read_properties,
)

KEYS = st.from_regex(r"[a-z][a-z0-9]{0,6}(\.[a-z0-9]{1,6}){0,3}", fullmatch=True)
VALUES = st.from_regex(r"[A-Za-z0-9_.,/-]{0,12}", fullmatch=True)
SEPARATORS = st.sampled_from(["=", " = ", ":", ": ", " "])


@given(
    st.dictionaries(KEYS, VALUES, max_size=8),
    st.lists(SEPARATORS, min_size=8, max_size=8),
    st.lists(st.sampled_from(["", "# a comment", "! another", "   "]), min_size=9, max_size=9),
    st.lists(st.booleans(), min_size=8, max_size=8),
)
def test_every_pair_written_is_read_back(pairs, separators, noise, continued) -> None:
    lines = [noise[0]]
    for i, (key, value) in enumerate(pairs.items()):
        separator = separators[i] if value else "="  # `key ` alone would have no value
        if continued[i] and len(value) > 1:  # a value split over two lines
            lines += [f"{key}{separator}{value[:1]}\\", f"    {value[1:]}"]
        else:
            lines.append(f"{key}{separator}{value}")
        lines.append(noise[i + 1])
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "p.properties"
        path.write_text("\n".join(lines) + "\n")
        assert read_properties(path) == pairs


@given(st.dictionaries(KEYS | st.sampled_from(sorted({*PRODUCER_FIELDS, *HARNESS_KEYS})), VALUES))
def test_each_setting_lands_once_where_its_name_says(pairs) -> None:
    settings = producer_settings(pairs, "p.properties")
    # The harness's own keys are left out; every other key goes to its field or to config.
    assert sorted(s.origin.split(": ", 1)[1] for s in settings) == sorted(
        key for key in pairs if key not in HARNESS_KEYS
    )
    for setting in settings:
        key = setting.origin.split(": ", 1)[1]
        assert setting.path == PRODUCER_FIELDS.get(key, f"producer.config.{key}")
