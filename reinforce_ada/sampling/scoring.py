"""Generation and scoring, shared by every sampler, the evaluation, the trainer's held-out accuracy and research.

* :func:`validate_prompts` -- a non-empty list of :class:`~reinforce_ada.types.Prompt` with unique ids.
* :func:`generate_samples` / :func:`generate_with_retries` -- one generator answer for a list of requests, with
  retries. *Retries* here (``SamplerConfig.generation_retries``) count generator *calls*: a call that raises is
  made again, up to ``retries`` more times, and then the samples a call reported as failed for good
  (:class:`PartialGenerationError`) are asked for again, up to ``retries`` more calls. The streaming sampler works
  per sample instead: one sample is *attempted* ``generation_retries + 1`` times (``StreamingOptions.max_attempts``).
  Both mean "``generation_retries`` more tries of whatever failed"; the unit is the call or the sample. Only
  transient failures are tried again (:func:`~reinforce_ada.sampling.protocols.is_transient`): a deterministic one
  (a prompt the model cannot fit, a dead engine) is raised at once, as a
  :class:`~reinforce_ada.sampling.protocols.FatalGenerationError` unless it is one already or a user error.
* :func:`score` -- rewards for a flat batch; a raising batch is scored one completion at a time (a raise -> None).
* :func:`score_outputs` -- the one flatten -> score -> unflatten: rewards per request for the generator's answer.
* :func:`sample_and_score` -- generate, then :func:`score_outputs` (evaluation, held-out accuracy, the warm start's
  accuracy, ``select-prompts``).
"""

from __future__ import annotations

import logging
from typing import Any, Sequence

from reinforce_ada.sampling.protocols import (
    FatalGenerationError,
    GenerationError,
    GenerationRequest,
    Generator,
    PartialGenerationError,
    Verifier,
    VerifierError,
    is_transient,
)
from reinforce_ada.types import Completion, Prompt, PromptId
from reinforce_ada.verifiers.base import real_reward, reward_list

logger = logging.getLogger(__name__)

__all__ = ["check_backends", "generate_samples", "generate_with_retries", "not_retried", "reward_problem",
           "sample_and_score", "score", "score_outputs", "validate_prompts"]


def validate_prompts(prompts: Sequence[Prompt]) -> list[Prompt]:
    """``prompts`` as a list; fails on an empty list, a non-Prompt, or an unhashable
    or duplicated prompt id."""
    prompts = list(prompts)
    if not prompts:
        raise ValueError("prompts is empty: nothing to sample")
    seen: set[PromptId] = set()
    for i, prompt in enumerate(prompts):
        if not isinstance(prompt, Prompt):
            raise TypeError(f"prompts[{i}] is a {type(prompt).__name__}, expected reinforce_ada.Prompt")
        try:
            hash(prompt.prompt_id)
        except TypeError:
            raise TypeError(f"prompts[{i}].prompt_id={prompt.prompt_id!r} is a {type(prompt.prompt_id).__name__}, "
                            "which cannot be a key: give a str or int id") from None
        if prompt.prompt_id in seen:
            raise ValueError(f"prompts[{i}].prompt_id={prompt.prompt_id!r} is duplicated; prompt ids must be unique")
        seen.add(prompt.prompt_id)
    return prompts


def check_backends(generator: Any, verifier: Any) -> None:
    """Fail early, naming the type, when the generator has no ``generate`` or the verifier is not callable."""
    if not callable(getattr(generator, "generate", None)):
        raise TypeError(f"generator must have a generate(requests) method (got {type(generator).__name__})")
    if not callable(verifier):
        raise TypeError(f"verifier must be callable as verifier(prompts, completions) (got {type(verifier).__name__})")


def generate_with_retries(generator: Generator, requests: list[GenerationRequest], retries: int
                          ) -> list[list[Completion]]:
    """:func:`generate_samples` without the count of failed samples."""
    return generate_samples(generator, requests, retries)[0]


def generate_samples(generator: Generator, requests: list[GenerationRequest], retries: int
                     ) -> tuple[list[list[Completion]], int]:
    """Call the generator, retrying a failed call ``retries`` times; check that the answer has one list per request.

    Per sample: when the generator reports samples that failed for good (:class:`PartialGenerationError`), the
    completions it made are kept and only the failed samples are asked for again, up to ``retries`` more calls.
    Returns the completions and the number of samples still failed after that -- one failed sample never fails
    the round.
    """
    outputs, failed = _generate(generator, requests, retries)
    for attempt in range(1, retries + 1):
        missing = [(i, GenerationRequest(r.prompt, failed[i])) for i, r in enumerate(requests) if failed[i]]
        if not missing:
            break
        logger.warning("%d samples of %d prompts failed; asking again for them (retry %d of %d)",
                       sum(m.num_samples for _, m in missing), len(missing), attempt, retries)
        try:
            more, more_failed = _generate(generator, [m for _, m in missing], 0)
        except GenerationError as err:
            if not is_transient(err):
                raise
            logger.warning("asking again for the failed samples failed: %s", err)
            continue
        for (i, _), completions, num in zip(missing, more, more_failed):
            outputs[i].extend(completions)
            failed[i] = num
    if sum(failed):
        logger.error("%d samples failed for good after %d retries; their prompts keep their other samples",
                     sum(failed), retries)
    return outputs, sum(failed)


def _generate(generator: Generator, requests: list[GenerationRequest], retries: int
              ) -> tuple[list[list[Completion]], list[int]]:
    """One answer for ``requests`` (a failed call retried ``retries`` times): completions and failed counts."""
    last_error: Exception | None = None
    for attempt in range(retries + 1):
        try:
            outputs = [list(completions) for completions in generator.generate(requests)]
            failed = [0] * len(requests)
            break
        except PartialGenerationError as err:
            logger.warning("generator: %s", err)
            outputs, failed = [list(completions) for completions in err.outputs], list(err.num_failed)
            if len(failed) != len(outputs):
                raise GenerationError(f"PartialGenerationError with {len(outputs)} outputs and {len(failed)} "
                                      "failure counts") from err
            break
        except Exception as err:  # noqa: BLE001 -- a transient backend failure is retried, then reported
            if not is_transient(err):
                raise not_retried(err) from err
            last_error = err
            logger.warning("generator failed (attempt %d of %d): %r", attempt + 1, retries + 1, err)
    else:
        tries = f"{retries + 1} times" if retries else "once (no retries)"
        raise GenerationError(f"generator failed {tries}: {type(last_error).__name__}: {last_error}") from last_error
    if len(outputs) != len(requests):
        raise GenerationError(f"generator returned {len(outputs)} outputs for {len(requests)} requests")
    for request, completions in zip(requests, outputs):
        if len(completions) > request.num_samples:
            raise GenerationError(f"generator returned {len(completions)} completions for prompt "
                                  f"{request.prompt.prompt_id!r}, which asked for {request.num_samples}")
    return outputs, failed


def not_retried(error: BaseException) -> BaseException:
    """What a deterministic generator failure is raised as: a user error or a :class:`FatalGenerationError` as it
    is, anything else wrapped in a :class:`FatalGenerationError` that says it was not retried."""
    from reinforce_ada.errors import UserError

    if isinstance(error, (FatalGenerationError, UserError)):
        return error
    return FatalGenerationError(f"the generator cannot serve this request ({type(error).__name__}: {error}); "
                                "not retried, as trying again would fail the same way")


def reward_problem(answer: Any, expected: int) -> str | None:
    """What is wrong with a verifier's answer for ``expected`` completions (not a list of that many real finite
    numbers or None), in words; None when nothing is. The trainer's guard names it as a failing run's cause."""
    try:
        rewards = reward_list(answer, expected)
    except VerifierError as err:
        return str(err)
    for i, reward in enumerate(rewards):
        if reward is not None and real_reward(reward) is None:
            return (f"verifier returned reward={reward!r} (a {type(reward).__name__}) for completion {i}; rewards "
                    f"must be real finite numbers or None")
    return None


def score(verifier: Verifier, prompts: list[Prompt], completions: list[Completion]) -> list[float | None]:
    """Rewards for a batch: a list of real finite numbers or None, one per completion.

    When the batch call raises -- or answers with something that is not a list of ``len(completions)`` entries (a
    dict, a string, a number) -- each completion is scored alone; a raise or a wrong answer there -> None. An entry
    that is not a real finite number (NaN, ±inf, a string, a nested list) -> None. Every None is a verifier failure,
    counted by the caller under ``max_verifier_failure_rate``; the failures by type are logged here.
    """
    try:
        rewards = reward_list(verifier(prompts, completions), len(completions))
    except Exception as err:  # noqa: BLE001
        logger.warning("verifier failed on a batch of %d (%s: %s); scoring one completion at a time",
                       len(completions), type(err).__name__, err)
        rewards, num_raised = [], 0
        for prompt, completion in zip(prompts, completions):
            try:
                rewards.extend(reward_list(verifier([prompt], [completion]), 1))
            except Exception:  # noqa: BLE001
                num_raised += 1
                rewards.append(None)
        if num_raised:
            logger.warning("verifier failed on %d of %d completions; they count as failures", num_raised,
                           len(prompts))
    checked = [real_reward(reward) for reward in rewards]
    bad = [(i, reward) for i, (reward, value) in enumerate(zip(rewards, checked)) if value is None and reward is not None]
    if bad:
        i, reward = bad[0]
        logger.warning("verifier returned %d rewards that are not real finite numbers (first: %r, a %s, for completion "
                       "%d of prompt %r); they count as failures", len(bad), reward, type(reward).__name__, i,
                       prompts[i].prompt_id)
    return checked


def score_outputs(verifier: Verifier, prompts: Sequence[Prompt], outputs: Sequence[Sequence[Completion]]
                  ) -> list[list[float | None]]:
    """Score every completion of ``outputs`` (one list per prompt) in one verifier batch; rewards in the same shape.

    No completion at all: the verifier is not called."""
    flat_prompts = [prompt for prompt, completions in zip(prompts, outputs) for _ in completions]
    flat = [completion for completions in outputs for completion in completions]
    rewards = score(verifier, flat_prompts, flat) if flat else []
    shaped, position = [], 0
    for completions in outputs:
        shaped.append(rewards[position:position + len(completions)])
        position += len(completions)
    return shaped


def sample_and_score(generator: Generator, verifier: Verifier, requests: list[GenerationRequest],
                     retries: int | None = None) -> tuple[list[list[Completion]], list[list[float | None]]]:
    """Generate ``requests``, then score the answer: ``(completions, rewards)``, one list per request.

    ``retries=None``: one generator call, whose errors reach the caller as they are (evaluation); an int: through
    :func:`generate_with_retries`. Either way an answer with the wrong number of lists is a
    :class:`GenerationError`."""
    if retries is None:
        outputs = [list(completions) for completions in generator.generate(requests)]
        if len(outputs) != len(requests):
            raise GenerationError(f"generator returned {len(outputs)} outputs for {len(requests)} requests")
    else:
        outputs = generate_with_retries(generator, requests, retries)
    return outputs, score_outputs(verifier, [r.prompt for r in requests], outputs)
