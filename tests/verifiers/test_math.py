"""The math verifier: equivalent answers accepted, wrong ones rejected, a hanging input cut off by the timeout."""

from __future__ import annotations

import threading
import time

import pytest

pytest.importorskip("math_verify")

from reinforce_ada.types import Completion, Prompt  # noqa: E402
from reinforce_ada.verifiers import MathVerifier, get_verifier, verifier_stats  # noqa: E402

EQUIVALENT = [  # (reference answer, completion)
    ("\\frac{1}{2}", "so the answer is \\boxed{0.5}"),
    ("0.5", "\\boxed{\\dfrac{1}{2}}"),
    ("1/2", "\\boxed{\\tfrac{1}{2}}"),
    ("[0,1)", "the set is \\boxed{[0, 1)}"),
    ("\\left[0,1\\right)", "\\boxed{[0,1)}"),
    ("(1,2)", "\\boxed{\\left( 1, 2 \\right)}"),
    ("5", "\\boxed{5 \\text{ cm}}"),
    ("5", "The length is 5 cm"),
    ("2\\sqrt{2}", "\\boxed{\\sqrt{8}}"),
    ("\\frac{\\sqrt{2}}{2}", "\\boxed{\\frac{1}{\\sqrt{2}}}"),
    ("x^2+1", "\\boxed{1 + x^2}"),
    ("42", "First I guessed \\boxed{7}, but finally \\boxed{42}"),
    ("\\boxed{3}", "\\boxed{3.0}"),
    (12, "\\boxed{12}"),
    ("1000", "\\boxed{1,000}"),
]

WRONG = [
    ("\\frac{1}{2}", "\\boxed{0.51}"),
    ("[0,1)", "\\boxed{[0,1]}"),
    ("2\\sqrt{2}", "\\boxed{\\sqrt{2}}"),
    ("42", "\\boxed{42} at first, then \\boxed{7}"),
    ("x^2+1", "\\boxed{x^2-1}"),
    ("5", "\\boxed{-5}"),
    ("5", "I have no idea"),
    ("5", ""),
    ("5", "\\boxed{5"),  # a box cut off mid-answer is no answer
]


@pytest.fixture(scope="module")
def verifier():
    with MathVerifier(num_workers=2, timeout=30.0) as v:
        yield v


def _score(verifier, pairs):
    prompts = [Prompt(f"p{i}", "question", answer=answer) for i, (answer, _) in enumerate(pairs)]
    completions = [Completion(p.prompt_id, text) for p, (_, text) in zip(prompts, pairs)]
    return verifier(prompts, completions)


def test_accepts_equivalent_answers(verifier):
    rewards = _score(verifier, EQUIVALENT)
    rejected = [pair for pair, reward in zip(EQUIVALENT, rewards) if reward != 1.0]
    assert rejected == []


def test_rejects_wrong_answers(verifier):
    rewards = _score(verifier, WRONG)
    accepted = [pair for pair, reward in zip(WRONG, rewards) if reward != 0.0]
    assert accepted == []


def test_fast_path_settles_plain_matches_without_a_worker(verifier):
    before = verifier_stats(verifier)
    rewards = _score(verifier, [("46", "\\boxed{46}"), ("46", "\\boxed{47}"), ("\\frac{1}{2}", "\\boxed{ \\frac{1}{2} }"),
                                ("\\frac{1}{2}", "\\boxed{0.5}")])
    after = verifier_stats(verifier)
    assert rewards == [1.0, 0.0, 1.0, 1.0]
    assert after["fast_path"] - before["fast_path"] == 3
    assert after["checked"] - before["checked"] == 1
    assert after["completions"] - before["completions"] == 4


def test_missing_or_unparsable_reference_is_unscored(verifier):
    before = verifier_stats(verifier)["no_reference"]
    assert _score(verifier, [(None, "\\boxed{1}"), ("", "\\boxed{1}")]) == [None, None]
    assert verifier_stats(verifier)["no_reference"] - before == 2


def test_require_boxed():
    with get_verifier("math", require_boxed=True, num_workers=1, timeout=30.0) as strict:
        assert _score(strict, [("5", "The answer is 5"), ("5", "\\boxed{5}")]) == [0.0, 1.0]
        assert strict.stats["no_answer"] == 1


def _call_with_guard(fn, limit_s: float):
    """Run fn() in a thread; fail (instead of hanging the suite) if it has not returned after limit_s."""
    result: dict = {}
    thread = threading.Thread(target=lambda: result.setdefault("value", fn()), daemon=True)
    thread.start()
    thread.join(limit_s)
    assert not thread.is_alive(), f"the verifier call did not return within {limit_s}s"
    return result["value"]


def test_timeout_cuts_off_a_hanging_completion_and_scores_it_zero():
    # math-verify does not finish on 9^{9^{9}} (measured: still running after 15 s, without growing memory).
    timeout = 1.0
    pairs = [("1", "\\boxed{9^{9^{9}}}"), ("\\frac{1}{2}", "\\boxed{0.5}"), ("3", "\\boxed{\\sqrt{9}}")]
    with MathVerifier(num_workers=2, timeout=timeout) as v:
        _score(v, [("\\frac{1}{2}", "\\boxed{0.5}")])  # warm the workers so start-up is not part of the check
        start = time.monotonic()
        rewards = _call_with_guard(lambda: _score(v, pairs), limit_s=120)
        elapsed = time.monotonic() - start
        assert rewards == [0.0, 1.0, 1.0]
        assert v.stats["timeouts"] == 1
        assert v._pool.num_replaced == 1  # the hung worker was killed and replaced...
        assert _score(v, [("2", "\\boxed{\\frac{4}{2}}")]) == [1.0]  # ...and the pool still works
    # Loose bound: the hanging item alone would take > 15 s; we waited about `timeout`.
    assert elapsed < timeout + 10


def test_errors_are_clear():
    with pytest.raises(ValueError, match="timeout"):
        MathVerifier(timeout=0)
    with pytest.raises(ValueError, match="num_workers"):
        MathVerifier(num_workers=0)
    v = MathVerifier(num_workers=1)
    with pytest.raises(ValueError, match="one prompt per completion"):
        v([Prompt("p", "q", answer="1")], [])


def test_missing_math_verify_gives_a_clear_error(monkeypatch):
    import importlib.util

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "math_verify" else real_find_spec(name, *a))
    with pytest.raises(ImportError, match=r"pip install 'reinforce-ada\[math\]'"):
        get_verifier("math")


def test_a_pickled_verifier_gets_its_own_workers(verifier):
    import pickle

    copy = pickle.loads(pickle.dumps(verifier))
    try:
        assert copy._pool is not verifier._pool
        assert _score(copy, [("\\frac{1}{2}", "\\boxed{0.5}")]) == [1.0]
    finally:
        copy.close()
