"""The report's verdict rule, the seeds it says an inconclusive difference needs, the JSON's consistency (no point
estimate beside an interval it contradicts; every null with its reason), the footnoted '-' cells, the one-lr grid
flagged, and where a difference lands (strata, pass@k, entropy) -- all on hand-made runs whose answers are known."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from reinforce_ada.research.compare.figure import plot_report
from reinforce_ada.research.compare.markdown import format_report
from reinforce_ada.research.compare.report import REPORT_FORMAT, analyse, jsonable
from reinforce_ada.research.compare.stats import t975
from reinforce_ada.research.compare.verdict import Z80, call, call_words, seeds_needed


def _run(history, **extra):
    return {"history": history, "timing": {"step": 1.0}, "zero_variance": None, **extra}


def _line(accuracies, tokens_per_step=100, seconds_per_step=1.0):
    """A history with an evaluation every 4 steps."""
    return [[4 * i, tokens_per_step * 4 * i, seconds_per_step * 4 * i, a] for i, a in enumerate(accuracies)]


# -- the rule ----------------------------------------------------------------------------------------------------------
def test_ahead_behind_inconclusive_by_the_interval():
    assert call([0.10, 0.12, 0.08])["call"] == "ahead"      # 0.10 ± 4.303 * 0.02 / √3 = ± 0.050
    assert call([-0.10, -0.12, -0.08])["call"] == "behind"
    unclear = call([0.10, -0.02, 0.04])                      # 0.04 ± 0.149
    assert unclear["call"] == "inconclusive" and unclear["seeds_needed"] == seeds_needed(0.04, 0.06)
    assert call([0.05])["call"] == "inconclusive" and call([0.05])["reason"] == "one paired seed gives no interval"
    assert call([])["reason"].startswith("no seed")
    assert call([0.0, 0.0, 0.0])["reason"] == "no difference observed: no number of seeds resolves it"


def test_an_interval_of_zero_width_resolves_nothing_and_asks_for_more_seeds():
    """Two seeds whose differences happen to be equal (pass@4 of 64 prompts moves in steps of 1/256) gave
    "+0.016 ± 0.000" and called it *ahead*; a zero-width interval says nothing of the spread."""
    for differences in ([0.016, 0.016], [-0.15, -0.15, -0.15]):
        c = call(differences)
        assert (c["call"], c["half_width"], c["seeds_needed"]) == ("inconclusive", 0.0, None)
        assert c["reason"].endswith("an interval of zero width that says nothing of the spread: it needs more seeds")
        assert call_words(c) == f"**no resolved difference** ({differences[0]:+.3f}; {c['reason']})"


def test_seeds_needed_is_the_stated_power_rule():
    for mean, sd in [(0.05, 0.05), (0.02, 0.07), (0.1, 0.03)]:
        n = seeds_needed(mean, sd)
        assert (t975(n - 1) + Z80) * sd / math.sqrt(n) <= mean  # n is enough ...
        if n > 2:
            assert (t975(n - 2) + Z80) * sd / math.sqrt(n - 1) > mean  # ... and the smallest that is
    # about ((1.96 + 0.84) sd / mean)^2 for many seeds
    assert seeds_needed(0.01, 0.05) == pytest.approx(7.85 * 25, rel=0.02)
    assert seeds_needed(0.0, 0.05) is None and seeds_needed(1e-5, 1.0) is None  # never, or past 1000 seeds


# -- a report on hand-made runs ---------------------------------------------------------------------------------------
def _grid():
    """grpo vs "fast" (learns faster per step and per token; three times the seconds) vs "slow" (never reaches
    grpo's final accuracy), 3 seeds, one lr; "lonely" ran only seed 7, which grpo did not."""
    runs = {}
    for seed in (0, 1, 2):
        wiggle = 0.01 * seed
        runs[("grpo", 1e-3, seed)] = _run(_line([0.2, 0.3, 0.4 + wiggle]))
        runs[("fast", 1e-3, seed)] = _run(_line([0.2, 0.45, 0.5 + 2 * wiggle], seconds_per_step=3.0))
        runs[("slow", 1e-3, seed)] = _run(_line([0.2, 0.22, 0.25 + 2 * wiggle]))  # each seed its own difference
    runs[("lonely", 1e-3, 7)] = _run(_line([0.2, 0.3, 0.35]))
    return runs


def _nulls_have_reasons(value, path=""):
    """Every steps-ratio triple in the JSON is all numbers, or nulls with a reason; a point lies in its interval."""
    if isinstance(value, dict):
        if {"ratio", "ratio_low", "ratio_high"} <= value.keys():
            ratio, low, high = value["ratio"], value["ratio_low"], value["ratio_high"]
            if ratio is None:
                assert low is None and high is None and value["reason"], path
            if None in (low, high):
                assert value["reason"], path
            if None not in (ratio, low, high):
                assert low <= ratio <= high or "outside" in (value["reason"] or ""), path
        for key, item in value.items():
            _nulls_have_reasons(item, f"{path}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _nulls_have_reasons(item, f"{path}[{i}]")


def test_verdict_json_and_markdown_of_a_known_grid(tmp_path):
    report = analyse(_grid(), ["grpo", "fast", "slow", "lonely"], [1e-3], "grpo", "tokens")
    fast, slow, lonely = (report["strategies"][s] for s in ("fast", "slow", "lonely"))
    assert fast["verdict"]["at_tokens"]["call"] == "ahead" and fast["verdict"]["at_steps"]["call"] == "ahead"
    # at grpo's 8 seconds fast has done 8/3 steps: 0.2 + (8/3)/4 * 0.25 = 0.367 < grpo's 0.4 + wiggle
    assert fast["verdict"]["at_seconds"]["call"] == "behind"
    assert slow["verdict"]["at_tokens"]["call"] == "behind"
    assert lonely["verdict"]["at_tokens"] == {**lonely["verdict"]["at_tokens"], "call": "inconclusive", "mean": None}
    assert report["strategies"]["grpo"]["verdict"] is None
    # the one-lr grid: every best lr is flagged
    assert {e["best_lr_at_edge"] for e in report["strategies"].values()} == {"only"}
    # steps to grpo's final: fast a point inside its interval, slow never (all null, with why), lonely unpaired
    steps = fast["steps_to_baseline_final"]
    assert steps["ratio"] < 1 and steps["reason"] is None and steps["ratio_low"] <= steps["ratio"] <= steps["ratio_high"]
    assert math.isnan(slow["steps_to_baseline_final"]["ratio"])
    assert slow["steps_to_baseline_final"]["reason"] == ("the strategy's mean curve never reached the baseline's mean "
                                                         "final accuracy")
    assert "steps_to_baseline_final" not in lonely
    document = json.loads(json.dumps(jsonable(report), allow_nan=False))
    _nulls_have_reasons(document)

    text = format_report(report)
    assert text.startswith("## Verdict\n")
    assert "- **fast (lr 0.001)**: at equal tokens **ahead** (" in text
    assert "at equal seconds **behind**" in text
    assert "- **lonely (lr 0.001)**: at equal tokens **no resolved difference** (no seed that both it and the " \
           "baseline " in text
    assert "inconclusive" not in text.split("## The runs")[0] and " level" not in text  # the words say what was shown
    # the verdict gives the interval as the range it spans: mean ± half as "low to high"
    mean, half = fast["paired_mean_ci95"]["at_tokens"]
    assert f"at equal tokens **ahead** ({mean - half:+.3f} to {mean + half:+.3f})" in text
    # and what it cost: fast draws grpo's tokens in 3x its seconds, seed by seed
    assert "Cost, per seed against the same seed's run (geometric mean [95% interval]): 1.00x [1.00, 1.00] grpo's " \
           "tokens, 3.00x [3.00, 3.00] grpo's seconds." in text
    assert "(a one-lr grid says nothing about the lr)" in text and "(edge: the grid's only lr)" in text
    # every '-' cell carries a footnote, and every footnote is there
    slow_row = next(line for line in text.splitlines() if line.startswith("| slow @") and "(edge" in line)
    assert re.search(r"\| -[¹²³⁴⁵⁶⁷⁸⁹] \|", slow_row)  # its steps to grpo's final, with why
    for mark in {c for line in text.splitlines() for c in line if c in "¹²³⁴⁵⁶⁷⁸⁹"}:
        assert any(line.startswith(f"{mark} ") for line in text.splitlines()), mark
    assert not any(cell.strip() == "-" for line in text.splitlines() if line.startswith("|")
                   for cell in line.split("|")), "a bare '-' cell"
    plot_report(report, tmp_path / "report.png")  # one lr, three seeds, no strata: draws, notes where data lacks
    assert (tmp_path / "report.png").stat().st_size > 0


def test_a_baseline_that_never_improves_gives_no_ratio_and_says_why():
    runs = {("grpo", 1.0, s): _run(_line([0.3, 0.2, 0.25])) for s in (0, 1)}
    runs.update({("ada", 1.0, s): _run(_line([0.3, 0.35, 0.4])) for s in (0, 1)})
    steps = analyse(runs, ["grpo", "ada"], [1.0], "grpo", "tokens")["strategies"]["ada"]["steps_to_baseline_final"]
    assert all(math.isnan(steps[k]) for k in ("ratio", "ratio_low", "ratio_high"))  # null in report.json
    assert steps["reason"].startswith("the baseline's mean curve never improved on its start")


# -- where it lands ------------------------------------------------------------------------------------------------
def _evals(hard, easy, pass2, entropy):
    return {"eval/accuracy/hard": hard, "eval/num_prompts/hard": [3.0] * 3, "eval/accuracy/easy": easy,
            "eval/num_prompts/easy": [2.0] * 3, "eval/pass@1": [None] * 3, "eval/pass@2": pass2,
            "eval/entropy": entropy}


def test_breakdown_by_stratum_pass_at_k_and_entropy_by_hand():
    strata = {"counts": {"hard": 3, "easy": 2}, "num_samples": 16, "bounds": [0.2, 0.5], "digest": "same"}
    dynamics = {"samples_per_step": [10, 12, 14, 16, 18, 20, 22, 24], "active_by_round": {1: 1.0, 2: 0.5},
                "budget_by_pass_rate": {"0.0-0.2": [2, 40]}}
    runs = {}
    for seed in (0, 1):
        runs[("grpo", 1.0, seed)] = _run(_line([0.2, 0.3, 0.4]), strata=strata, dynamics=dynamics,
                                         evals=_evals([0.1, 0.1, 0.2], [0.5, 0.6, 0.7], [0.3, 0.4, 0.5],
                                                      [0.6, 0.5, 0.4]))
        # twice grpo's tokens per step: at grpo's 800 tokens it has made 4 steps (its second evaluation)
        runs[("ada", 1.0, seed)] = _run(_line([0.2, 0.35, 0.5], tokens_per_step=200), strata=strata,
                                        dynamics=dynamics,
                                        evals=_evals([0.1, 0.2 + 0.1 * seed, 0.4 + 0.1 * seed], [0.5, 0.6, 0.6],
                                                     [0.3, 0.5, 0.6], [0.6, 0.55, 0.5]))
    report = analyse(runs, ["grpo", "ada"], [1.0], "grpo", "tokens")
    ada = report["strategies"]["ada"]["breakdown"]
    hard = ada["strata"]["by_stratum"]["hard"]
    assert hard["num_prompts"] == 3 and hard["final"] == pytest.approx(0.45)
    assert hard["paired"]["at_steps"] == pytest.approx([0.4 - 0.2, 0.5 - 0.2])      # at step 8 vs grpo's final
    assert hard["paired"]["at_tokens"] == pytest.approx([0.2 - 0.2, 0.3 - 0.2])     # at 800 tokens: ada step 4, grpo 8
    easy = ada["strata"]["by_stratum"]["easy"]
    # both seeds the same difference: an interval of zero width, no resolved difference (it needs more seeds)
    assert easy["paired"]["at_steps"] == pytest.approx([-0.1, -0.1]) and easy["paired"]["verdict"]["at_steps"][
        "call"] == "inconclusive"
    assert report["strategies"]["grpo"]["breakdown"]["strata"]["by_stratum"]["hard"]["baseline_start"] == 0.1
    # pass@k: only the k every run logged a value for (pass@1 here is all None: left out of the curve's k)
    assert list(ada["pass_at_k"]) == ["2"]
    assert ada["pass_at_k"]["2"]["at_steps"] == pytest.approx(0.6)
    assert ada["pass_at_k"]["2"]["at_tokens"] == pytest.approx(0.5)
    assert ada["pass_at_k"]["2"]["paired"]["at_tokens"] == pytest.approx([0.0, 0.0])
    assert ada["entropy"]["at_steps"] == pytest.approx(0.5) and ada["entropy"]["at_tokens"] == pytest.approx(0.55)
    assert ada["entropy"]["path"] == [[0, 0.6, 0.2], [4, 0.55, 0.35], [8, 0.5, 0.5]]
    assert ada["dynamics"]["active_by_round"] == {"1": 1.0, "2": 0.5}
    assert ada["dynamics"]["budget_by_pass_rate"] == {"0.0-0.2": [4.0, 80.0]}  # summed over the two seeds
    text = format_report(report)
    assert "| ada | hard | 3.0 | 0.100 | 0.200 | 0.450 | +0.250 ± " in text
    assert "By difficulty stratum at grpo's tokens:" in text
    assert "pass@2 (the largest k its evaluations give): at equal tokens no resolved difference (+0.000 to +0.000); " \
           "at equal steps " in text
    # entropy paired like pass@k: ada at grpo's 800 tokens (its step 4) 0.55 against grpo's 0.4, at step 8 0.5 vs 0.4
    assert ada["entropy"]["paired"]["at_tokens"] == pytest.approx([0.15, 0.15])
    assert ada["entropy"]["paired"]["at_steps"] == pytest.approx([0.1, 0.1])
    # two seeds of the same difference gave "ahead (+0.150 to +0.150)" and "+0.150 ± 0.000": no interval at all
    zero_width = ("every one of the 2 paired seeds gave the same difference, an interval of zero width that says "
                  "nothing of the spread: it needs more seeds")
    assert (f"Held-out token entropy (nats): at equal tokens no resolved difference (+0.150; {zero_width}); at equal "
            f"steps no resolved difference (+0.100; {zero_width}).") in text
    mark = re.search(r"\| ada \| 0\.500 \(\+0\.000 ± 0\.000\) \| 0\.550 \(\+0\.150(\S+)\) \|", text).group(1)
    assert f"\n{mark} every paired seed gave the same difference: an interval of zero width says nothing of the " \
           f"spread, it needs more seeds" in text  # pass@2 and entropy at its tokens, the footnote saying why
    # a seed whose runs fixed other strata is left out of the strata and named
    runs[("ada", 1.0, 1)]["strata"] = {**strata, "digest": "other"}
    again = analyse(runs, ["grpo", "ada"], [1.0], "grpo", "tokens")["strategies"]["ada"]["breakdown"]["strata"]
    assert again["seeds_with_other_strata"] == [1] and again["by_stratum"]["hard"]["paired"]["at_steps"] == \
        pytest.approx([0.2])


def test_the_documented_report_is_what_compare_writes_from_the_committed_json():
    """docs/compare.md's "A real report" is report.md as `compare` writes it from its committed report.json (the
    runs' own notes on seconds follow it), so the words and numbers shown are this version's."""
    root = Path(__file__).resolve().parents[2]
    report = json.loads((root / "benchmarks" / "results" / "compare_builtin_2x3.json").read_text())
    assert report["format"] == REPORT_FORMAT and report["selection"]["rule"] == "split"
    docs = (root / "docs" / "compare.md").read_text()
    shown = docs[docs.index("#### Verdict"):docs.index("How to read it.")]
    shown = "\n".join(line for line in shown.splitlines() if "img/compare-builtin-2x3.png" not in line)
    shown = re.sub(r"^#### ", "## ", shown, flags=re.M)
    assert shown.startswith(format_report(report).rstrip("\n"))


@pytest.mark.fault("compare from 2 seeds: \"steps to grpo's final 0.59 [0.59, 0.59]\"",
                   "the ratio without an interval, footnoted: 2 paired seeds are too few for the bootstrap interval, "
                   "which needs more seeds; an interval of zero width from more seeds says the same")
def test_a_steps_ratio_from_too_few_seeds_or_of_zero_width_has_no_interval():
    def grid(seeds, wiggle):
        runs = {}
        for seed in seeds:
            runs[("grpo", 1e-3, seed)] = _run(_line([0.2, 0.3, 0.4 + wiggle * seed]))
            runs[("fast", 1e-3, seed)] = _run(_line([0.2, 0.45, 0.5 + 2 * wiggle * seed]))
        return runs

    two = analyse(grid((0, 1), 0.01), ["grpo", "fast"], [1e-3], "grpo", "tokens")
    steps = two["strategies"]["fast"]["steps_to_baseline_final"]
    assert steps["ratio"] < 1 and math.isnan(steps["ratio_low"]) and math.isnan(steps["ratio_high"])
    assert steps["reason"] == ("2 paired seeds: too few for the bootstrap interval, which needs more seeds (at least "
                               "3)")
    assert two["strategies"]["grpo"]["steps_to_baseline_final"]["ratio_low"] == 1.0  # the baseline: exactly 1 [1, 1]
    text = format_report(two)
    mark = re.search(rf"\| {steps['ratio']:.2f}(\S+) \|", text).group(1)
    assert f"\n{mark} {steps['reason']}" in text
    same = analyse(grid((0, 1, 2), 0.0), ["grpo", "fast"], [1e-3], "grpo", "tokens")["strategies"]["fast"]
    steps = same["steps_to_baseline_final"]  # every seed alike: every resample crosses at the same point
    assert math.isnan(steps["ratio_low"]) and steps["reason"].startswith("every bootstrap resample of the 3 seeds "
                                                                         "crossed at the same evaluation step")
    _nulls_have_reasons(json.loads(json.dumps(jsonable(two), allow_nan=False)))
