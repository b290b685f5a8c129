"""The results dataset: one Parquet row per repetition, for data teams to query across runs.

Written as a Hive-partitioned Parquet dataset (`experiment=<name>/kafka_version=<v>/`), so
Spark, pyarrow, DuckDB or pandas read one experiment or one version without opening the rest.
Columns: identity (cell, repetition, run_dir), the config settings, the experiment's axes as a
map, status and verdict, every count of COUNT_NAMES, loss and loss_rate, the sensitivity
check, and timing (start, end and duration of the repetition from spec.json).
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import pyarrow as pa
import pyarrow.dataset as ds

from analysis.crossrun.summary import SETTINGS
from analysis.judge.outcomes import CellVerdict
from analysis.model.anomalies import COUNT_NAMES, CountName
from analysis.model.results import RunResult
from harness.rundir.config import setting_text
from harness.rundir.spec import RunSpec

__all__ = ["DATASET_DIR", "RESULTS_SCHEMA", "results_partitioning", "write_dataset"]

DATASET_DIR: Final = "results"  # under the report folder
PARTITION_COLUMNS: Final = ("experiment", "kafka_version")
UNKNOWN_VERSION: Final = "unknown"

# One repetition's row: RESULTS_SCHEMA's column → its value (`axes` as (key, value) pairs).
DatasetRow = dict[str, str | int | float | bool | list[tuple[str, str]] | None]

RESULTS_SCHEMA: Final = pa.schema(
    [
        ("experiment", pa.string()),
        ("kafka_version", pa.string()),
        ("cell", pa.string()),
        ("repetition", pa.int32()),
        ("run_dir", pa.string()),
        ("fault", pa.string()),
        *((name, pa.string()) for name in SETTINGS),
        ("axes", pa.map_(pa.string(), pa.string())),
        ("status", pa.string()),
        ("verdict", pa.string()),
        *((name, pa.int64()) for name in COUNT_NAMES),
        (CountName.LOSS, pa.int64()),
        ("loss_rate", pa.float64()),
        ("sensitivity_passed", pa.bool_()),
        ("started_at_us", pa.int64()),
        ("ended_at_us", pa.int64()),
        ("duration_s", pa.float64()),
    ]
)


def dataset_rows(results: Sequence[RunResult], cells: Sequence[CellVerdict]) -> list[DatasetRow]:
    """One row per repetition in RESULTS_SCHEMA's columns."""
    verdict_of = {r.run_dir: r.verdict.value for c in cells for r in c.repetitions}
    return [_row(result, verdict_of.get(result.run_dir)) for result in results]


def write_dataset(
    results: Sequence[RunResult], cells: Sequence[CellVerdict], out_dir: Path
) -> Path:
    """Write the dataset to out_dir/DATASET_DIR (replacing an earlier one); return that path."""
    root = Path(out_dir) / DATASET_DIR
    shutil.rmtree(root, ignore_errors=True)
    table = pa.Table.from_pylist(dataset_rows(results, cells), schema=RESULTS_SCHEMA)
    ds.write_dataset(
        table,
        root,
        format="parquet",
        partitioning=results_partitioning(),
        basename_template="part-{i}.parquet",
        existing_data_behavior="overwrite_or_ignore",
    )
    return root


def results_partitioning() -> ds.Partitioning:
    """The dataset's folders: experiment=<name>/kafka_version=<v>/ (Hive style)."""
    fields = [RESULTS_SCHEMA.field(name) for name in PARTITION_COLUMNS]
    return ds.partitioning(pa.schema(fields), flavor="hive")


def _row(result: RunResult, verdict: str | None) -> DatasetRow:
    """The dataset row of one repetition."""
    counts = result.counts or {}
    acked = counts.get(CountName.ACKED)
    started, ended = _timing(Path(result.run_dir))
    config = result.config
    return {
        "experiment": result.experiment,
        "kafka_version": config.kafka_version or UNKNOWN_VERSION,
        "cell": result.cell,
        "repetition": result.repetition,
        "run_dir": result.run_dir,
        "fault": config.fault_class,
        **{name: _text(getattr(config, name)) for name in SETTINGS},
        "axes": [(str(k), str(v)) for k, v in sorted(result.axes.items())],
        "status": result.status.value,
        "verdict": verdict,
        **{name: counts.get(name) for name in COUNT_NAMES},
        CountName.LOSS: result.loss,
        "loss_rate": result.loss / acked if result.loss is not None and acked else None,
        "sensitivity_passed": None if result.sensitivity is None else result.sensitivity.passed,
        "started_at_us": started,
        "ended_at_us": ended,
        "duration_s": None if started is None or ended is None else (ended - started) / 1e6,
    }


def _text(value: object) -> str | None:
    """A setting as text (bools lower-case, like the experiment files spell them)."""
    return None if value is None else setting_text(value)


def _timing(run_dir: Path) -> tuple[int | None, int | None]:
    """(started_at_us, ended_at_us) from spec.json; None where it lacks them or is unreadable."""
    try:
        spec = RunSpec.read(run_dir)
    except (OSError, ValueError):
        return None, None
    return spec.started_at_us, spec.ended_at_us
