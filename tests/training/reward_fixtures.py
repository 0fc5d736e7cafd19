"""Module-level reward functions for the run-safety tests (importable by name, so workers and the CLI can load them)."""

import time


def always_raises(prompts, completions, **kwargs):
    raise ValueError("this reward function is broken")


def always_none(prompts, completions, **kwargs):
    return [None] * len(completions)


def sleeps_30s(prompts, completions, **kwargs):
    time.sleep(30)
    return [1.0] * len(completions)


def correct(prompts, completions, solution, **kwargs):
    """The docs' example (docs/verifiers_and_data.md): the answer arrives as ``solution``."""
    return [float(c.strip()[:1] == str(s)[:1]) for c, s in zip(completions, solution)]


def first_digit(prompts, completions, **kwargs):
    """Picklable twin of trainer_fixtures.digit_verifier (verifier protocol: Prompt objects in)."""
    return [1.0 if c.text[:1] == str(p.answer)[:1] else 0.0 for p, c in zip(prompts, completions)]


def as_dict(prompts, completions, answer, **kwargs):
    """Rewards keyed by position: a mapping, never read as its keys 0..n-1."""
    return {i: float(c.strip() == a) for i, (c, a) in enumerate(zip(completions, answer))}


def as_generator(prompts, completions, **kwargs):
    """A one-pass iterator of rewards: refused like a mapping."""
    return (1.0 for _ in completions)


def as_digit_strings(prompts, completions, **kwargs):
    """Entries that are strings: "1" is never read as 1.0."""
    return ["1"] * len(completions)


class RewardBlewUp(BaseException):
    """A BaseException that is not an Exception (as some libraries raise): a failed call, not a crash."""


def raises_base_exception(prompts, completions, **kwargs):
    raise RewardBlewUp("the reward server went away")


async def async_reward(prompts, completions, **kwargs):
    """``async def``: called like a plain function it returns a coroutine, never the rewards."""
    return [1.0] * len(completions)


def sleeps_5s(prompts, completions, **kwargs):
    time.sleep(5)
    return [1.0] * len(completions)


def first_digit_text(prompts, completions, answer, **kwargs):
    """TRL's signature (texts in): 1 when the completion starts with the answer's first digit."""
    return [1.0 if c[:1] == str(a)[:1] else 0.0 for c, a in zip(completions, answer)]


lambda_reward = lambda prompts, completions, **kwargs: [1.0] * len(completions)  # noqa: E731 -- a lambda on purpose
"""A module-level lambda: callable, but pickle cannot send it to a worker process (it has no name to look up)."""


def _make_closure():
    offset = 0.0

    def closure_reward(prompts, completions, **kwargs):
        return [1.0 + offset] * len(completions)

    return closure_reward


closure_reward = _make_closure()
"""A closure: callable, but pickle cannot send it either (``_make_closure.<locals>.closure_reward``)."""


def interrupts(prompts, completions, **kwargs):
    """Ctrl-C at the first call: in a run with held-out prompts, during the evaluation before the first step."""
    raise KeyboardInterrupt


def hangs_up(prompts, completions, **kwargs):
    """The process's terminal goes away while it scores (SIGHUP to itself, mid-step)."""
    import os
    import signal

    os.kill(os.getpid(), signal.SIGHUP)
    time.sleep(5)  # the handler raises here; a process that died of the signal never gets back
    return [0.0] * len(completions)


def hangs_up_and_scores(prompts, completions, answer, **kwargs):
    """SIGHUP to itself at every call, then scores: under nohup (SIGHUP ignored) the run goes on as if nothing came."""
    import os
    import signal

    os.kill(os.getpid(), signal.SIGHUP)
    return [float(c.strip() == a) for c, a in zip(completions, answer)]
