"""Each exit rule's two forms agree: the predicate the samplers check and the threshold form allocation plans with."""

import itertools

import pytest

from reinforce_ada.core.allocation.exit_probability import THRESHOLD_EXIT_RULES, exit_needs
from reinforce_ada.core.exits import EXIT_RULES, EXIT_THRESHOLDS, get_exit_rule


def test_every_built_in_rule_has_a_threshold_form():
    assert EXIT_THRESHOLDS.names() == EXIT_RULES.names()
    assert sorted(THRESHOLD_EXIT_RULES) == EXIT_THRESHOLDS.names()


@pytest.mark.parametrize("name", sorted(THRESHOLD_EXIT_RULES))
def test_the_rule_holds_exactly_when_nothing_more_is_needed(name):
    for num_positive, num_negative, group_size, min_positive in itertools.product(range(9), range(9), range(1, 9),
                                                                                   range(1, 4)):
        holds = get_exit_rule(name, min_positive=min_positive)(num_positive, num_negative, group_size)
        needs = exit_needs(name, num_positive, num_negative, group_size, min_positive=min_positive)
        assert holds == (needs == (0, 0)), (name, num_positive, num_negative, group_size, min_positive, needs)


def test_threshold_form_by_hand():
    # balanced, n = 5: 5 // 2 = 2 positives and 5 - 2 = 3 negatives
    assert exit_needs("balanced", 1, 0, 5) == (2 - 1, 3 - 0)
    assert exit_needs("positive", 0, 7, 4, min_positive=2) == (2, 0)
    assert exit_needs("mixed", 4, 0, 4) == (0, 1)
    assert exit_needs("once", 0, 0, 4) == (0, 0)
