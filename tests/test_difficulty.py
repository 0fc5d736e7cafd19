"""Difficulty strata (the paper's Table 5 split) and the pass@k curve on hand-made sets whose answers are known."""

import json

import pytest

from reinforce_ada.difficulty import STRATA, Strata, check_bounds, stratum_metrics, stratum_of
from reinforce_ada.evaluation import evaluate, format_results, pass_at_k_curve, pass_at_k_ks
from reinforce_ada.types import Completion, Prompt


@pytest.mark.parametrize("correct, expected", [
    (0, "extremely_hard"), (1, "hard"), (3, "hard"),      # 3/16 = 0.1875 <= 0.2
    (4, "medium"), (8, "medium"),                         # 0.25, 0.5 (the bound is in medium)
    (9, "easy"), (16, "easy")])
def test_the_papers_strata_of_16_samples(correct, expected):
    assert stratum_of(correct, 16) == expected


def test_settable_bounds_move_the_strata():
    assert stratum_of(3, 16, (0.1, 0.9)) == "medium"
    assert stratum_of(15, 16, (0.1, 0.9)) == "easy" and stratum_of(14, 16, (0.1, 0.9)) == "medium"
    for bad in [(0.5, 0.2), (0.0, 0.5), (0.2, 1.0), (0.2,), (0.2, float("nan"))]:
        with pytest.raises(ValueError, match="bounds"):
            check_bounds(bad)


def _prompts(n):
    return [Prompt(i, f"q{i}", answer=str(i)) for i in range(n)]


def test_strata_fixed_from_counts_with_their_counts_and_lookup_by_content():
    prompts = _prompts(6)
    counts = [(8, 0), (8, 1), (8, 2), (8, 4), (8, 5), (8, 8)]  # 0, 1/8, 2/8, 4/8, 5/8, 1
    strata = Strata.fix(prompts, counts, 8, seed=7)
    assert [row["stratum"] for row in strata.rows] == ["extremely_hard", "hard", "medium", "medium", "easy", "easy"]
    assert strata.counts() == {"extremely_hard": 1, "hard": 1, "medium": 2, "easy": 2}
    # found by content, whatever the id; an unknown prompt is in none
    renamed = [Prompt(f"x{p.prompt_id}", p.prompt, answer=p.answer) for p in reversed(prompts)]
    assert strata.of(renamed + [Prompt(99, "other", answer="0")]) == [
        "easy", "easy", "medium", "medium", "hard", "extremely_hard", None]
    # the start's pass@k curve from the same samples: pass@1 is the mean pass rate
    assert strata.pass_curve()[1] == pytest.approx((0 + 1 + 2 + 4 + 5 + 8) / 48)
    assert strata.pass_curve()[8] == pytest.approx(5 / 6)  # every prompt with a correct sample
    again = Strata.from_json(json.loads(json.dumps(strata.to_json())))
    assert again == strata and again.to_json()["counts"]["medium"] == 2


def test_stratum_metrics_are_per_stratum_means_with_counts():
    strata = ["extremely_hard", "hard", "hard", "easy", None]
    counts = [(4, 1), (4, 0), (4, 2), (4, 4), (4, 4)]  # the prompt in no stratum is left out
    metrics = stratum_metrics(strata, counts)
    assert metrics["eval/accuracy/extremely_hard"] == 0.25  # it was hard at the start, not now
    assert metrics["eval/accuracy/hard"] == pytest.approx((0 + 2 / 4) / 2)
    assert metrics["eval/accuracy/easy"] == 1.0
    assert "eval/accuracy/medium" not in metrics  # empty: no accuracy, but its count
    assert [metrics[f"eval/num_prompts/{s}"] for s in STRATA] == [1, 2, 0, 1]


@pytest.mark.parametrize("n, expected", [(1, [1]), (2, [1, 2]), (4, [1, 2, 4]), (6, [1, 2, 4, 6]),
                                         (16, [1, 2, 4, 8, 16])])
def test_pass_at_k_ks(n, expected):
    assert pass_at_k_ks(n) == expected


def test_pass_at_k_curve_on_a_hand_made_set():
    # prompt A: 1 of 4 correct -> pass@1 1/4, pass@2 1 - C(3,2)/C(4,2) = 1/2, pass@4 1
    # prompt B: 2 of 4 -> 1/2, 1 - C(2,2)/C(4,2) = 5/6, 1;  prompt C: 0 of 4 -> 0, 0, 0
    curve = pass_at_k_curve([(4, 1), (4, 2), (4, 0)])
    assert curve == pytest.approx({1: (1 / 4 + 1 / 2) / 3, 2: (1 / 2 + 5 / 6) / 3, 4: 2 / 3})
    # a prompt with fewer samples than k counts at pass@(its samples); one with none at 0
    assert pass_at_k_curve([(4, 1), (2, 1), (0, 0)], [1, 4]) == pytest.approx({1: (1 / 4 + 1 / 2) / 3, 4: 2 / 3})


class Planned:
    """Completions whose text is the planned reward of each sample, in order."""

    def generate(self, requests):
        return [[Completion(r.prompt.prompt_id, r.prompt.metadata["plan"][i], token_ids=[1] * (i + 1))
                 for i in range(r.num_samples)] for r in requests]


def test_evaluate_reports_the_curve_groups_and_entropy():
    prompts = [Prompt(f"p{i}", f"q{i}", answer="1", metadata={"plan": plan})
               for i, plan in enumerate(["1000", "1100", "0000", "1111"])]
    group = {"p0": "hard", "p1": "hard", "p2": "extremely_hard", "p3": "easy"}
    seen = []

    def entropy(batch, outputs):  # pretend every token has entropy 0.5
        seen.append([p.prompt_id for p in batch])
        tokens = sum(len(c.token_ids) for cs in outputs for c in cs)
        return 0.5 * tokens, tokens

    results = evaluate(Planned(), lambda ps, cs: [float(c.text) for c in cs], {"d": prompts}, 4, batch_size=3,
                       progress=False, groups={"d": lambda p: group[p.prompt_id]}, entropy=entropy)
    row = results["datasets"]["d"]
    assert row["pass_curve"] == pytest.approx({"1": (1 + 2 + 0 + 4) / 16, "2": (0.5 + 5 / 6 + 0 + 1) / 4,
                                               "4": 3 / 4})
    assert row["groups"] == {"hard": {"num_prompts": 2, "ave@k": pytest.approx(3 / 8)},
                             "extremely_hard": {"num_prompts": 1, "ave@k": 0.0},
                             "easy": {"num_prompts": 1, "ave@k": 1.0}}
    assert row["entropy"] == 0.5 and row["num_tokens"] == 4 * (1 + 2 + 3 + 4)
    assert seen == [["p0", "p1", "p2"], ["p3"]]  # measured batch by batch
    table = format_results(results)
    assert "pass@k of d" in table and "by stratum" in table and "0.5000 nats" in table


@pytest.mark.parametrize("values, message", [
    (dict(eval_strata_hard_max=0.6), "need 0 < eval_strata_hard_max < eval_strata_medium_max < 1"),
    (dict(eval_strata_medium_max=1.0), "need 0 < eval_strata_hard_max < eval_strata_medium_max < 1"),
    (dict(eval_strata_samples=-1), "eval_strata_samples must be a non-negative integer"),
])
def test_strata_settings_are_checked_with_the_config(values, message):
    from reinforce_ada.config import ConfigError, TrainConfig

    with pytest.raises(ConfigError, match=message):
        TrainConfig(**values)
