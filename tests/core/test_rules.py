"""Exit, selection and allocation rules, and the registry they live in."""

from __future__ import annotations

import numpy as np
import pytest

from reinforce_ada.core import EXIT_RULES, SELECTION_RULES, Registry, get_allocation_rule, get_exit_rule
from reinforce_ada.core.selection import get_selection_rule


@pytest.mark.parametrize("pos, neg, n, expected", [
    (2, 2, 4, True), (1, 15, 4, False), (2, 1, 4, False), (8, 8, 4, True), (0, 0, 4, False),
    (2, 3, 5, True), (3, 2, 5, False), (1, 1, 2, True), (1, 0, 2, False),
])
def test_balanced_exit(pos, neg, n, expected):
    assert get_exit_rule("balanced")(pos, neg, n) is expected


def test_positive_and_once_exits():
    assert get_exit_rule("positive")(1, 0, 4) and not get_exit_rule("positive")(0, 32, 4)
    assert not get_exit_rule("positive", min_positive=2)(1, 7, 4)
    assert get_exit_rule("positive", min_positive=2)(2, 6, 4)
    assert get_exit_rule("once")(0, 0, 4)
    custom = lambda p, q, n: p + q > 100  # noqa: E731
    assert get_exit_rule(custom) is custom
    assert EXIT_RULES.names() == ["balanced", "mixed", "once", "positive"]
    with pytest.raises(ValueError, match="unknown exit rule 'pos'; registered: balanced, mixed, once, positive"):
        get_exit_rule("pos")


@pytest.mark.parametrize("pos, neg, n, expected", [
    (1, 1, 4, True), (1, 3, 4, True), (3, 1, 4, True), (0, 32, 4, False), (32, 0, 4, False), (0, 0, 4, False),
    (1, 0, 2, False),
])
def test_mixed_exit(pos, neg, n, expected):
    assert get_exit_rule("mixed")(pos, neg, n) is expected


def test_mixed_exit_beta_allocation():
    from reinforce_ada.core.allocation.exit_probability import beta_request, exit_needs, exit_probabilities

    assert exit_needs("mixed", 0, 0, 4) == (1, 1) and exit_needs("mixed", 2, 0, 4) == (0, 1)
    assert exit_needs("mixed", 1, 5, 4) == (0, 0)
    # uniform prior, empty pool: P(both classes in k) = 1 - 2/(k+1); with min_more=4 the first 3 are 0
    probs = exit_probabilities(1.0, 1.0, 1, 1, 6, min_more=4)
    assert probs[:4] == [0.0] * 4
    assert probs[4:] == pytest.approx([1 - 2 / 5, 1 - 2 / 6, 1 - 2 / 7])
    # one positive, uniform prior -> Beta(2, 1): P(a negative in k) = 1 - 2/(k+2); 3 more needed for a group of 4
    k, prob = beta_request(1, 1, 0, 32, 4, exit_rule="mixed", target=0.5)
    assert (k, prob) == (3, pytest.approx(1 - 2 / 5))
    # the balanced rule needs more from the same pool: one more positive and two negatives
    assert beta_request(1, 1, 0, 32, 4, exit_rule="balanced", target=0.5)[0] > k


def select(name, pattern, n, seed=0):
    is_positive = np.array([c == "+" for c in pattern])
    keep = get_selection_rule(name)(is_positive, n, np.random.default_rng(seed))
    assert keep.dtype == np.int64 and len(set(keep.tolist())) == len(keep)
    return "".join("+" if is_positive[i] else "-" for i in keep)


@pytest.mark.parametrize("name, pattern, n, expected", [
    ("balanced", "+-+-+---", 4, "++--"),
    ("balanced", "+-------", 4, "+---"),       # short of positives: topped up with negatives
    ("balanced", "+++++++-", 4, "+++-"),       # short of negatives: topped up with positives
    ("balanced", "--------", 4, "----"),
    ("balanced", "+-+--+--", 5, "++---"),      # odd n: n // 2 positives
    ("balanced", "+-", 4, "+-"),               # pool smaller than n: keep all
    ("positive_focused", "+" * 2 + "-" * 14, 4, "+---"),   # round(4 * 2/16) = 0 -> at least one positive
    ("positive_focused", "+" * 12 + "-" * 4, 4, "+++-"),   # round(4 * 12/16) = 3
    ("positive_focused", "-" * 8, 4, "----"),
    ("random", "++++", 4, "++++"),
    ("all", "+-+-+---", 4, "+-+-+---"),        # the whole pool, larger than n, in pool order
    ("all", "+-", 4, "+-"),
    ("all", "--------", 4, "--------"),
])
def test_selection_class_counts(name, pattern, n, expected):
    assert select(name, pattern, n) == expected


def test_random_selection_is_a_sorted_subset():
    keep = get_selection_rule("random")(np.zeros(10, dtype=bool), 4, np.random.default_rng(3))
    assert len(keep) == 4 and keep.tolist() == sorted(set(keep.tolist())) and keep.max() < 10
    assert SELECTION_RULES.names() == ["all", "balanced", "positive_focused", "random"]


def test_all_selection_keeps_every_index_and_leaves_the_rng_alone():
    rng = np.random.default_rng(7)
    before = rng.bit_generator.state
    keep = get_selection_rule("all")(np.array([True, False] * 16), 4, rng)
    assert keep.tolist() == list(range(32)) and keep.dtype == np.int64
    assert rng.bit_generator.state == before  # no random choice: the other rules' draws are not shifted
    assert get_selection_rule("all")(np.zeros(0, dtype=bool), 4, rng).tolist() == []


@pytest.mark.parametrize("num_drawn, expected", [(0, 8), (24, 8), (30, 2), (32, 0), (40, 0)])
def test_fixed_allocation_stays_within_budget(num_drawn, expected):
    assert get_allocation_rule("fixed")(num_drawn, 0, num_drawn, 8, 32, 4) == expected


def test_registry():
    reg: Registry = Registry("widget")

    @reg.register("a")
    def a():
        return 1

    assert reg.get("a") is a and "a" in reg and "b" not in reg and reg.names() == ["a"]
    with pytest.raises(ValueError, match="widget 'a' is already registered"):
        reg.register("a")(lambda: 2)
    with pytest.raises(ValueError, match="unknown widget 'b'; registered: a"):
        reg.get("b")


def test_positive_focused_keeps_one_of_each_class_when_both_exist():
    import numpy as np

    from reinforce_ada.core.selection import positive_focused

    rng = np.random.default_rng(0)
    mostly_positive = np.array([True] * 7 + [False])
    kept = positive_focused(mostly_positive, 4, rng)
    assert sorted(mostly_positive[kept].tolist()) == [False, True, True, True]  # round(4 * 7/8) = 4, capped at 3
    mostly_negative = np.array([True] + [False] * 15)
    kept = positive_focused(mostly_negative, 4, rng)
    assert sorted(mostly_negative[kept].tolist()) == [False, False, False, True]  # round(4/16) = 0, raised to 1
