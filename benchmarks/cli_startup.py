"""Command-line start-up: how long ``reinforce-ada --help``, ``train --help`` and a one-line config error take.

What it measures: the wall time of the installed ``reinforce-ada`` entry point, each command run ``--repeats`` times in
a fresh process (the median and the fastest reported), beside ``python -c "import torch"`` in the same run -- the
cost these commands avoid by never importing torch. Each command is also run once under ``python -c`` to record
whether torch, transformers or numpy got imported. The goal: every command answers in under a second on this
project's machine.

    python benchmarks/cli_startup.py                        # writes benchmarks/results/cli_startup.json
    python benchmarks/cli_startup.py --repeats 9 --out /tmp/cli.json
    git worktree add /tmp/before 286e45b && python benchmarks/cli_startup.py --baseline /tmp/before

``--baseline DIR`` also runs every command on the package in DIR (another checkout, put first on ``PYTHONPATH``),
interleaved with this tree's runs, so the two columns share the machine's load.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

NEUTRAL = tempfile.gettempdir()

COMMANDS = {
    "--help": ["--help"],
    "train --help": ["train", "--help"],
    "eval --help": ["eval", "--help"],
    "config error (train --max-steps 0)": ["train", "--max-steps", "0"],
    "config error (YAML, a misspelt field)": ["train", "--config", "{bad_yaml}"],
}
"""What a user types after ``reinforce-ada``; ``{bad_yaml}`` is a YAML file with a misspelt field."""

_LOADED = ("import json, sys\nfrom reinforce_ada.cli import main\ntry:\n    main({argv!r})\nexcept SystemExit:\n"
           "    pass\nprint(json.dumps({{m: m in sys.modules for m in ('torch', 'transformers', 'numpy')}}), file=sys.stderr)")


def environment(package_dir: str | None) -> dict[str, str]:
    """This process's environment, with ``package_dir`` first on ``PYTHONPATH`` when given."""
    if package_dir is None:
        return dict(os.environ)
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_dir, os.environ.get("PYTHONPATH")]))}


def timed(command: list[str], repeats: int, trees: dict[str, str | None]) -> dict[str, list[float]]:
    """Wall seconds of ``command`` per tree, the trees' runs interleaved; run from a neutral folder, so the package
    comes from the install or ``PYTHONPATH``, never the current directory."""
    times: dict[str, list[float]] = {name: [] for name in trees}
    for _ in range(repeats):
        for name, package_dir in trees.items():
            start = time.perf_counter()
            subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=NEUTRAL,
                           env=environment(package_dir))
            times[name].append(time.perf_counter() - start)
    return times


def loaded_modules(argv: list[str], package_dir: str | None) -> dict[str, bool]:
    done = subprocess.run([sys.executable, "-c", _LOADED.format(argv=argv)], capture_output=True, text=True,
                          cwd=NEUTRAL, env=environment(package_dir))
    return json.loads(done.stderr.strip().splitlines()[-1])


def summary(times: list[float]) -> dict[str, float]:
    return {"median_s": round(statistics.median(times), 3), "min_s": round(min(times), 3)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="runs of each command (default: %(default)s)")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "cli_startup.json"),
                        help="the JSON file to write (default: benchmarks/results/cli_startup.json)")
    parser.add_argument("--baseline", metavar="DIR", help="also time the package of this checkout (e.g. a git "
                                                          "worktree of an earlier commit), side by side")
    args = parser.parse_args(argv)
    trees = {"this tree": None, **({"baseline": str(Path(args.baseline).resolve())} if args.baseline else {})}
    entry = shutil.which("reinforce-ada") or str(Path(sys.executable).with_name("reinforce-ada"))
    bad_yaml = Path(args.out).with_suffix(".bad.yaml")
    bad_yaml.parent.mkdir(parents=True, exist_ok=True)
    bad_yaml.write_text("sampler:\n  exit_rul: positive\n")
    rows = []
    try:
        for name, words in COMMANDS.items():
            words = [w.format(bad_yaml=bad_yaml) for w in words]
            times = timed([entry, *words], args.repeats, trees)
            row = {"command": f"reinforce-ada {' '.join(words)}", "case": name}
            for tree, package_dir in trees.items():
                row[tree] = {**summary(times[tree]), "imports": loaded_modules(words, package_dir)}
                print(f"{name:40s} {tree:9s} median {row[tree]['median_s']:.2f} s  min {row[tree]['min_s']:.2f} s  "
                      f"imports {row[tree]['imports']}", flush=True)
            rows.append(row)
    finally:
        bad_yaml.unlink(missing_ok=True)
    torch_times = timed([sys.executable, "-c", "import torch"], args.repeats, {"python": None})["python"]
    torch_row = {"command": f"{Path(sys.executable).name} -c 'import torch'", **summary(torch_times)}
    print(f"{'python -c import torch (for comparison)':50s} median {torch_row['median_s']:.2f} s  "
          f"min {torch_row['min_s']:.2f} s")
    Path(args.out).write_text(json.dumps({
        "made_with": " ".join(["python benchmarks/cli_startup.py", *(argv if argv is not None else sys.argv[1:])]),
        "baseline": None if args.baseline is None else {"path": trees["baseline"], "commit": subprocess.run(
            ["git", "-C", args.baseline, "describe", "--always", "--dirty"], capture_output=True, text=True).stdout.strip()},
        "load_average": list(os.getloadavg()), "cpus": os.cpu_count(), "repeats": args.repeats,
        "commands": rows, "import_torch": torch_row}, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
