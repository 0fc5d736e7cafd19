"""``reinforce-ada compare``: a small grid end to end (its report checked against the run folders), a rerun that
skips what finished, the report's rules by hand, and every input error in one line before any run starts."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from reinforce_ada import cli
from reinforce_ada.research.compare.report import analyse
from reinforce_ada.research.compare.selection import split_keys
from reinforce_ada.research.compare.stats import t_interval

TINY = ["--max-steps", "3", "--eval-steps", "1", "--eval-prompts", "8", "--batch-size", "8", "--num-threads", "1"]


def compare(capsys, out, *argv):
    code = cli.main(["compare", "--strategies", "grpo", "ada-balanced", "--lrs", "1e-3", "2e-3", "--seeds", "0", "1",
                     "--out", str(out), *TINY, *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def history_from_folder(folder: Path) -> list[list]:
    """[step, tokens, cumulative step seconds, accuracy] at every evaluation, read here from metrics.jsonl."""
    rows = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    tokens, seconds, out, total = {0: 0}, {0: 0.0}, [], 0.0
    for row in rows:
        if "time/step_seconds" in row:
            total += row["time/step_seconds"]
            tokens[row["step"]], seconds[row["step"]] = row["total_tokens"], total
        if "eval/accuracy" in row:
            out.append([row["step"], tokens[row["step"]], seconds[row["step"]], row["eval/accuracy"]])
    return out


@pytest.mark.slow
def test_a_small_grid_end_to_end_and_its_report_matches_the_run_folders(tmp_path, capsys):
    out = tmp_path / "cmp"
    code, stdout, err = compare(capsys, out, "--parallel", "2", "--lr-selection", "same")
    assert code == 0, err
    progress = [line for line in err.splitlines() if line.startswith("[")]
    assert len(progress) == 8 and all(" in 3 steps, " in line for line in progress)  # one line per run
    names = {f"{s}-lr{lr}-seed{seed}" for s in ("grpo", "ada-balanced") for lr in ("0.001", "0.002") for seed in (0, 1)}
    assert {p.name for p in out.iterdir() if p.is_dir()} == names
    for name in names:  # every run is a normal run folder
        assert {"config.json", "metrics.jsonl", "summary.json", "checkpoint-3"} <= {p.name for p in (out / name).iterdir()}
        config = json.loads((out / name / "config.json").read_text())
        assert (config["strategy"], config["max_steps"], config["batch_size"]) == (name.split("-lr")[0], 3, 8)
    report = json.loads((out / "report.json").read_text())
    assert (out / "report.png").exists() and (out / "report.md").read_text() in stdout
    # the verdict first, then where it lands: per stratum (each seed's runs share their strata) and pass@k
    text = (out / "report.md").read_text()
    assert text.startswith("## Verdict\n") and "- **ada-balanced (lr " in text
    assert "## By difficulty stratum" in text
    assert re.search(r"\| ada-balanced \| (extremely_hard|hard|medium|easy) \| ", text)
    assert "| at equal steps (3) | pass@1 | pass@2 | pass@4 | entropy |" in text
    for run in report["runs"]:
        strata = json.loads((out / f"{run['strategy']}-lr{run['lr']:g}-seed{run['seed']}" / "strata.json").read_text())
        assert run["strata"]["counts"] == strata["counts"] and len(run["evals"]["eval/entropy"]) == 4
    digests = {(r["seed"], r["strata"]["digest"]) for r in report["runs"]}
    assert len(digests) == 2  # one assignment per seed, whatever the strategy and lr
    assert report["strategies"]["ada-balanced"]["breakdown"]["strata"]["seeds_with_other_strata"] == []

    runs = {name: history_from_folder(out / name) for name in names}
    # the baseline's best lr: its highest mean final accuracy; its budgets: mean totals at that lr
    final = {lr: np.mean([runs[f"grpo-lr{lr}-seed{s}"][-1][3] for s in (0, 1)]) for lr in ("0.001", "0.002")}
    base_lr = max(final, key=final.get)
    assert report["strategies"]["grpo"]["best_lr"] == float(base_lr)
    base = [runs[f"grpo-lr{base_lr}-seed{s}"] for s in (0, 1)]
    tokens_budget = np.mean([h[-1][1] for h in base])
    seconds_budget = np.mean([h[-1][2] for h in base])
    assert report["budgets"]["steps"] == 3
    assert report["budgets"]["tokens"] == pytest.approx(tokens_budget)
    assert report["budgets"]["seconds"] == pytest.approx(seconds_budget, rel=1e-5)

    def at(history, column, budget):
        return np.interp(budget, [h[column] for h in history], [h[3] for h in history])

    # Ada-balanced's best lr: the highest mean accuracy at the baseline's token budget (the default rule)
    ada_at_b = {lr: np.mean([at(runs[f"ada-balanced-lr{lr}-seed{s}"], 1, tokens_budget) for s in (0, 1)])
                for lr in ("0.001", "0.002")}
    ada_lr = max(ada_at_b, key=ada_at_b.get)
    ada = report["strategies"]["ada-balanced"]
    assert ada["best_lr"] == float(ada_lr) and ada["best_lr_at_edge"] in ("lowest", "highest")
    mine = [runs[f"ada-balanced-lr{ada_lr}-seed{s}"] for s in (0, 1)]
    expected = {"at_steps": [m[-1][3] - b[-1][3] for m, b in zip(mine, base)],
                "at_tokens": [at(m, 1, tokens_budget) - at(b, 1, tokens_budget) for m, b in zip(mine, base)],
                "at_seconds": [at(m, 2, seconds_budget) - at(b, 2, seconds_budget) for m, b in zip(mine, base)]}
    for key, values in expected.items():
        assert ada["paired"][key] == pytest.approx(values, abs=1e-6), key
        mean, half = t_interval(values)
        assert ada["paired_mean_ci95"][key] == pytest.approx([mean, half], abs=1e-6), key
    per_seed = [m[-1][1] / b[-1][1] for m, b in zip(mine, base)]  # its tokens over the same seed's grpo run
    tokens = ada["cost_ratios"]["tokens"]
    assert tokens["per_seed"] == pytest.approx(per_seed)
    mean_log, half_log = t_interval(np.log(per_seed))
    assert [tokens["geomean"], tokens["low"], tokens["high"]] == pytest.approx(
        [math.exp(mean_log), math.exp(mean_log - half_log), math.exp(mean_log + half_log)])
    assert tokens["geomean"] > 1  # Ada-balanced draws more than GRPO's 4 samples per prompt
    # the per-step time split comes from the runs' metrics, and its parts add up to the step
    split = ada["seconds_per_step"]
    assert split["generation"] + split["scoring"] + split["update"] + split["sync"] == pytest.approx(split["step"])
    # two runs at a time: the ledger says so, and how many were in flight while each strategy ran
    assert report["timing"]["parallel"] == [2] and len((out / "runs.jsonl").read_text().splitlines()) == 8
    assert all(1.0 <= v <= 2.0 + 1e-9 for v in report["timing"]["runs_in_flight"].values())

    # a rerun skips the finished runs; a run without its summary (interrupted) is trained again, alone
    (out / "grpo-lr0.001-seed1" / "summary.json").unlink()
    before = (out / "ada-balanced-lr0.001-seed0" / "metrics.jsonl").read_text()
    code, _, err = compare(capsys, out)
    assert code == 0, err
    assert "8 runs" in err and "(7 finished earlier)" in err
    assert [line for line in err.splitlines() if line.startswith("[")][0].startswith("[8/8")
    assert (out / "grpo-lr0.001-seed1" / "summary.json").exists()
    assert (out / "ada-balanced-lr0.001-seed0" / "metrics.jsonl").read_text() == before
    rerun = json.loads((out / "report.json").read_text())
    assert rerun["runs"][0]["history"] == report["runs"][0]["history"]  # the same seed trains the same run again
    # the grid is fixed: other settings in the same folder are refused, naming the difference
    code, _, err = compare(capsys, out, "--best-lr", "final")
    assert code == 2 and err.strip().splitlines()[-1].startswith(f"error: --out {out} holds a comparison with other "
                                                                 f"settings (best_lr: tokens there, final now)")

    # the same runs with the lrs chosen on one half of each seed's held-out prompts, judged on the other: every
    # number recomputed from the runs' per-prompt results (held_out.jsonl), by hand here
    split = tmp_path / "split"
    split.mkdir()
    for name in names:
        (split / name).symlink_to(out / name)
    manifest = json.loads((out / "compare.json").read_text())
    (split / "compare.json").write_text(json.dumps({**manifest, "lr_selection": "split"}))
    code, _, err = compare(capsys, split, "--report-only")
    assert code == 0, err
    report = json.loads((split / "report.json").read_text())
    assert report["selection"]["rule"] == "split" and report["selection"]["num_prompts"] == {"selection": 4,
                                                                                             "report": 4}

    def halves(name, seed):
        lines = [json.loads(line) for line in (out / name / "held_out.jsonl").read_text().splitlines()]
        by_step = {line["step"]: line for line in lines}  # a rerun's lines come last
        chose, judged = split_keys(seed, by_step[0]["keys"])
        return [[step] + [sum(c for k, c in zip(line["keys"], line["correct"]) if k in part)
                          / sum(n for k, n in zip(line["keys"], line["samples"]) if k in part)
                          for part in (chose, judged)] for step, line in sorted(by_step.items())]

    on = {name: halves(name, int(name[-1])) for name in names}
    final = {lr: np.mean([on[f"grpo-lr{lr}-seed{s}"][-1][1] for s in (0, 1)]) for lr in ("0.001", "0.002")}
    assert report["strategies"]["grpo"]["best_lr"] == float(max(final, key=final.get))  # chosen on the first half
    for run in report["runs"]:  # and reported on the second
        name = f"{run['strategy']}-lr{run['lr']:g}-seed{run['seed']}"
        assert [h[3] for h in run["history"]] == pytest.approx([row[2] for row in on[name]])
    assert "every number here is measured on the other half (4 per seed)" in (split / "report.md").read_text()


@pytest.fixture()
def no_trainer(monkeypatch):
    """Fail the test if a Trainer gets built: every error here comes before any run starts."""
    monkeypatch.setattr("reinforce_ada.training.Trainer.__init__", lambda *a, **k: pytest.fail("trainer was built"))


@pytest.mark.parametrize("argv, message", [
    (["--strategies", "grpo", "ada-nothing"], "error: --strategies: unknown strategy 'ada-nothing'; choose from grpo,"),
    (["--strategies", "grpo", "ada-balnced"], "error: --strategies: unknown strategy 'ada-balnced' (did you mean "
                                              "'ada-balanced'?); choose from grpo,"),
    (["--strategies", "grpo", "mine=ada-nothing --group-size 8"],
     "error: --strategies 'mine=ada-nothing --group-size 8': unknown strategy 'ada-nothing' to start from"),
    (["--strategies", "grpo", "mine=grpo --group-sise 8"], "error: --strategies mine: unrecognized arguments: "
                                                           "--group-sise 8"),
    (["--strategies", "grpo", "ada-balanced", "--learning-rate", "1e-3"],
     "error: --learning-rate: compare sets it for every run; give --lrs"),
    (["--strategies", "grpo", "ada-balanced", "--baseline", "dapo"],
     "error: --baseline dapo is not one of --strategies (grpo, ada-balanced)"),
    (["--strategies", "grpo", "grpo-n8", "--group-size", "4"],
     "error: strategy grpo-n8 sets sampler.group_size=8, but the train options give sampler.group_size=4"),
    (["--strategies", "grpo", "ada-balanced", "--sample-budget-per-step", "64"],  # a budget-mode setting for all
     "error: strategy grpo (lr 0.001, seed 0): sampler.sample_budget_per_step is a setting of strategy='ada-budget'"),
    (["--strategies", "grpo", "bud=ada-budget --sample-budget-per-step 10"],
     "error: strategy bud (lr 0.001, seed 0): sampler.sample_budget_per_step=10 is below one group per prompt"),
    (["--strategies", "grpo", "ada-balanced", "--lrs", "1e-3", "1e-3"], "error: --lrs must be distinct positive"),
    (["--strategies", "grpo", "ada-balanced", "--model", "no/such/model/folder"],
     "error: model path no/such/model/folder does not exist"),
])
def test_bad_input_is_one_line_before_any_run(tmp_path, capsys, no_trainer, argv, message):
    argv = ["compare", "--lrs", "1e-3", "--out", str(tmp_path / "out"), *argv]
    code = cli.main(argv)
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith(message), err
    assert not (tmp_path / "out").exists()


def test_an_unknown_option_is_refused_by_the_parser(capsys, no_trainer):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["compare", "--strategies", "grpo", "--lrs", "1e-3", "--max-stepz", "3"])
    assert exit_info.value.code == 2 and "unrecognized arguments: --max-stepz 3" in capsys.readouterr().err


def test_a_model_that_cannot_load_fails_before_any_run(tmp_path, capsys, no_trainer):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")  # a model folder to the eye, but nothing transformers can load
    code = cli.main(["compare", "--strategies", "grpo", "ada-balanced", "--lrs", "1e-6", "--model", str(model),
                     "--out", str(tmp_path / "out")])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith(f"error: --model {model} cannot be loaded: ")
    assert not (tmp_path / "out" / "compare.json").exists()


def test_report_only_without_a_comparison_is_refused(tmp_path, capsys):
    code = cli.main(["compare", "--strategies", "grpo", "--lrs", "1e-3", "--out", str(tmp_path), "--report-only"])
    assert code == 2 and "holds no comparison" in capsys.readouterr().err


def _run(history):
    return {"history": history, "timing": {"step": 1.0}, "zero_variance": None}


def test_report_rules_by_hand():
    """GRPO's budgets are its mean totals; a strategy that learns twice as fast per token but takes three times the
    seconds wins at equal tokens and loses at equal seconds; the best-lr rule decides which lr is reported."""
    runs = {}
    for seed in (0, 1):
        runs[("grpo", 1.0, seed)] = _run([[0, 0, 0.0, 0.2], [4, 100, 10.0, 0.3], [8, 200, 20.0, 0.4]])
        runs[("fast", 1.0, seed)] = _run([[0, 0, 0.0, 0.2], [4, 100, 30.0, 0.4], [8, 200, 60.0, 0.5 + 0.1 * seed]])
        runs[("fast", 2.0, seed)] = _run([[0, 0, 0.0, 0.2], [4, 100, 5.0, 0.25], [8, 200, 10.0, 0.9]])
    report = analyse(runs, ["grpo", "fast"], [1.0, 2.0], "grpo", "seconds")
    assert report["budgets"] == {"steps": 8, "tokens": 200.0, "seconds": 20.0}
    fast = report["strategies"]["fast"]
    # at GRPO's 20 s: lr 1 is at 0.2 + 20/30 x 0.2 = 0.333, lr 2 has ended (10 s) at 0.9: rule "seconds" picks 2
    assert fast["best_lr"] == 2.0 and fast["best_lr_at_edge"] == "highest"
    by_tokens = analyse(runs, ["grpo", "fast"], [1.0, 2.0], "grpo", "tokens")["strategies"]["fast"]
    assert by_tokens["best_lr"] == 2.0  # 0.9 vs 0.55 at 200 tokens
    runs[("fast", 2.0, 0)] = runs[("fast", 2.0, 1)] = _run([[0, 0, 0.0, 0.2], [4, 100, 5.0, 0.25], [8, 200, 10.0, 0.3]])
    report = analyse(runs, ["grpo", "fast"], [1.0, 2.0], "grpo", "tokens")
    fast = report["strategies"]["fast"]
    assert fast["best_lr"] == 1.0 and fast["best_lr_at_edge"] == "lowest"
    assert fast["paired"]["at_tokens"] == pytest.approx([0.1, 0.2])
    assert fast["paired"]["at_steps"] == pytest.approx([0.1, 0.2])
    assert fast["paired"]["at_seconds"] == pytest.approx([0.2 + 0.2 * 20 / 30 - 0.4] * 2)
    assert fast["per_lr"]["1.0"]["short_of_seconds"] == 0 and fast["per_lr"]["2.0"]["short_of_seconds"] == 2
    # GRPO's mean final 0.4 is reached at step 4 by the fast strategy's mean curve, at 8 by GRPO's own
    assert fast["steps_to_baseline_final"]["ratio"] == pytest.approx(0.5)
    assert fast["cost_ratios"]["tokens"]["per_seed"] == [1.0, 1.0]
    assert fast["cost_ratios"]["seconds"]["per_seed"] == [3.0, 3.0]
    assert fast["cost_ratios"]["seconds"]["geomean"] == pytest.approx(3.0)
    assert math.isnan(report["strategies"]["grpo"]["zero_variance"])


@pytest.mark.slow
def test_an_interrupt_to_the_whole_process_group_ends_in_one_line(tmp_path):
    """Ctrl-C on a terminal (or `timeout --signal=INT`) reaches compare and its worker processes alike: the parent
    stops the runs in flight and says so in one line; no worker, idle or busy, prints a KeyboardInterrupt traceback,
    and a second interrupt does not cut the clean-up short."""
    import os
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "cmp"
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    process = subprocess.Popen(
        [sys.executable, "-m", "reinforce_ada.cli", "compare", "--strategies", "quick=grpo --max-steps 2",
         "long=ada-balanced --max-steps 400", "--lrs", "1e-3", "--seeds", "0", "--eval-steps", "200",
         "--num-threads", "1", "--parallel", "3", "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env=env, start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # as from a terminal, however pytest was
    # started (a non-interactive shell's background job, `pytest &`, passes SIGINT on ignored, and Python keeps it so)
    try:  # interrupted once the quick run has finished (its worker idle) while the other trains
        quick, busy = out / "quick-lr0.001-seed0" / "summary.json", out / "long-lr0.001-seed0" / "metrics.jsonl"
        deadline = time.monotonic() + 300
        while not (quick.exists() and busy.exists() and busy.read_text().count("\n") >= 2):
            assert process.poll() is None and time.monotonic() < deadline, process.communicate()
            time.sleep(0.5)
        time.sleep(1)
        os.killpg(process.pid, signal.SIGINT)
        time.sleep(0.2)
        os.killpg(process.pid, signal.SIGINT)
        _, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode in (130, -signal.SIGINT), err  # exit 130, or the second interrupt's own end (a shell
    # shows both as 130)
    assert "interrupted: reinforce-ada compare stopped" in err
    assert "Traceback" not in err, err


@pytest.mark.fault("compare where every run of the baseline fails (a verifier that fails on everything)",
                   "exit 3, as docs/compare.md says for runs that stop or fail: one line naming the failed runs' "
                   "ledger and the first error (it exited 2, 'nothing to report yet', as for a usage error)")
def test_a_baseline_whose_every_run_failed_exits_3(tmp_path, capsys, monkeypatch):
    failed = {"ok": False, "stopped": True, "error": "RunStopped: step 1: the verifier could not score 32 of 32",
              "started": 0.0, "ended": 1.0}
    monkeypatch.setattr("reinforce_ada.research.compare.runs.train_one", lambda settings: dict(failed))
    code = cli.main(["compare", "--strategies", "grpo", "ada-balanced", "--lrs", "1e-3", "--seeds", "0", "--out",
                     str(tmp_path / "cmp"), *TINY])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 3
    assert lines[-1] == (f"error: no run of the baseline grpo finished (1 failed, recorded in {tmp_path / 'cmp'}/"
                         f"runs.jsonl), so there is nothing to report; grpo-lr0.001-seed0: {failed['error']}")


@pytest.mark.fault("compare interrupted (Ctrl-C) while a run trains in its process, before that run's first "
                   "checkpoint",
                   "one line saying a plain rerun of the same command continues (it passed on the run's own "
                   "'the same command with --overwrite starts it over', which compare then refused)")
def test_an_interrupted_compare_says_its_own_way_on(tmp_path, capsys, monkeypatch):
    from reinforce_ada.training.guards import RunInterrupted

    def interrupted(settings):
        raise RunInterrupted("KeyboardInterrupt during step 2; no checkpoint was written yet, so there is nothing to "
                             "resume: the same command with --overwrite starts it over", 130,
                             cause="KeyboardInterrupt during step 2")

    monkeypatch.setattr("reinforce_ada.research.compare.runs.train_one", interrupted)
    code = cli.main(["compare", "--strategies", "grpo", "ada-balanced", "--lrs", "1e-3", "--seeds", "0", "--out",
                     str(tmp_path / "cmp"), *TINY])
    assert code == 130
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "interrupted: reinforce-ada compare stopped (KeyboardInterrupt during step 2); the same command continues "
        "it: finished runs are kept, an interrupted run continues from its checkpoint or starts over")
