"""The analyses `plot` and `compare` draw, read from hand-made metrics records; `plot` on runs with and without
them (a panel whose metric no run has says why instead of drawing empty axes)."""

import json

import pytest

from reinforce_ada import analyses
from reinforce_ada.plotting import plot_runs

STEPS = [
    {"step": 0, "eval/accuracy": 0.2, "eval/accuracy/hard": 0.1, "eval/num_prompts/hard": 3.0,
     "eval/accuracy/easy": 0.5, "eval/num_prompts/easy": 1.0, "eval/pass@1": 0.2, "eval/pass@2": 0.3,
     "eval/entropy": 0.6, "total_samples": 0},
    {"step": 1, "sampling/num_prompts": 4.0, "sampling/total_samples": 40.0, "sampling/reward_mean": 0.25,
     "train/entropy": 0.55, "sampling/round_1/num_active": 4.0, "sampling/round_2/num_active": 2.0,
     "sampling/by_pass_rate/unseen/num_prompts": 4.0, "sampling/by_pass_rate/unseen/num_samples": 40.0,
     "total_samples": 40},
    {"step": 2, "sampling/num_prompts": 4.0, "sampling/total_samples": 24.0, "sampling/reward_mean": 0.4,
     "train/entropy": 0.5, "sampling/round_1/num_active": 4.0,
     "sampling/by_pass_rate/0.8-1.0/num_prompts": 1.0, "sampling/by_pass_rate/0.8-1.0/num_samples": 4.0,
     "sampling/by_pass_rate/0.0-0.2/num_prompts": 3.0, "sampling/by_pass_rate/0.0-0.2/num_samples": 20.0,
     "eval/accuracy": 0.4, "eval/accuracy/hard": 0.3, "eval/num_prompts/hard": 3.0, "eval/accuracy/easy": 0.9,
     "eval/num_prompts/easy": 1.0, "eval/pass@1": 0.4, "eval/pass@2": 0.55, "eval/entropy": 0.45, "total_samples": 64},
]


def test_the_readers_on_known_records():
    assert analyses.strata_series(STEPS) == {"hard": ([0, 2], [0.1, 0.3]), "easy": ([0, 2], [0.5, 0.9])}
    assert analyses.pass_curves(STEPS) == [(0, {1: 0.2, 2: 0.3}), (2, {1: 0.4, 2: 0.55})]
    assert analyses.entropy_points(STEPS) == {"held_out": ([0.6, 0.45], [0.2, 0.4]),
                                              "train": ([0.55, 0.5], [0.25, 0.4])}
    assert analyses.samples_per_step(STEPS) == ([1, 2], [40.0, 24.0])
    # round 1: every prompt active both steps; round 2: half of them in step 1, none in step 2 (it ended at round 1)
    assert analyses.active_by_round(STEPS) == {1: 1.0, 2: pytest.approx(0.25)}
    assert analyses.budget_by_pass_rate(STEPS) == {"0.0-0.2": (3.0, 20.0), "0.8-1.0": (1.0, 4.0),
                                                   "unseen": (4.0, 40.0)}
    assert analyses.strata_series([{"step": 0, "eval/accuracy": 0.2}]) == {}  # a run without strata: nothing


def _run_folder(folder, records):
    folder.mkdir()
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return folder


def test_plot_draws_runs_with_and_without_the_analyses(tmp_path):
    new = _run_folder(tmp_path / "new", STEPS)
    old = _run_folder(tmp_path / "old", [{k: v for k, v in r.items() if "/" not in k or k in (
        "eval/accuracy", "sampling/reward_mean", "sampling/num_prompts", "sampling/total_samples")} for r in STEPS])
    for runs in ([new, old], [old]):
        path = plot_runs(runs, tmp_path / f"plots-{len(runs)}")
        assert path.stat().st_size > 0


def test_a_panel_without_data_says_why():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from reinforce_ada.plotting import draw_analyses

    fig, axes = plt.subplots(2, 3)
    draw_analyses(axes.ravel(), [("old run", "C0", [{"step": 0, "eval/accuracy": 0.2}])])
    said = [" ".join(t.get_text() for t in ax.texts) for ax in axes.ravel()]
    plt.close(fig)
    assert said[0].startswith("no eval/accuracy/<stratum> in these runs")
    assert said[1].startswith("no eval/pass@k") and said[2].startswith("no eval/entropy")
    assert said[4].startswith("no sampling/round_<k>/num_active") and said[5].startswith("no sampling/by_pass_rate")
    assert said[3].startswith("no sampling/total_samples")
    # every strategy that logs the samples by estimated pass rate is named, Est's too
    assert "(ada-est, ada-budget, the streaming sampler with --sampler.memory.enabled) logs it" in " ".join(said[5].split())
