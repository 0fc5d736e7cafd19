"""benchmarks/learning.py --bed and benchmarks/beds.py: a bed is a model shape + task + warm-started weights."""

from __future__ import annotations

import json

import pytest

from test_learning_benchmark import load_benchmark


@pytest.mark.parametrize("argv, message", [
    (["--bed", "no-such-bed"], "unknown bed 'no-such-bed'"),
    (["--bed", "tiny-arithmetic", "--task", "arithmetic-mixed"], "is on task arithmetic; drop --task"),
])
def test_bad_bed_is_a_one_line_error(argv, message, capsys):
    bench = load_benchmark()
    with pytest.raises(SystemExit) as exit_info:
        bench.parse_args(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err.strip().splitlines()[-1]


def test_a_bed_without_weights_names_the_command_that_makes_them(tmp_path, monkeypatch, capsys):
    bench = load_benchmark()
    import beds

    monkeypatch.setattr(beds, "BEDS_DIR", tmp_path)  # an empty beds folder
    with pytest.raises(SystemExit) as exit_info:
        bench.parse_args(["--bed", "h128x2-arithmetic"])
    assert exit_info.value.code == 2
    assert "python benchmarks/beds.py --make h128x2-arithmetic" in capsys.readouterr().err.strip().splitlines()[-1]


def test_the_bed_sets_the_task():
    bench = load_benchmark()
    assert bench.parse_args(["--bed", "tiny-arithmetic-mixed"]).task == ["arithmetic-mixed"]
    assert bench.parse_args([]).task == ["arithmetic"] and bench.parse_args([]).bed is None


TINY_RUN = ["--seeds", "0", "--steps", "2", "--eval-every", "1", "--lrs", "1e-3", "--strategies", "grpo",
            "--eval-prompts", "4", "--bucket-prompts", "4", "--bucket-samples", "2", "--no-write"]


@pytest.mark.slow
def test_the_tiny_bed_runs_exactly_what_the_task_alone_runs(tmp_path):
    """--bed tiny-arithmetic injects the package's start model: the same histories as --task arithmetic."""
    bench = load_benchmark()
    histories = []
    for name, extra in (("task", ["--task", "arithmetic"]), ("bed", ["--bed", "tiny-arithmetic"])):
        out = tmp_path / f"{name}.json"
        assert bench.main(extra + TINY_RUN + ["--out", str(tmp_path / name), "--json", str(out)]) == 0
        rows = json.loads(out.read_text())["rows"]
        assert [(r["task"], r["strategy"]) for r in rows] == [("arithmetic", "grpo")]
        assert rows[0]["seconds_per_step"] > 0  # the mean of the run's time/step_seconds
        histories.append(rows[0]["history"])
    assert histories[0] == histories[1]
    assert json.loads(bench.details_path(tmp_path / "bed.json").read_text())["args"]["bed"] == "tiny-arithmetic"


@pytest.mark.slow
def test_a_made_bed_is_fp16_of_its_shape_and_trains(tmp_path, monkeypatch):
    bench = load_benchmark()
    import beds
    from safetensors import safe_open

    monkeypatch.setattr(beds, "BEDS_DIR", tmp_path / "beds")
    bed = beds.BEDS["h128x2-arithmetic"]
    info = beds.make_bed(bed, max_steps=2)  # two warm-start steps: the plumbing, not a useful start
    assert info["sft_steps"] == 2 and bed.has_weights()
    config = json.loads((bed.folder / "config.json").read_text())
    assert (config["hidden_size"], config["num_hidden_layers"], config["num_attention_heads"]) == (128, 2, 4)
    with safe_open(str(bed.folder / "model.safetensors"), "pt") as weights:
        assert {str(weights.get_tensor(k).dtype) for k in weights.keys()} == {"torch.float16"}
    model, _ = beds.load_bed_model(bed)
    assert next(model.parameters()).dtype.is_floating_point and str(next(model.parameters()).dtype) == "torch.float32"
    out = tmp_path / "r.json"
    assert bench.main(["--bed", bed.name] + TINY_RUN + ["--out", str(tmp_path / "runs"), "--json", str(out)]) == 0
    assert json.loads(out.read_text())["rows"][0]["task"] == "arithmetic"


DOCUMENTED_BED_CHECKS = {  # docs/benchmarks.md ("Beds") and the README: bed -> (n8 - n4, half-width, best lrs)
    "tiny_arithmetic": (0.016, 0.052, (5e-4, 1e-3)), "h128x2_arithmetic": (-0.001, 0.031, (5e-4, 2.5e-4)),
    "h128x4_arithmetic": (-0.001, 0.020, (2.5e-4, 2.5e-4)), "tiny_arithmetic_mixed": (-0.002, 0.025, (2.5e-4, 2.5e-4)),
    "h128x2_arithmetic_mixed": (0.006, 0.013, (2.5e-4, 5e-4)),
    "h128x4_arithmetic_mixed": (0.005, 0.013, (2.5e-4, 5e-4)),
    "h128x2_arithmetic_100steps": (0.016, 0.023, (2.5e-4, 5e-4)),
    "h128x2_arithmetic_mixed_100steps": (-0.002, 0.021, (2.5e-4, 2.5e-4)),
}


@pytest.mark.parametrize("name", DOCUMENTED_BED_CHECKS)
def test_the_documented_bed_checks_come_from_the_committed_json(name):
    bed_check = load_bed_check()
    from pathlib import Path

    result = bed_check.check(Path(bed_check.__file__).resolve().parent / "results" / f"bed_{name}.json")
    diff, half, (lr4, lr8) = DOCUMENTED_BED_CHECKS[name]
    assert result["seeds"] == [0, 1, 2, 3, 4] and not result["passes"]
    assert (round(result["n8_minus_n4"][0], 3), round(result["n8_minus_n4"][1], 3)) == (diff, half)
    assert (result["best_lr"]["grpo"], result["best_lr"]["grpo-n8"]) == (lr4, lr8)
    lrs = {float(lr) for lr in result["final_by_lr"]["grpo"]}
    assert lrs == ({2.5e-4, 5e-4, 1e-3} if name.endswith("100steps") else {2.5e-4, 5e-4, 1e-3, 2e-3})
    assert result["steps"] == (100 if name.endswith("100steps") else 40)


@pytest.mark.slow
def test_a_committed_bed_history_reproduces(tmp_path):
    """A fresh clone runs from the committed bed weights: the same seed gives the committed history (its first 8
    steps: the lr is constant, so a shorter run follows the same path)."""
    bench = load_benchmark()
    out = tmp_path / "r.json"
    assert bench.main(["--bed", "h128x2-arithmetic", "--seeds", "0", "--steps", "8", "--eval-every", "4", "--lrs",
                       "2.5e-4", "--strategies", "grpo", "--bucket-prompts", "0", "--out", str(tmp_path / "runs"),
                       "--json", str(out), "--no-write"]) == 0
    history = json.loads(out.read_text())["rows"][0]["history"]
    results = bench.Path(bench.__file__).resolve().parent / "results"
    committed = next(r["history"] for r in json.loads((results / "bed_h128x2_arithmetic.json").read_text())["rows"]
                     if (r["strategy"], r["lr"], r["seed"]) == ("grpo", 2.5e-4, 0))
    assert [h[:2] for h in history] == [h[:2] for h in committed[:3]]  # steps and generated tokens
    assert all(abs(a[2] - b[2]) <= 0.005 for a, b in zip(history, committed))  # accuracy, 4 of 800 samples


def load_bed_check():
    load_benchmark()  # puts benchmarks/ on sys.path
    import bed_check

    return bed_check


def write_bed_results(path, finals, start=0.2, lrs=(5e-4, 1e-3), rates=(0.0, 0.5, 1.0, 0.0)):
    """A learning.py --json file of GRPO n=4 and n=8 runs whose final accuracies are ``finals[arm][lr][seed]``."""
    rows = [{"task": "arithmetic", "strategy": arm, "lr": lr, "seed": seed, "history": [[0, 0, start], [40, 1000, final]],
             "seconds_per_step": 0.2 if arm == "grpo-n8" else 0.1}
            for arm, by_lr in finals.items() for lr, by_seed in by_lr.items() for seed, final in by_seed.items()]
    path.write_text(json.dumps({"rows": rows}))
    path.with_name(path.stem + "_details.json").write_text(json.dumps(
        {"start_pass_rates": {"arithmetic": list(rates)}, "args": {"bed": "h128x2-arithmetic", "bucket_samples": 8}}))
    return path


def test_bed_check_pairs_each_arm_at_its_best_lr(tmp_path):
    bed_check = load_bed_check()
    seeds = range(5)
    finals = {"grpo": {5e-4: {s: 0.30 + 0.01 * s for s in seeds}, 1e-3: {s: 0.20 for s in seeds}},
              "grpo-n8": {5e-4: {s: 0.25 for s in seeds}, 1e-3: {s: 0.35 + 0.01 * s + 0.002 * (s % 2) for s in seeds}}}
    result = bed_check.check(write_bed_results(tmp_path / "bed.json", finals))
    assert result["best_lr"] == {"grpo": 5e-4, "grpo-n8": 1e-3}
    diff, half = result["n8_minus_n4"]
    assert diff == pytest.approx(0.05 + 0.002 * 2 / 5) and 0 < half < diff and result["passes"]
    histogram = result["start_histogram"]
    assert {k: histogram[k] for k in ("p=0", "between", "p=1", "prompts", "samples")} == \
        {"p=0": 2, "between": 1, "p=1": 1, "prompts": 4, "samples": 8}
    assert histogram["buckets"] == {"p=0": 2, "0<p<=.25": 0, ".25<p<.75": 1, ".75<=p<1": 0, "p=1": 1}
    assert result["seconds_per_step"] == pytest.approx({"grpo": 0.1, "grpo-n8": 0.2})
    assert "**passes**" in bed_check.markdown_row(result)
    out = tmp_path / "checks.json"
    assert bed_check.main([str(tmp_path / "bed.json"), "--json", str(out), "--plot", str(tmp_path / "c.png")]) == 0
    assert json.loads(out.read_text())[0]["passes"] is True and (tmp_path / "c.png").stat().st_size > 0


def test_bed_check_fails_a_bed_whose_interval_holds_zero(tmp_path):
    bed_check = load_bed_check()
    noise = (0.03, -0.02, 0.01, -0.03, 0.02)
    finals = {"grpo": {5e-4: {s: 0.3 for s in range(5)}},
              "grpo-n8": {5e-4: {s: 0.3 + noise[s] for s in range(5)}}}
    result = bed_check.check(write_bed_results(tmp_path / "bed.json", finals))
    assert result["n8_minus_n4"][0] == pytest.approx(0.002) and not result["passes"]


def test_bed_check_names_a_missing_arm(tmp_path, capsys):
    bed_check = load_bed_check()
    path = write_bed_results(tmp_path / "bed.json", {"grpo": {5e-4: {0: 0.3, 1: 0.3}}})
    assert bed_check.main([str(path)]) == 2
    assert "no runs of grpo-n8" in capsys.readouterr().err
    details = path.with_name("bed_details.json")
    assert bed_check.main([str(details)]) == 2
    assert "is not a learning.py --json file" in capsys.readouterr().err
