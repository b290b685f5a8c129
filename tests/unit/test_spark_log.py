"""Spark's JVM log goes to its file, not to the terminal of a run or a report."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from analysis.spark.reconcile import SPARK_LOG_ENV

SESSION = """
from analysis.spark.reconcile import spark_session
spark = spark_session("local[1]", app_name="spark-log-test")
assert spark.range(10).count() == 10
spark.stop()
"""


def test_a_session_logs_to_its_file_and_leaves_the_terminal_quiet(tmp_path: Path) -> None:
    log = tmp_path / "spark.log"
    env = os.environ | {SPARK_LOG_ENV: str(log), "PYTHONPATH": os.getcwd()}
    done = subprocess.run(
        [sys.executable, "-c", SESSION], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    terminal = done.stdout + done.stderr
    for chatter in (" WARN ", "log4j", "Setting default log level"):
        assert chatter not in terminal, terminal[-3000:]
    assert log.is_file()
