"""The SmolLM2-135M grid (benchmarks/smollm2_compare.sh, docs/benchmarks.md "A real pretrained LM on the CPU") as far
as it has run: its report in benchmarks/results/smollm2_bed/grid_partial/ is what compare's analysis makes of the
finished runs kept in benchmarks/results/smollm2_bed/grid_runs/ -- none left out, none added, every paired figure
the same -- and the figures docs/benchmarks.md and the README quote are that report's. A report edited by hand, a
kept run changed after the report, or a number pasted from another run fails here."""

from __future__ import annotations

import json
from pathlib import Path

from reinforce_ada.research.compare.report import analyse, jsonable
from reinforce_ada.research.compare.runs import read_run

ROOT = Path(__file__).resolve().parents[2]
BED = ROOT / "benchmarks" / "results" / "smollm2_bed"
STRATEGIES = ["grpo-n8", "ada-est", "grpo", "ada-est-n4"]


def kept_runs() -> dict[tuple[str, float, int], dict]:
    manifest = json.loads((BED / "grid_runs" / "compare.json").read_text())
    assert list(manifest["strategies"]) == STRATEGIES and manifest["lrs"] == [1e-5]
    runs = {}
    for strategy in STRATEGIES:
        for seed in manifest["seeds"]:
            folder = BED / "grid_runs" / f"{strategy}-lr1e-05-seed{seed}"
            if (folder / "summary.json").is_file():
                runs[(strategy, 1e-5, seed)] = read_run(folder)
    return runs


def test_the_partial_report_is_compares_analysis_of_the_kept_runs():
    committed = json.loads((BED / "grid_partial" / "report.json").read_text())
    runs = kept_runs()
    assert len(committed["runs"]) == len(runs) >= 8
    ours = jsonable(analyse(runs, STRATEGIES, [1e-5], "grpo-n8", "tokens", "same"))
    assert json.loads(json.dumps(ours["strategies"])) == committed["strategies"]
    assert json.loads(json.dumps(ours["runs"])) == committed["runs"]


def test_the_documented_figures_are_the_partial_reports():
    report = json.loads((BED / "grid_partial" / "report.json").read_text())
    docs = (ROOT / "docs" / "benchmarks.md").read_text()
    seeds = sorted({run["seed"] for run in report["runs"]})
    finished = f"{len(report['runs'])} of 40 runs"
    assert finished in docs and finished in (ROOT / "README.md").read_text()
    for strategy in ("ada-est", "grpo", "ada-est-n4"):
        entry = report["strategies"][strategy]
        assert entry["paired"]["seeds"] == seeds, strategy
        for key in ("at_steps", "at_tokens", "at_seconds"):
            mean, half = entry["paired_mean_ci95"][key]
            assert f"{mean:+.3f} ± {half:.3f}" in docs, (strategy, key)
