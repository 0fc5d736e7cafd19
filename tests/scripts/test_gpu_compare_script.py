"""scripts/gpu_compare.py, the GPU evidence run's helper: a wheel carried in two checksummed halves is joined only when
both are there and intact, and the probe's rule picks the prompt set it says it picks.

The whole ``bash scripts/gpu_compare.sh --dry-run`` (parts, probe and compare on the CPU with tiny shapes) is a step
of ``.ci/run``.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HELPER = ROOT / "scripts" / "gpu_compare.py"


def helper(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(HELPER), *args], capture_output=True, text=True, timeout=60)


@pytest.fixture()
def halves(tmp_path):
    wheel, extra = tmp_path / "model-1.0-py3-none-any.whl", tmp_path / "dep-1.0-py3-none-any.whl"
    wheel.write_bytes(bytes(range(256)) * 4001)  # an odd size: the halves differ by a byte
    extra.write_bytes(b"small wheel")
    assert helper("parts", "split", str(wheel), str(tmp_path / "p1"), str(tmp_path / "p2"), str(extra)).returncode == 0
    return tmp_path, wheel.read_bytes()


def test_the_halves_join_into_the_wheel_only_when_both_are_stashed_and_intact(halves):
    tmp_path, data = halves
    store, out = tmp_path / "stash", tmp_path / "wheels"
    assert helper("parts", "stash", str(tmp_path / "p1"), str(store)).returncode == 0
    missing = helper("parts", "assemble", str(store), str(out))
    assert missing.returncode == 1 and "model-1.0-py3-none-any.whl.part2 missing or damaged" in missing.stderr
    assert helper("parts", "stash", str(tmp_path / "p2"), str(store)).returncode == 0
    joined = helper("parts", "assemble", str(store), str(out))
    assert joined.returncode == 0, joined.stderr
    assert joined.stdout.split() == [str(out / "model-1.0-py3-none-any.whl"), str(out / "dep-1.0-py3-none-any.whl")]
    assert (out / "model-1.0-py3-none-any.whl").read_bytes() == data


def test_a_damaged_half_is_not_stashed_and_the_wheel_not_joined(halves):
    tmp_path, _ = halves
    part = tmp_path / "p2" / "model-1.0-py3-none-any.whl.part2"
    part.write_bytes(part.read_bytes()[:-1] + b"x")  # one byte changed in transit
    store = tmp_path / "stash"
    assert helper("parts", "stash", str(tmp_path / "p1"), str(store)).returncode == 0
    damaged = helper("parts", "stash", str(tmp_path / "p2"), str(store))
    assert damaged.returncode == 1 and "does not match its SHA-256; not stashed" in damaged.stderr
    assert helper("parts", "assemble", str(store), str(tmp_path / "wheels")).returncode == 1


def test_the_probe_rule_picks_the_learnable_set_where_most_grpo_groups_lack_signal():
    spec = importlib.util.spec_from_file_location("gpu_compare", HELPER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    figures = {"hopeless": {"solvable": 0.0, "signal": 0.0}, "easy": {"solvable": 1.0, "signal": 0.7},
               "sparse": {"solvable": 0.3, "signal": 0.2}, "regime": {"solvable": 0.5, "signal": 0.45}}
    assert module.pick(figures) == "regime"  # eligible: solvable >= 0.25 and signal <= 0.5; the highest signal
    assert module.pick({k: figures[k] for k in ("hopeless", "easy")}) == "easy"  # none eligible: highest signal
    tie = {"b": {"solvable": 0.5, "signal": 0.4}, "a": {"solvable": 0.5, "signal": 0.4}}
    assert module.pick(tie) == "b"  # a tie: the candidate listed first
    sets = module.prompt_sets(module.CANDIDATES, 128, 64)
    for train, held_out in sets.values():  # disjoint training and held-out prompts, each with its answer
        assert len(train) == 128 and len(held_out) == 64
        assert not {r["prompt"] for r in train} & {r["prompt"] for r in held_out}
    row = sets["add-upto-30"][0][0]  # "What is A + B? Reply with just the number." -> A + B
    a, b = row["prompt"].removeprefix("What is ").split("?")[0].split(" + ")
    assert row["answer"] == str(int(a) + int(b))
