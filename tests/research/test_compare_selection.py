"""compare's selection apart from reporting (research.compare.selection): the seed's split of the held-out prompts, a
run restricted to one half, and a report whose lrs are chosen on one half and judged on the other -- by hand."""

from __future__ import annotations

import pytest

from reinforce_ada.research.compare.markdown import format_report
from reinforce_ada.research.compare.report import analyse
from reinforce_ada.research.compare.selection import restrict, split_keys

KEYS = [f"k{i}" for i in range(6)]
STRATA = ["hard", "hard", "hard", "easy", "easy", "easy"]


def test_the_split_is_two_disjoint_halves_fixed_by_the_seed():
    chose, judged = split_keys(3, KEYS)
    assert chose | judged == set(KEYS) and not chose & judged and len(chose) == len(judged) == 3
    assert split_keys(3, list(reversed(KEYS))) == (chose, judged)  # the order the prompts come in does not matter
    assert any(split_keys(seed, KEYS)[0] != chose for seed in range(4, 10))  # another seed, another split


def _run(correct_by_step, strata=STRATA):
    """A run with evaluations at steps 0, 4, 8 (100 tokens and 1 s per step), 4 samples of each prompt; its
    accuracy over all prompts in the history, its evals' all-prompt values deliberately wrong (9.0), so only a
    recomputation can pass."""
    steps = [0, 4, 8]
    return {"history": [[s, 100 * s, float(s), sum(correct) / (4 * len(correct))]
                        for s, correct in zip(steps, correct_by_step)], "timing": {}, "zero_variance": None,
            "evals": {"eval/accuracy/hard": [9.0] * 3, "eval/num_prompts/hard": [3.0] * 3,
                      "eval/accuracy/easy": [9.0] * 3, "eval/num_prompts/easy": [3.0] * 3,
                      "eval/pass@1": [9.0] * 3, "eval/pass@2": [9.0] * 3, "eval/entropy": [0.5, 0.4, 0.3]},
            "strata": {"counts": {"hard": 3, "easy": 3}, "num_samples": 16, "bounds": [0.2, 0.5], "digest": "d"},
            "per_prompt": {"keys": KEYS, "strata": strata,
                           "counts": [[[4, c] for c in correct] for correct in correct_by_step]}}


def test_a_run_restricted_to_some_prompts_by_hand():
    run = _run([[0, 0, 0, 0, 0, 0], [1, 2, 3, 4, 0, 0], [4, 4, 0, 2, 2, 2]])
    part = restrict(run, {"k0", "k3", "k4"})  # hard: k0; easy: k3, k4
    assert [h[3] for h in part["history"]] == pytest.approx([0.0, (1 + 4 + 0) / 12, (4 + 2 + 2) / 12])
    assert [h[:3] for h in part["history"]] == [h[:3] for h in run["history"]]  # steps, tokens, seconds kept
    assert part["evals"]["eval/accuracy/hard"] == pytest.approx([0.0, 0.25, 1.0])
    assert part["evals"]["eval/accuracy/easy"] == pytest.approx([0.0, (1.0 + 0.0) / 2, (0.5 + 0.5) / 2])
    assert part["evals"]["eval/num_prompts/hard"] == [1, 1, 1] and part["strata"]["counts"] == {"hard": 1, "easy": 2}
    # pass@2 of a prompt with c of 4 correct: 1 - C(4-c, 2) / C(4, 2); at step 4: c = 1, 4, 0
    assert part["evals"]["eval/pass@2"][1] == pytest.approx((1 - 3 / 6 + 1 + 0) / 3)
    assert part["evals"]["eval/entropy"] == [0.5, 0.4, 0.3]  # not logged per prompt: the whole set's
    only_hard = restrict(run, {"k0"})
    assert only_hard["evals"]["eval/accuracy/easy"] == [None] * 3  # no easy prompt in this part
    with pytest.raises(ValueError, match="per-prompt"):
        restrict({**run, "per_prompt": None}, {"k0"})


def _grid():
    """grpo at lrs 1 and 2; ada at lr 1 is strong on seed s's selection half and weak on its report half, at lr 2
    the reverse: the halves pick different winners."""
    runs = {}
    for seed in (0, 1, 2):
        chose, _ = split_keys(seed, KEYS)
        start = [1] * 6
        for lr, final in ((1.0, [2] * 6), (2.0, [1] * 6)):
            runs[("grpo", lr, seed)] = _run([start, start, final])
        lucky = [4 if k in chose else 1 for k in KEYS]
        steady = [2 if k in chose else 3 for k in KEYS]
        runs[("ada", 1.0, seed)] = _run([start, start, lucky])
        runs[("ada", 2.0, seed)] = _run([start, start, steady])
    return runs


def test_lrs_chosen_on_one_half_and_judged_on_the_other():
    report = analyse(_grid(), ["grpo", "ada"], [1.0, 2.0], "grpo", "final", "split")
    ada = report["strategies"]["ada"]
    assert ada["best_lr"] == 1.0 and ada["best_lr_on_report_prompts"] == 2.0
    assert report["selection"] == {"rule": "split", "num_prompts": {"selection": 3.0, "report": 3.0},
                                   "winner_changed": ["ada"],
                                   "prompts": {str(seed): dict(zip(("selection", "report"),
                                                                   map(sorted, split_keys(seed, KEYS))))
                                               for seed in (0, 1, 2)}}
    # judged on the report half: ada at lr 1 has 1 of 4 correct there, grpo at lr 1 has 2 of 4
    assert ada["paired"]["at_steps"] == pytest.approx([0.25 - 0.5] * 3)
    # every seed the same difference: an interval of zero width, which resolves nothing
    assert ada["verdict"]["at_steps"]["mean"] == pytest.approx(-0.25) and ada["verdict"]["at_steps"]["half_width"] == 0
    assert all(run["history"][-1][3] in (0.25, 0.5, 0.75) for run in report["runs"])  # the report half's
    text = format_report(report)
    assert "every number here is measured on the other half (3 per seed)" in text
    assert "**The winner changes between the halves** for ada (chosen 1; the report half would pick 2)" in text
    # the same runs with every prompt choosing and judging: lr 1's luck on its selection half is in the report,
    # and ada looks ahead of grpo (both lrs at 15 of 24 correct, the lower kept; grpo at 12 of 24)
    same = analyse(_grid(), ["grpo", "ada"], [1.0, 2.0], "grpo", "final", "same")
    assert same["strategies"]["ada"]["best_lr"] == 1.0 and same["selection"]["winner_changed"] == []
    assert same["strategies"]["ada"]["paired"]["at_steps"] == pytest.approx([15 / 24 - 0.5] * 3)
    assert same["strategies"]["ada"]["verdict"]["at_steps"]["mean"] == pytest.approx(15 / 24 - 0.5)
    assert "(`--lr-selection same`)" in format_report(same)


def test_a_split_needs_per_prompt_results_and_a_one_lr_grid_selects_nothing():
    runs = _grid()
    runs[("ada", 2.0, 1)]["per_prompt"] = None
    with pytest.raises(ValueError, match="ada lr 2 seed 1 logged no per-prompt"):
        analyse(runs, ["grpo", "ada"], [1.0, 2.0], "grpo", "final", "split")
    one = {key: run for key, run in _grid().items() if key[1] == 1.0}
    assert "One lr: nothing was chosen, and every held-out prompt judges." in format_report(
        analyse(one, ["grpo", "ada"], [1.0], "grpo", "final"))
