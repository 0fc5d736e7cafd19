"""``reinforce-ada plot``: the metrics of one or more runs drawn into ``training.png``
(:func:`reinforce_ada.plotting.plot_runs`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from reinforce_ada.errors import UsageError


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("runs", nargs="+", metavar="RUN", help="run folders (each with metrics.jsonl)")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="folder for training.png (default for one run: its plots/ folder; several runs: required)")


def run(args: argparse.Namespace) -> int:
    from reinforce_ada.outputs import refuse_unsafe_outputs
    from reinforce_ada.plotting import plot_runs

    out = args.out
    if out is None:
        if len(args.runs) > 1:
            raise UsageError(f"plotting {len(args.runs)} runs together: give --out DIR for their training.png")
        out = Path(args.runs[0]) / "plots"
    # one run's plot is redrawn in its own plots/ folder; nothing else of a run is written over
    redraws = [Path(args.runs[0]) / "plots" / "training.png"] if len(args.runs) == 1 else []
    refuse_unsafe_outputs({"--out": Path(out) / "training.png"}, [], replaces=redraws)
    print(f"wrote {plot_runs(args.runs, out).resolve()}")
    return 0
