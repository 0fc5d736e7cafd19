"""Registry, exact, arithmetic and TRL-function verifiers, answer extraction and the worker pool."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from reinforce_ada.types import Completion, Prompt
from reinforce_ada.verifiers import (
    ExactMatchVerifier,
    RewardFunctionVerifier,
    get_verifier,
    list_verifiers,
    register_verifier,
    verifier_stats,
)
from reinforce_ada.verifiers.extract import extract_answer_tag, extract_boxed, extract_last_line
from reinforce_ada.verifiers.pool import WorkerPool

sys.path.insert(0, str(Path(__file__).parent))


def _batch(answer, texts, prompt="q"):
    prompts = [Prompt(f"p{i}", prompt, answer=answer) for i in range(len(texts))]
    return prompts, [Completion(p.prompt_id, t) for p, t in zip(prompts, texts)]


def test_registry_names_and_errors():
    assert {"math", "exact", "arithmetic", "reasoning-gym"} <= set(list_verifiers())
    assert isinstance(get_verifier("exact", extract="last_line"), ExactMatchVerifier)
    with pytest.raises(ValueError, match="unknown verifier 'nope'.*arithmetic"):
        get_verifier("nope")
    with pytest.raises(ValueError, match="already registered"):
        register_verifier("exact")(ExactMatchVerifier)
    with pytest.raises(TypeError):
        get_verifier("exact", no_such_option=1)


def test_register_custom_verifier():
    @register_verifier("test-always-half")
    def _factory(**options):
        return lambda prompts, completions: [0.5] * len(completions)

    assert get_verifier("test-always-half")(*_batch("x", ["a", "b"])) == [0.5, 0.5]


def test_exact_extraction_modes():
    prompts, completions = _batch("42", ["blah\n  42 ", "\\boxed{42} done", "<answer> 42 </answer>", "$42$.", "41"])
    assert ExactMatchVerifier()(prompts, completions) == [1.0, 1.0, 0.0, 1.0, 0.0]
    assert ExactMatchVerifier(extract="answer_tag")(prompts, completions) == [0.0, 0.0, 1.0, 0.0, 0.0]
    assert ExactMatchVerifier(extract="boxed")(prompts, completions) == [0.0, 1.0, 0.0, 0.0, 0.0]
    case = ExactMatchVerifier(case_sensitive=False)
    assert case(*_batch("Paris", ["PARIS", "paris ", "Lyon"])) == [1.0, 1.0, 0.0]
    assert ExactMatchVerifier()(*_batch(None, ["x"])) == [None]
    with pytest.raises(ValueError, match="extract"):
        ExactMatchVerifier(extract="first_word")


def test_arithmetic_parses_integers_and_never_evaluates():
    verifier = get_verifier("arithmetic")
    texts = ["46", "46<eos><pad>", "46\n12", " +46 ", "046", "45", "40+6", "2*23", "forty-six", "", "46.0",
             "__import__('os')", "4" * 5000]
    assert verifier(*_batch("46", texts)) == [1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    assert verifier(*_batch("-7", ["-7", "7"])) == [1.0, 0.0]
    assert verifier(*_batch(None, ["1"])) == [None]
    assert verifier(*_batch("x", ["1"])) == [None]
    assert verifier_stats(verifier)["no_answer"] == 7  # all but the integers "45" and "7"


def test_trl_function_by_import_path():
    verifier = get_verifier("helpers_reward:length_matches")
    assert isinstance(verifier, RewardFunctionVerifier)
    assert verifier(*_batch("hi", ["yo", "hello"])) == [1.0, 0.0]
    with pytest.raises(ImportError, match="no_such_module"):
        get_verifier("no_such_module:fn")
    with pytest.raises(AttributeError, match="missing"):
        get_verifier("helpers_reward:missing")
    with pytest.raises(TypeError, match="not a callable"):
        get_verifier("helpers_reward:NOT_CALLABLE")


def test_trl_function_receives_columns_and_conversational_completions():
    seen = {}

    def reward(prompts, completions, **kwargs):
        seen.update(prompts=prompts, completions=completions, **kwargs)
        return [1.0, None]

    verifier = RewardFunctionVerifier(reward, answer_key="solution", scale=2)
    chat = [{"role": "user", "content": "hi"}]
    prompts = [Prompt("a", chat, answer="1", metadata={"level": 3}), Prompt("b", "plain", answer="2")]
    completions = [Completion("a", "x", token_ids=[5, 6]), Completion("b", "y")]
    assert verifier(prompts, completions) == [1.0, None]
    assert seen["prompts"] == [chat, "plain"]
    assert seen["completions"] == [[{"role": "assistant", "content": "x"}], "y"]
    assert seen["solution"] == ["1", "2"] and seen["level"] == [3, None] and seen["scale"] == 2
    assert seen["completion_ids"] == [[5, 6], []]
    assert verifier.stats == {"completions": 2, "none": 1}
    bad = RewardFunctionVerifier(lambda prompts, completions, **kw: [1.0])
    with pytest.raises(ValueError, match="1 rewards for 2 completions"):
        bad(prompts, completions)


def test_extractors():
    assert extract_boxed("\\boxed{\\frac{1}{2}} and \\boxed{x^{2}}") == "x^{2}"
    assert extract_boxed("\\fbox{7}") == "7"
    assert extract_boxed("\\boxed 5 apples") == "5"
    assert extract_boxed("\\boxedx{3}") is None
    assert extract_boxed("\\boxed{\\{1,2\\}}") == "\\{1,2\\}"
    assert extract_boxed("\\boxed{" + "{" * 10000) is None  # unbalanced, long: linear scan, no answer
    assert extract_last_line("a\n b \n\n") == "b"
    assert extract_answer_tag("<answer>1</answer> then <answer> 2 </answer>") == "2"
    assert extract_answer_tag("<answer>1") is None


def test_pool_runs_items_and_reports_errors():
    pool = WorkerPool(abs, num_workers=2, timeout=30.0)
    try:
        outcomes = pool.map([(-3,), ("x",), (4,)])
        assert [o.status for o in outcomes] == ["ok", "error", "ok"]
        assert outcomes[0].value == 3 and outcomes[2].value == 4 and "TypeError" in outcomes[1].value
        assert pool.map([]) == []
    finally:
        pool.close()


def test_pool_kills_a_hung_worker_and_keeps_going():
    pool = WorkerPool(time.sleep, num_workers=1, timeout=1.0)
    try:
        pool.map([(0,)])  # start-up is not part of the check
        start = time.monotonic()
        outcomes = pool.map([(3600,), (0,)])  # the first item would sleep for an hour
        elapsed = time.monotonic() - start
        assert [o.status for o in outcomes] == ["timeout", "ok"]
        assert pool.num_replaced == 1
        assert elapsed < 60  # an hour without the timeout
    finally:
        pool.close()


def test_pool_reports_a_crashed_worker():
    import os

    pool = WorkerPool(os._exit, num_workers=1, timeout=30.0)
    try:
        assert [o.status for o in pool.map([(3,)])] == ["crash"]
        assert pool.num_replaced == 1
    finally:
        pool.close()


def test_pool_rejects_bad_settings():
    with pytest.raises(ValueError, match="num_workers"):
        WorkerPool(abs, num_workers=0, timeout=1)
    with pytest.raises(ValueError, match="timeout"):
        WorkerPool(abs, num_workers=1, timeout=0)


def test_a_callable_verifier_is_returned_unchanged():
    def mine(prompts, completions):
        return [1.0] * len(completions)

    assert get_verifier(mine) is mine
    with pytest.raises(ValueError, match="ignored"):
        get_verifier(mine, timeout=3)


@pytest.mark.parametrize("text, answer, reward", [
    ("42", "42", 1.0),
    ("The answer is 42.", "42", 1.0),  # trailing text
    ("37 + 5 = 42", "42", 1.0),  # the last number, not the first
    ("42 is what 37 + 5 makes", "42", 0.0),  # ... even when the answer came first
    ("3 - 8 = -5", "-5", 1.0),  # a sign directly before the digits
    ("3 - 8 = 5", "-5", 0.0),
    ("\u22125", "-5", 1.0),  # the minus sign U+2212
    ("+7", "7", 1.0),
    ("7 - 2", "2", 1.0),  # "- 2" with a space is not a negative number
    ("5-3", "-3", 1.0),  # "-3" directly after a digit is still read with its sign
    ("42.0", "42", 1.0),
    ("42.5", "42", 0.0),  # not an integer, so not the answer
    ("4 2", "42", 0.0),
    ("forty-two", "42", 0.0),  # no number
    ("", "42", 0.0),
])
def test_last_integer_reads_the_last_number(text, answer, reward):
    prompt = Prompt("q", "What is it? Reply with just the number.", answer=answer)
    assert get_verifier("last-integer")([prompt], [Completion("q", text)]) == [reward]
