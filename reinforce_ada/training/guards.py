"""The trainer's guards: a run that cannot learn stops early with a message that names the cause.

- **Rewards.** :class:`WatchedVerifier` wraps the trainer's verifier and remembers the first exception of each step;
  :func:`check_verifier_failures` stops the run when at least ``max_verifier_failure_rate`` of a step's (or an
  evaluation's) completions could not be scored -- the verifier raised, timed out or returned ``None``. By default that
  is a step where *every* completion failed: its rewards are all placeholders, so its update would teach nothing and
  its accuracy would be a made-up 0%. :func:`check_reward_signature` catches the commonest cause before any model
  loads: a ``module:function`` reward function that expects the answer under another keyword than it gets.
- **The update.** :func:`check_finite` is called on the advantages, every micro-batch loss and the gradient norm, so
  non-finite numbers (e.g. a reward of 1e300 overflows float32 advantages) never reach ``optimizer.step`` or a
  checkpoint.
- **The engine's weights.** :func:`check_rollout_mismatch` stops the run with :class:`StaleEngineError` when the
  generator's log-probabilities of the sampled tokens differ from the trainer's by far more than the dtype's noise:
  the engine is sampling from other weights than the ones being trained (a weight sync that did not take).
- **Prompt lengths.** :func:`check_prompt_lengths` encodes every prompt once before training and names the first row
  whose prompt plus ``max_new_tokens`` does not fit the model's context.
"""

from __future__ import annotations

import inspect
import time
from typing import Any, Callable, Sequence

from reinforce_ada.config import ConfigError
from reinforce_ada.verifiers.registry import verifier_stats


class RunStopped(RuntimeError):
    """The run cannot learn (or would write untrue numbers) and stopped; the message names the step and the cause."""


class RunInterrupted(KeyboardInterrupt):
    """An interrupt (Ctrl-C, SIGINT, SIGHUP, SIGTERM) stopped the run after its ``stopped`` event was recorded; the
    message names the interrupt and the step, and says how the run goes on: ``--resume`` from the newest checkpoint,
    or, before the first checkpoint, the same command (or ``--overwrite`` once a step was trained) to start it over.
    ``cause``: the interrupt and where alone (a command that ran the run says its own way on); ``exit_status``: 130,
    or the signal's."""

    def __init__(self, message: str, exit_status: int = 130, cause: str | None = None):
        super().__init__(message)
        self.exit_status = exit_status
        self.cause = cause if cause is not None else message


class StaleEngineError(RunStopped):
    """The generation engine samples from other weights than the trainer's (its log-probs of the sampled tokens
    disagree with the trainer's far beyond numerical noise)."""


class GenerationStopped(RunStopped):
    """The generator failed in a way another try cannot mend (a dead engine:
    :class:`~reinforce_ada.sampling.protocols.FatalGenerationError`)."""


_SIGNATURE_HINT = ("if the reward function expects the answer under another keyword, pass --verifier-answer-kwarg "
                   "NAME (TrainConfig.verifier_answer_kwarg)")


class WatchedVerifier:
    """The trainer's verifier, passed through unchanged, remembering the first exception since :meth:`start_window`."""

    def __init__(self, verifier: Any, name: str):
        self.verifier = verifier
        self.name = name
        self.first_error: str | None = None
        self._window_stats: dict[str, int] = {}
        self.seconds = 0.0  # wall time spent inside the verifier, all calls
        self._window_seconds = 0.0

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any]) -> list[float | None]:
        started = time.perf_counter()
        try:
            try:
                answer = self.verifier(prompts, completions)
            except KeyboardInterrupt:  # Ctrl-C (or raised by the reward function): the run stops as interrupted
                raise
            except SystemExit as exit_:  # sys.exit() inside a reward function: a failed call, not the end of the run
                raise RuntimeError(f"the verifier called sys.exit({exit_.code!r})") from None
            except BaseException as err:  # GeneratorExit, a user's BaseException subclass: a failed call too
                if isinstance(err, Exception):
                    raise
                raise RuntimeError(f"the verifier raised {type(err).__name__}"
                                   + (f": {err}" if str(err) else "") + " (a BaseException)") from None
        except Exception as err:
            if self.first_error is None:
                from reinforce_ada.verifiers.timed import VerifierCallError

                self.first_error = err.detail if isinstance(err, VerifierCallError) else f"{type(err).__name__}: {err}"
            raise
        finally:
            self.seconds += time.perf_counter() - started
        if self.first_error is None:  # a dict, a string, NaN, ... : scored as failures; remember why
            from reinforce_ada.sampling.scoring import reward_problem

            self.first_error = reward_problem(answer, len(completions))
        return answer

    @property
    def stats(self) -> dict[str, int]:
        return verifier_stats(self.verifier)

    def start_window(self) -> None:
        """A new step or evaluation: forget the last one's first error (and let a timed verifier try again)."""
        self.first_error = None
        self._window_stats = self.stats
        self._window_seconds = self.seconds
        if callable(getattr(self.verifier, "reset", None)):
            self.verifier.reset()

    def window_count(self, key: str) -> int:
        """How much the verifier's counter ``key`` grew since :meth:`start_window`."""
        return self.stats.get(key, 0) - self._window_stats.get(key, 0)

    def window_seconds(self) -> float:
        """Wall time spent inside the verifier since :meth:`start_window`."""
        return self.seconds - self._window_seconds

    def window_zero_scored(self) -> int:
        """Completions scored 0 although the verifier could not check them (``math``'s timeouts and failures, a
        comparison that raised: counted in ``stats``, not returned as None), since :meth:`start_window`."""
        from reinforce_ada.verifiers.timed import TimedVerifier

        if isinstance(self.verifier, TimedVerifier):  # its own timeouts are None already
            return self.window_count("failures")
        return self.window_count("failures") + self.window_count("timeouts")

    def close(self) -> None:
        if callable(getattr(self.verifier, "close", None)):
            self.verifier.close()


TRAINING_STOPS = ("Rewards that are all failures teach nothing, so the run stops here: nothing from this step was "
                  "trained or saved.")


def check_verifier_failures(where: str, num_failed: int, num_total: int, limit: float,
                            verifier: WatchedVerifier, consequence: str = TRAINING_STOPS) -> None:
    """Stop the run when the share of completions that could not be scored -- ``num_failed`` (None rewards) plus
    those the verifier scored 0 after a timeout or an error -- reaches ``limit``; name the verifier and the cause,
    then ``consequence`` (what was not done because of it)."""
    zero_scored = verifier.window_zero_scored()
    num_failed += zero_scored
    if num_total <= 0 or num_failed < limit * num_total:
        return
    from reinforce_ada.verifiers.timed import TimedVerifier

    timeouts = verifier.window_count("timeouts")
    if verifier.first_error is not None:
        cause = f"first error: {verifier.first_error}"
        if "required positional argument" in verifier.first_error or "unexpected keyword" in verifier.first_error:
            cause += f" ({_SIGNATURE_HINT})"
    elif timeouts:
        timeout = getattr(verifier.verifier, "timeout", None)
        unit = "call(s)" if isinstance(verifier.verifier, TimedVerifier) else "completion(s)"
        cause = f"{timeouts} {unit} ran past the verifier timeout" + (f" of {timeout:g} s" if timeout else "")
    elif zero_scored:
        cause = f"{zero_scored} comparison(s) failed inside the verifier (scored 0, counted in verifier/failures)"
    else:
        cause = "it returned None for them"
    raise RunStopped(
        f"{where}: the verifier {verifier.name!r} could not score {num_failed} of {num_total} completions "
        f"({100 * num_failed / num_total:.0f}% >= max_verifier_failure_rate={limit:g}); {cause}. {consequence}")


def check_reward_signature(verifier: Any, prompts: Sequence[Any], name: str) -> None:
    """Fail before any model loads when a ``module:function`` reward function cannot take the arguments it will get."""
    from reinforce_ada.verifiers.function import RewardFunctionVerifier

    if not isinstance(verifier, RewardFunctionVerifier):
        return
    try:
        signature = inspect.signature(verifier.fn)
    except (TypeError, ValueError):  # a builtin or C function: nothing to check
        return
    columns = dict.fromkeys(k for p in prompts for k in p.metadata)
    columns.update(dict.fromkeys([verifier.answer_key, "completion_ids", *verifier.options]))
    try:
        signature.bind([], [], **columns)
    except TypeError as err:
        raise ConfigError(f"reward function {name!r} cannot be called as fn(prompts, completions, "
                          f"{', '.join(f'{k}=...' for k in columns)}): {err}; {_SIGNATURE_HINT}") from None


def watch_verifier(verifier: Any, config: Any, prompts: Sequence[Any]) -> WatchedVerifier:
    """The trainer's verifier: its signature checked against the columns it will get, run under
    ``verifier_timeout`` (in a worker, unless it is ``math``, which times out per completion itself), and watched."""
    name = config.verifier or getattr(verifier, "name", None) or getattr(verifier, "__name__", type(verifier).__name__)
    check_reward_signature(verifier, prompts, name)
    return watched_with_timeout(verifier, name, config.verifier_timeout)


def watched_with_timeout(verifier: Any, name: str, timeout: float | None) -> WatchedVerifier:
    """``verifier`` watched, and run under ``timeout`` seconds per call in a worker when one is given (``math``
    times out per completion itself: its ``timeout`` option, :func:`verifier_options`). ``train``, and ``eval`` and
    ``select-prompts`` of a run trained with ``verifier_timeout``, score through this."""
    from reinforce_ada.verifiers.math import MathVerifier

    if timeout and not isinstance(verifier, MathVerifier):
        from reinforce_ada.verifiers.timed import TimedVerifier

        verifier = TimedVerifier(verifier, timeout, name=name)
    return WatchedVerifier(verifier, name)


def check_finite(step: int, what: str, value: Any, hint: str = "") -> None:
    """Stop the run when the tensor ``value`` holds NaN or infinity (before ``optimizer.step``)."""
    import torch

    value = torch.as_tensor(value)
    finite = torch.isfinite(value)
    if bool(finite.all()):
        return
    raise RunStopped(f"step {step}: non-finite values in {what} ({int((~finite).sum())} of {finite.numel()})"
                     f"{'; ' + hint if hint else ''}. Stopping before optimizer.step: the weights are unchanged and "
                     f"no checkpoint was written from this step.")


STEP_NOT_TRAINED = ("so this step would train off-policy. Stopping before optimizer.step: the weights are unchanged and "
                    "no checkpoint was written from this step.")
EVALUATION_NOT_REPORTED = ("so the accuracy it measured is not the model's and is not reported. Stopping: nothing from "
                           "this evaluation was written.")


def check_rollout_mismatch(where: str, stats: dict[str, float], limit: float, top_p: float,
                           consequence: str = STEP_NOT_TRAINED) -> None:
    """Stop the run when the mean ``|old_logp - rollout_logp|`` of ``where``'s sampled tokens (``stats`` from
    :func:`~reinforce_ada.core.rollout_correction.mismatch_metrics`; a training step or a held-out evaluation)
    exceeds ``limit`` (0: never); only with ``top_p == 1``, where the engine's log-probs are of the same distribution
    as the trainer's. ``consequence``: what the stop means for ``where``."""
    mean = stats["logprob_diff_mean"]
    if not limit or top_p < 1 or not stats["num_tokens"] or not mean > limit:
        return
    raise StaleEngineError(
        f"{where}: the generator's log-probabilities of the {stats['num_tokens']} sampled tokens differ from the "
        f"trainer's by {mean:.3g} on average (max {stats['logprob_diff_max']:.3g}), above max_rollout_mismatch="
        f"{limit:g}: the engine is sampling from other weights than the trainer's (a weight sync that did not take), "
        f"{consequence}")


def check_prompt_lengths(config: Any, model: Any, train: Sequence[Any], held_out: Sequence[Any],
                         encode: Callable[[Any], list[int]]) -> None:
    """Every prompt plus ``max_new_tokens`` must fit the model's context; fails naming the first row that does not
    (:func:`~reinforce_ada.generation.prompting.check_prompts_fit`)."""
    from reinforce_ada.generation.prompting import check_prompts_fit

    check_prompts_fit({"training prompt": train, "held-out prompt": held_out}, encode, model_context(model),
                      config.max_new_tokens)


def model_context(model: Any) -> int | None:
    """The model's context length (``config.max_position_embeddings``), or None when it does not say."""
    value = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    return int(value) if isinstance(value, int) and value > 0 else None
