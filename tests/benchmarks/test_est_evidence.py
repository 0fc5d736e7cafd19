"""The Est evidence in docs/benchmarks.md is what the committed compare reports say: its summary table is
benchmarks/est_summary.py's output on them, and each cell's interval is the t-interval of the report's own paired
differences (so a report edited by hand, or a table pasted from another run, fails here)."""

from __future__ import annotations

import importlib.util
import json
import statistics
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BEDS = ("recurring", "filtered", "filtered-low", "addition", "mixed")
T_975_4 = 2.776  # Student t, 97.5% quantile, 4 degrees of freedom (5 seeds), to the 3 decimals compare's table has


def load_summary():
    spec = importlib.util.spec_from_file_location("est_summary", ROOT / "benchmarks" / "est_summary.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_docs_table_is_the_summary_of_the_committed_reports(capsys):
    summary = load_summary()
    summary.main(list(BEDS))
    table = capsys.readouterr().out.strip()
    docs = (ROOT / "docs" / "benchmarks.md").read_text()
    assert table in docs, "docs/benchmarks.md's Est table differs from `python benchmarks/est_summary.py " \
                          + " ".join(BEDS) + "`"


@pytest.mark.parametrize("bed", BEDS)
def test_each_reported_interval_is_the_t_interval_of_its_paired_differences(bed):
    report = json.loads((ROOT / "benchmarks" / "results" / f"compare_est_{bed}.json").read_text())
    for name, entry in report["strategies"].items():
        if name == report["baseline"]:
            continue
        assert entry["paired"]["seeds"] == [0, 1, 2, 3, 4]
        for budget in ("at_steps", "at_tokens", "at_seconds"):
            diffs = entry["paired"][budget]
            mean, half = entry["paired_mean_ci95"][budget]
            assert mean == pytest.approx(statistics.fmean(diffs), abs=1e-12)
            assert half == pytest.approx(T_975_4 * statistics.stdev(diffs) / len(diffs) ** 0.5, rel=1e-6)
