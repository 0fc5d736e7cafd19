"""Run any verifier under a hard time limit per call, in a worker process (:class:`TimedVerifier`).

The ``math`` verifier has its own per-completion timeout; every other verifier -- ``exact``, ``arithmetic``,
``reasoning-gym`` and a user's ``module:function`` -- runs in the caller's process, where a function that hangs hangs
the trainer. :class:`TimedVerifier` moves the calls into one worker process of
:class:`~reinforce_ada.verifiers.pool.WorkerPool` (the machinery the ``math`` verifier uses): each call -- one batch,
as the sampler sends it -- gets ``timeout`` seconds; a call that runs past it is killed (the worker is replaced) and
every completion of that batch gets ``None`` ("could not score"); ``stats["timeouts"]`` counts such calls and
``stats["timed_out_completions"]`` their completions.

A verifier that hangs on everything would otherwise cost one timeout per call, and a step makes many calls (one per
round, or per request with the streaming sampler). After ``max_consecutive_timeouts`` calls in a row time out, later
calls return ``None`` at once (``stats["skipped"]``) until :meth:`reset` -- the trainer calls it at the start of each
step and evaluation, and stops the run when a whole step could not be scored.

A call that raises in the worker raises :class:`VerifierCallError` here with the worker's message, so the sampler's
usual fallback (score one completion at a time) works as without a timeout. The wrapped verifier must be picklable (a
built-in verifier, or a :class:`~reinforce_ada.verifiers.function.RewardFunctionVerifier` around a module-level
function); its ``stats`` counters are collected from the worker after every call.
"""

from __future__ import annotations

import functools
import pickle
from typing import Any, Sequence

from reinforce_ada.errors import ConfigError
from reinforce_ada.verifiers.base import check_lengths, reward_list
from reinforce_ada.verifiers.pool import WorkerPool
from reinforce_ada.verifiers.registry import verifier_stats


class VerifierCallError(RuntimeError):
    """The wrapped verifier raised in its worker process; ``detail`` is the worker's ``Type: message``."""

    def __init__(self, name: str, detail: str):
        super().__init__(f"verifier {name!r}: {detail}")
        self.detail = detail


def _call_in_worker(verifier: Any, prompts: list, completions: list) -> tuple[list, dict[str, int]]:
    """Worker side: score a batch; also return how the verifier's own counters moved during the call."""
    before = verifier_stats(verifier)
    rewards = reward_list(verifier(prompts, completions), len(completions), f"verifier {_name(verifier)!r}")
    after = verifier_stats(verifier)
    return rewards, {k: v - before.get(k, 0) for k, v in after.items() if isinstance(v, (int, float))}


def _name(verifier: Any) -> str:
    return getattr(verifier, "name", None) or getattr(verifier, "__name__", type(verifier).__name__)


def check_picklable(verifier: Any, name: str) -> None:
    """A :class:`~reinforce_ada.errors.ConfigError` naming ``verifier`` when it cannot be sent to a worker process:
    pickle sends a function by its module and name, so a lambda, a closure or a function defined inside another one
    cannot go (``train`` checks a ``module:function`` verifier with this before anything loads)."""
    try:
        pickle.dumps(verifier)
    except Exception as err:  # noqa: BLE001 -- any pickling failure means the worker cannot get it
        raise ConfigError(f"verifier {name!r} with verifier_timeout: a timed verifier runs in a worker process, so it "
                          f"must be picklable -- a function defined with def at the top level of its module (or a "
                          f"built-in verifier), not a lambda or a closure ({type(err).__name__}: {err})") from None


class TimedVerifier:
    """``verifier`` with a hard limit of ``timeout`` seconds per call (see the module docstring).

    >>> from reinforce_ada.types import Completion, Prompt
    >>> from reinforce_ada.verifiers import get_verifier
    >>> timed = TimedVerifier(get_verifier("exact"), timeout=30.0)
    >>> timed([Prompt("p", "2+2?", answer="4")], [Completion("p", "4")])
    [1.0]
    >>> timed.close()
    """

    def __init__(self, verifier: Any, timeout: float, *, max_consecutive_timeouts: int = 2, name: str | None = None):
        if not timeout > 0:
            raise ValueError(f"verifier timeout must be > 0 seconds (got {timeout})")
        check_picklable(verifier, name or _name(verifier))
        self.verifier = verifier
        self.timeout = float(timeout)
        self.max_consecutive_timeouts = max_consecutive_timeouts
        self.name = name or _name(verifier)
        self.stats: dict[str, int] = {**dict.fromkeys(verifier_stats(verifier), 0), "timeouts": 0,
                                        "timed_out_completions": 0, "skipped": 0}
        self._consecutive_timeouts = 0
        self._pool = WorkerPool(functools.partial(_call_in_worker, verifier), num_workers=1, timeout=self.timeout)

    def reset(self) -> None:
        """Start a new window (a training step): calls are tried again after a run of timeouts."""
        self._consecutive_timeouts = 0

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any]) -> list[float | None]:
        check_lengths(prompts, completions)
        if not completions:
            return []
        if self._consecutive_timeouts >= self.max_consecutive_timeouts:
            self.stats["skipped"] += len(completions)
            return [None] * len(completions)
        outcome = self._pool.map([(list(prompts), list(completions))])[0]
        if outcome.status == "ok":
            self._consecutive_timeouts = 0
            rewards, moved = outcome.value
            for key, delta in moved.items():
                self.stats[key] = self.stats.get(key, 0) + delta
            return rewards
        if outcome.status == "timeout":
            self._consecutive_timeouts += 1
            self.stats["timeouts"] += 1
            self.stats["timed_out_completions"] += len(completions)
            return [None] * len(completions)
        self._consecutive_timeouts = 0
        detail = outcome.value if outcome.status == "error" else "its worker process died"
        raise VerifierCallError(self.name, detail)

    def close(self) -> None:
        self._pool.close()
