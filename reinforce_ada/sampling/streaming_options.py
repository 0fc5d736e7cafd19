"""The options of streaming sampling (:class:`StreamingOptions`): the trainer's ``sampler.streaming`` settings
(:class:`~reinforce_ada.config.StreamingConfig` turns into these) and the research-only knobs the latency model and
the benchmarks set -- allocation rule and target, prior, budgets and caps, skipping and giving up, slots and the
step's tail. :class:`~reinforce_ada.sampling.scheduler.StreamingScheduler` runs a step under them."""

from __future__ import annotations

from dataclasses import dataclass

from reinforce_ada.config import ConfigError

__all__ = ["StreamingOptions"]


@dataclass
class StreamingOptions:
    """Options of the streaming sampler beyond :class:`SamplerConfig` (which still sets M, N, n, exit rule, ...)."""

    allocation: str = "beta"
    """``"beta"``: request the smallest number of samples that meets the exit rule with probability ``target``
    under the Beta posterior; ``"fixed"``: ``M`` more each time the previous ones are scored (the paper's sizes,
    without the barrier)."""
    target: float = 0.3
    """Exit probability a ``"beta"`` request aims for. Higher: larger requests, fewer waves, more cancelled work
    (0.3 measured best for time in the latency model, docs/beyond_the_paper.md)."""
    prior: tuple[float, float] = (1.0, 1.0)
    """Beta prior on a prompt's pass rate when no memory is given (memory carries its own prior)."""
    give_up_below: float = 0.0
    """Stop sampling a prompt and cancel its in-flight requests (it stays in the step, unexited) once, after a scored
    sample, what the remaining budget can still buy is unlikely: for a pool with one class only, the chance of
    seeing the other (signal); for a pool that already has signal, the chance of meeting the exit rule. 0 never
    gives up (the paper's behaviour)."""
    min_signal_rate: float = 0.0
    """Spend samples only where they are likely enough to bring signal (0: off). A prompt whose pool holds one class
    only is given up (its in-flight requests cancelled) once the posterior chance that its next sample is of the
    other class falls below this; a prompt is skipped up front when no budget gives at least this many signal-prompts
    per sample (best ``P(both classes within k) / E[samples]`` over ``k``). It is one price for every prompt: no
    sample is drawn whose expected signal is below it, i.e. at the margin a signal-prompt costs at most
    ``1 / min_signal_rate`` samples. With memory, hopeless prompts stop early and promising ones may use a larger
    ``budget``. Unlike ``give_up_below`` it does not depend on the remaining budget."""
    budget: int | None = None
    """Most samples one prompt may draw in a step (None: ``M * N``, the paper's)."""
    max_request: int | None = None
    """Cap on one request's size (None: the remaining budget)."""
    max_in_flight: int = 256
    """Samples outstanding at once (the engine's concurrency). Slots go to prompts first-come first-served."""
    skip_below: float = 0.0
    """With memory: skip a prompt this step when, under the remembered posterior, its chance that ``M * N`` samples
    hold both classes (any signal) is below this -- it looks hopeless or saturated. Evidence decays, so it is
    retried later."""
    cap_below: float = 0.0
    """With memory: a prompt whose chance of meeting the exit rule within ``M * N`` is below this (and that is not
    skipped) gets a budget of ``cap_samples``."""
    cap_samples: int | None = None
    """Budget of a capped prompt (default ``group_size``)."""
    max_attempts: int | None = None
    """Times one sample is attempted before the step ends early (default ``generation_retries + 1``)."""
    follow_ups_first: bool = False
    """When slots are short, a prompt already being sampled gets its next request before prompts not yet started
    (it is on the step's critical path); False: strict first-come first-served."""
    fill_idle: bool = True
    """When no prompt wants more and slots are free (the step's tail), give prompts still being sampled extra
    samples, one each in turn, up to their budgets: fewer sequential waves on the critical path, at the price of
    extra (mostly cancelled) work."""
    fill_idle_per_wave: int | None = None
    """Most extra samples ``fill_idle`` gives one prompt per wave (None: up to its budget; the factory sets 1 where
    every running sequence costs compute, e.g. vLLM on the CPU: docs/benchmarks.md)."""
    cancel_on_exit: bool = True
    """Cancel a prompt's in-flight requests when it exits. False lets them finish (they join the pool); only useful
    to measure what cancellation saves."""

    def __post_init__(self) -> None:
        if self.allocation not in ("beta", "fixed"):
            raise ConfigError(f"allocation={self.allocation!r} is not one of ['beta', 'fixed']")
        if not 0.0 < self.target <= 1.0:
            raise ConfigError(f"target must be in (0, 1] (got {self.target})")
        if not (len(self.prior) == 2 and self.prior[0] > 0 and self.prior[1] > 0):
            raise ConfigError(f"prior must be two positive numbers (got {self.prior})")
        for name in ("give_up_below", "skip_below", "cap_below", "min_signal_rate"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ConfigError(f"{name} must be in [0, 1] (got {value})")
        for name in ("max_request", "max_in_flight", "cap_samples", "max_attempts", "budget", "fill_idle_per_wave"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value <= 0):
                raise ConfigError(f"{name} must be a positive integer (got {value!r})")
