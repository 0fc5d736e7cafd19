"""Cross-step memory of per-prompt pass rates.

Each prompt is keyed by a hash of its content (prompt text or chat messages, plus the reference answer), so the same
problem is recognised across steps, epochs and dataset reloads. For each key the memory keeps decayed evidence --
pseudo-counts of positives and negatives -- from earlier steps:

    pos <- pos * decay^(steps since last update) + num_positive_this_step      (same for neg)

with ``decay = 0.5 ** (1 / half_life)``, and the total capped at ``max_evidence`` so an old, confident estimate can
still be overturned once the model drifts. The posterior on the pass rate is ``Beta(prior_a + pos, prior_b + neg)``.

Decay per *visit* instead of per step is an option (``visit_decay``, the v3 paper's "Ada-EMA" of Reinforce-Ada-Est,
arXiv 2510.04996v3 Alg. 1): each update first multiplies the prompt's evidence by ``lam``, then adds the visit's
counts -- ``N_pos <- lam N_pos + k_t``, ``N_tot <- lam N_tot + n_t`` -- so a prompt's estimate ages by how often it was
sampled, whatever the steps in between; with ``prior = (alpha, beta)`` the posterior mean is the paper's
``p_hat = (N_pos + alpha) / (N_tot + alpha + beta)``.

The memory is read only *before* a step (to skip or cap prompts that look hopeless or saturated and to size their
first request) and written only *after* it, from the step's pool counts. It never enters a pool: whole-pool
advantages use this step's completions only, so they stay unbiased whatever the memory says.

``state_dict()`` / ``load_state_dict()`` make it checkpointable (the counts travel; the parameters are the
memory's own, so a resumed run's settings apply to what it remembered); ``seed()`` loads pass rates measured by
``reinforce-ada select-prompts``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from reinforce_ada.errors import DataError
from reinforce_ada.types import Prompt

logger = logging.getLogger(__name__)

STATE_VERSION = 1


def prompt_key(prompt: Prompt | str | list) -> str:
    """A stable content hash (16 hex digits) of a prompt's text/messages and reference answer.

    >>> prompt_key(Prompt(1, "2+2?", answer="4")) == prompt_key(Prompt("other-id", "2+2?", answer="4"))
    True
    """
    if isinstance(prompt, Prompt):
        content: Any = [prompt.prompt, prompt.answer]
    else:
        content = [prompt, None]
    blob = json.dumps(content, sort_keys=True, default=str, ensure_ascii=False).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def fit_beta_prior(positives: list[float], totals: list[float], max_strength: float = 100.0
                   ) -> tuple[float, float] | None:
    """Method-of-moments Beta(a, b) for the pass rates behind per-prompt counts (empirical Bayes).

    With ``r_i = pos_i / t_i``: ``Var(r) = var_p + (m (1 - m) - var_p) * mean(1 / t)``, solved for ``var_p``; then
    ``a + b = m (1 - m) / var_p - 1`` (capped at ``max_strength``). ``None`` when there is too little data.

    >>> a, b = fit_beta_prior([0, 10, 0, 10], [10, 10, 10, 10])   # half the prompts always fail, half always pass
    >>> round(a / (a + b), 3)
    0.5
    """
    pairs = [(p / t, t) for p, t in zip(positives, totals) if t > 0]
    if len(pairs) < 2:
        return None
    rates = [r for r, _ in pairs]
    m = sum(rates) / len(rates)
    if not 0.0 < m < 1.0:
        return None
    var_obs = sum((r - m) ** 2 for r in rates) / len(rates)
    h = sum(1.0 / t for _, t in pairs) / len(pairs)
    var_p = (var_obs - m * (1.0 - m) * h) / (1.0 - h) if h < 1.0 else 0.0
    strength = m * (1.0 - m) / var_p - 1.0 if var_p > 0 else max_strength
    strength = min(max(strength, 0.2), max_strength)
    return max(m * strength, 0.05), max((1.0 - m) * strength, 0.05)


def _lgamma(x: np.ndarray) -> np.ndarray:
    """``log Gamma(x)`` for ``x > 0``, vectorised: shift to ``x >= 8``, then Stirling's series (error < 1e-10)."""
    x = np.array(x, dtype=np.float64)
    out = np.zeros_like(x)
    for _ in range(8):
        small = x < 8.0
        if not small.any():
            break
        out -= np.where(small, np.log(x), 0.0)
        x = np.where(small, x + 1.0, x)
    inv = 1.0 / x
    inv2 = inv * inv
    return out + (x - 0.5) * np.log(x) - x + 0.5 * math.log(2.0 * math.pi) + inv * (
        1.0 / 12 - inv2 * (1.0 / 360 - inv2 * (1.0 / 1260 - inv2 / 1680)))


def fit_beta_prior_mle(positives: list[float], totals: list[float], max_strength: float = 100.0
                       ) -> tuple[float, float] | None:
    """Maximum marginal-likelihood Beta(a, b) for the pass rates behind per-prompt counts (empirical Bayes).

    Maximises ``sum_i log B(a + pos_i, b + neg_i) - log B(a, b)`` over ``a, b`` (strength ``a + b`` capped at
    ``max_strength``). Unlike the method of moments (:func:`fit_beta_prior`) this stays consistent when the number
    of samples per prompt depended on the rewards seen -- the likelihood does not depend on the stopping rule, and
    adaptive sampling stops exactly that way. Counts may be fractional (decayed evidence). ``None`` when there is
    too little data or only one class was ever seen.

    >>> rng = np.random.default_rng(0)
    >>> p = rng.beta(0.4, 2.0, 4000)
    >>> a, b = fit_beta_prior_mle(list(rng.binomial(32, p)), [32] * 4000)
    >>> abs(a - 0.4) < 0.05, abs(b - 2.0) < 0.25
    (True, True)
    """
    pos = np.asarray(positives, dtype=np.float64)
    neg = np.asarray(totals, dtype=np.float64) - pos
    keep = (pos + neg) > 0
    pos, neg = pos[keep], neg[keep]
    if len(pos) < 2 or not pos.any() or not neg.any():
        return None
    # identical (rounded) counts contribute identical terms: fit on the distinct pairs, weighted
    pairs, weights = np.unique(np.round(np.stack([pos, neg], axis=1) * 8.0) / 8.0, axis=0, return_counts=True)
    pos, neg = pairs[:, 0], pairs[:, 1]

    def loglik(mean_logit: np.ndarray, log_strength: np.ndarray) -> np.ndarray:
        strength = np.exp(log_strength)[..., None]
        a = strength / (1.0 + np.exp(-mean_logit[..., None]))
        b = strength - a
        terms = (_lgamma(a + pos) + _lgamma(b + neg) - _lgamma(a + b + pos + neg)
                 - _lgamma(a) - _lgamma(b) + _lgamma(a + b))
        return terms @ weights

    lo_s, hi_s = math.log(0.05), math.log(max_strength)
    center, width = np.array([0.0, 0.5 * (lo_s + hi_s)]), np.array([8.0, 0.5 * (hi_s - lo_s)])
    for _ in range(6):  # coarse-to-fine grid search over (logit mean, log strength)
        m = np.linspace(center[0] - width[0], center[0] + width[0], 11)
        s = np.clip(np.linspace(center[1] - width[1], center[1] + width[1], 11), lo_s, hi_s)
        mm, ss = np.meshgrid(m, s, indexing="ij")
        values = loglik(mm, ss)
        i, j = np.unravel_index(int(np.argmax(values)), values.shape)
        center = np.array([m[i], s[j]])
        width = width / 4.0
    strength = math.exp(center[1])
    a = strength / (1.0 + math.exp(-center[0]))
    return max(a, 1e-3), max(strength - a, 1e-3)


def read_pass_rates(path: str | Path) -> dict[str, tuple[float, float]]:
    """The rows of a ``select-prompts`` pass-rate file (JSONL: ``key``, ``pass_rate``, ``num_samples`` per line) as
    ``{key: (pass_rate, num_samples)}``. Every row is checked -- a JSON object, ``key`` a string, ``pass_rate`` a
    number in [0, 1], ``num_samples`` a positive finite number, no key twice -- and the first bad one raises
    :class:`~reinforce_ada.errors.DataError` naming ``file:line``; blank lines are skipped."""
    from reinforce_ada.data.loading import read_utf8_text

    rates: dict[str, tuple[float, float]] = {}
    for line_number, line in enumerate(read_utf8_text(path, what="pass-rate file").splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{line_number}"
        try:
            row = json.loads(line)
        except ValueError as err:
            raise DataError(f"{where}: not a JSON object ({err}); each line holds key, pass_rate, num_samples") from None
        if not isinstance(row, dict) or not {"key", "pass_rate", "num_samples"} <= set(row):
            raise DataError(f"{where}: expected an object with key, pass_rate, num_samples (got {line.strip()[:80]})")
        key, rate, count = row["key"], row["pass_rate"], row["num_samples"]
        is_number = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)  # noqa: E731
        if not isinstance(key, str) or not key:
            raise DataError(f"{where}: key must be a non-empty string (got {key!r})")
        if not is_number(rate) or not 0.0 <= rate <= 1.0:
            raise DataError(f"{where}: pass_rate must be a number in [0, 1] (got {rate!r})")
        if not is_number(count) or not (count > 0 and math.isfinite(count)):
            raise DataError(f"{where}: num_samples must be a positive finite number (got {count!r})")
        if key in rates:
            raise DataError(f"{where}: key {key} is given twice")
        rates[key] = (float(rate), float(count))
    return rates


PRIOR_FITS = {"mle": fit_beta_prior_mle, "moments": fit_beta_prior}


@dataclass
class _Entry:
    pos: float
    neg: float
    step: int


class PassRateMemory:
    """Decayed per-prompt pass-rate evidence across steps (see the module docstring)."""

    def __init__(self, half_life: float | None = 8.0, max_evidence: float | None = 128.0,
                 prior: tuple[float, float] = (1.0, 1.0), empirical_prior: bool = True, min_fit_entries: int = 32,
                 prior_fit: str = "mle", visit_decay: float | None = None):
        """``half_life``: steps after which old evidence weighs half (``None``: never decays). ``max_evidence``: cap
        on ``pos + neg`` kept per prompt (``None``: no cap). ``prior``: the Beta prior added to the evidence (the
        starting prior when ``empirical_prior``). ``empirical_prior``: refit the prior to the remembered prompts at
        every :meth:`advance` once ``min_fit_entries`` are known. ``prior_fit``: how -- ``"mle"`` (maximum marginal
        likelihood, :func:`fit_beta_prior_mle`; consistent under adaptive stopping) or ``"moments"``
        (:func:`fit_beta_prior`; biased when the number of samples depended on the rewards, as it does here).
        ``visit_decay``: ``lam`` in (0, 1], the factor each :meth:`update` first multiplies the prompt's evidence by
        (the per-visit decay of the module docstring; ``None``: none)."""
        if prior_fit not in PRIOR_FITS:
            raise ValueError(f"prior_fit must be one of {sorted(PRIOR_FITS)} (got {prior_fit!r})")
        if half_life is not None and not (half_life > 0 and math.isfinite(half_life)):
            raise ValueError(f"half_life must be a positive number or None (got {half_life})")
        if max_evidence is not None and not max_evidence > 0:
            raise ValueError(f"max_evidence must be positive or None (got {max_evidence})")
        if not (len(prior) == 2 and prior[0] > 0 and prior[1] > 0):
            raise ValueError(f"prior must be two positive numbers (got {prior})")
        if visit_decay is not None and not 0.0 < visit_decay <= 1.0:
            raise ValueError(f"visit_decay must be in (0, 1] or None (got {visit_decay})")
        self.half_life = half_life
        self.max_evidence = None if max_evidence is None else float(max_evidence)
        self.visit_decay = visit_decay
        self.prior = (float(prior[0]), float(prior[1]))
        self.empirical_prior = empirical_prior
        self.min_fit_entries = min_fit_entries
        self.prior_fit = prior_fit
        self._prior_fitted = False  # whether self.prior is a fit to the remembered prompts (state, not a setting)
        self.step = 0
        self._entries: dict[str, _Entry] = {}

    # -- reading ----------------------------------------------------------------------------------------------------
    def _decay(self, entry: _Entry) -> float:
        if self.half_life is None:
            return 1.0
        return 0.5 ** ((self.step - entry.step) / self.half_life)

    def evidence(self, prompt: Prompt | str) -> tuple[float, float]:
        """Decayed (positives, negatives) remembered for the prompt; ``(0, 0)`` when unseen."""
        entry = self._entries.get(prompt if isinstance(prompt, str) else prompt_key(prompt))
        if entry is None:
            return 0.0, 0.0
        factor = self._decay(entry)
        return entry.pos * factor, entry.neg * factor

    def posterior(self, prompt: Prompt | str) -> tuple[float, float]:
        """``(alpha, beta)`` of the Beta posterior on the prompt's pass rate."""
        pos, neg = self.evidence(prompt)
        return self.prior[0] + pos, self.prior[1] + neg

    def pass_rate(self, prompt: Prompt | str) -> float:
        """Posterior mean pass rate."""
        a, b = self.posterior(prompt)
        return a / (a + b)

    def __contains__(self, prompt: object) -> bool:
        if isinstance(prompt, Prompt):
            prompt = prompt_key(prompt)
        return prompt in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    # -- writing ----------------------------------------------------------------------------------------------------
    def update(self, prompt: Prompt | str, num_positive: float, num_negative: float) -> None:
        """Add one step's counts (decaying what was there to the current step, and by ``visit_decay`` when set)."""
        if num_positive < 0 or num_negative < 0:
            raise ValueError(f"counts must be >= 0 (got {num_positive}, {num_negative})")
        key = prompt if isinstance(prompt, str) else prompt_key(prompt)
        pos, neg = self.evidence(key)
        if self.visit_decay is not None:
            pos, neg = pos * self.visit_decay, neg * self.visit_decay
        pos, neg = pos + num_positive, neg + num_negative
        total = pos + neg
        if self.max_evidence is not None and total > self.max_evidence:
            pos, neg = pos * self.max_evidence / total, neg * self.max_evidence / total
        self._entries[key] = _Entry(pos, neg, self.step)

    def seed(self, prompt: Prompt | str, pass_rate: float, num_samples: float) -> None:
        """Replace the evidence with a measured pass rate over ``num_samples`` samples."""
        if not 0.0 <= pass_rate <= 1.0:
            raise ValueError(f"pass_rate must be in [0, 1] (got {pass_rate})")
        if not (num_samples > 0 and math.isfinite(num_samples)):
            raise ValueError(f"num_samples must be a positive finite number (got {num_samples})")
        key = prompt if isinstance(prompt, str) else prompt_key(prompt)
        total = float(num_samples) if self.max_evidence is None else min(float(num_samples), self.max_evidence)
        self._entries[key] = _Entry(pass_rate * total, (1.0 - pass_rate) * total, self.step)

    def seed_from_file(self, path: str | Path) -> int:
        """Load a ``select-prompts`` JSONL file (:func:`read_pass_rates`: ``key``, ``pass_rate``, ``num_samples`` per
        line, every row checked); returns the number of prompts seeded."""
        rates = read_pass_rates(path)
        for key, (pass_rate, num_samples) in rates.items():
            self.seed(key, pass_rate, num_samples)
        return len(rates)

    def advance(self, steps: int = 1) -> None:
        """Move the clock forward (the streaming sampler calls this once per step); refit the prior if asked."""
        self.step += steps
        if self.empirical_prior and len(self._entries) >= self.min_fit_entries:
            counts = [self.evidence(k) for k in self._entries]
            fitted = PRIOR_FITS[self.prior_fit]([p for p, _ in counts], [p + n for p, n in counts])
            if fitted is not None:
                self.prior = fitted
                self._prior_fitted = True

    def scale(self, prompt: Prompt | str, factor: float) -> None:
        """Multiply the prompt's remembered evidence by ``factor`` in [0, 1] (a no-op for an unseen prompt). Budget
        mode decays evidence this way once per presentation of the prompt, instead of per step."""
        if not 0.0 <= factor <= 1.0:
            raise ValueError(f"factor must be in [0, 1] (got {factor})")
        key = prompt if isinstance(prompt, str) else prompt_key(prompt)
        if key in self._entries:
            pos, neg = self.evidence(key)
            self._entries[key] = _Entry(pos * factor, neg * factor, self.step)

    def forget(self, keys: Iterable[str]) -> None:
        for key in keys:
            self._entries.pop(key, None)

    # -- checkpointing ----------------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The counts (every prompt's evidence, the clock, the prior once refitted) and, for the record, the
        parameters they were gathered under."""
        return {"version": STATE_VERSION, "step": self.step, "half_life": self.half_life,
                "empirical_prior": self.empirical_prior, "min_fit_entries": self.min_fit_entries,
                "max_evidence": self.max_evidence, "prior": list(self.prior), "prior_fit": self.prior_fit,
                "prior_fitted": self._prior_fitted, "visit_decay": self.visit_decay,
                "entries": {k: [e.pos, e.neg, e.step] for k, e in self._entries.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from ``state``'s counts under *this* memory's parameters: the evidence, the clock and a refitted
        prior come from ``state``; ``half_life``, ``max_evidence``, ``visit_decay``, ``prior_fit``, the starting
        ``prior`` and whether it is refitted stay as this memory was built (from the run's config), so a setting
        changed on a forced resume takes effect from the next step. A prior the checkpoint refitted is kept only
        when this memory refits its prior too."""
        if state.get("version") != STATE_VERSION:
            raise ValueError(f"pass-rate memory state has version {state.get('version')!r}, expected {STATE_VERSION}")
        self.step = int(state["step"])
        self._entries = {k: _Entry(float(p), float(n), int(s)) for k, (p, n, s) in state["entries"].items()}
        # checkpoints written before "prior_fitted" existed: a refitting memory's prior was fitted once it knew enough
        fitted = state.get("prior_fitted",
                           bool(state["empirical_prior"]) and len(state["entries"]) >= int(state["min_fit_entries"]))
        if self.empirical_prior and fitted:
            self.prior = (float(state["prior"][0]), float(state["prior"][1]))
            self._prior_fitted = True
