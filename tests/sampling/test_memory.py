import pytest

from reinforce_ada.sampling.memory import PassRateMemory, fit_beta_prior, prompt_key
from reinforce_ada.types import Prompt


def test_key_is_the_content_not_the_id():
    a, b = Prompt(1, "What is 2+2?", answer="4"), Prompt("x", "What is 2+2?", answer="4")
    assert prompt_key(a) == prompt_key(b) != prompt_key(Prompt(1, "What is 2+3?", answer="5"))
    chat = Prompt(2, [{"role": "user", "content": "hi"}])
    assert prompt_key(chat) == prompt_key(Prompt(3, [{"content": "hi", "role": "user"}]))


def test_evidence_decays_with_the_half_life_and_is_capped():
    mem = PassRateMemory(half_life=4.0, max_evidence=10.0, prior=(1.0, 1.0), empirical_prior=False)
    p = Prompt(0, "q")
    mem.update(p, 3, 1)
    mem.advance(4)
    assert mem.evidence(p) == pytest.approx((1.5, 0.5))
    mem.update(p, 6, 2)
    assert mem.evidence(p) == pytest.approx((7.5, 2.5))  # 1.5 + 6, 0.5 + 2 = 10 total, at the cap
    mem.update(p, 10, 0)  # 17.5 + 2.5 = 20 > 10 -> scaled to 10
    assert mem.evidence(p) == pytest.approx((17.5 / 2, 2.5 / 2))
    assert mem.posterior(p) == pytest.approx((1 + 8.75, 1 + 1.25))
    assert mem.pass_rate(Prompt(9, "unseen")) == 0.5


def test_state_dict_round_trip():
    mem = PassRateMemory(half_life=2.0)
    for i in range(40):
        mem.update(Prompt(i, f"q{i}"), i % 5, 4 - i % 5)
    mem.advance()
    clone = PassRateMemory(half_life=2.0)
    clone.load_state_dict(mem.state_dict())
    assert clone.step == mem.step and clone.prior == mem.prior and clone.half_life == 2.0
    for i in range(40):
        assert clone.posterior(Prompt(i, f"q{i}")) == mem.posterior(Prompt(i, f"q{i}"))
    with pytest.raises(ValueError, match="version"):
        clone.load_state_dict({"version": 99})


def test_empirical_prior_recovers_a_known_beta():
    import numpy as np

    rng = np.random.default_rng(1)
    p = rng.beta(0.5, 3.0, size=20000)
    pos = rng.binomial(16, p)
    a, b = fit_beta_prior(list(pos), [16] * len(pos))
    assert a / (a + b) == pytest.approx(0.5 / 3.5, abs=0.01)
    assert a + b == pytest.approx(3.5, rel=0.15)
    assert fit_beta_prior([1], [2]) is None


def test_seed_from_file(tmp_path):
    path = tmp_path / "rates.jsonl"
    key = prompt_key(Prompt(0, "q"))
    path.write_text(f'{{"key": "{key}", "pass_rate": 0.25, "num_samples": 16}}\n')
    mem = PassRateMemory(empirical_prior=False)
    assert mem.seed_from_file(path) == 1
    assert mem.evidence(Prompt(5, "q")) == pytest.approx((4.0, 12.0))
    path.write_text('{"key": "k"}\n')
    with pytest.raises(ValueError, match="rates.jsonl:1"):
        mem.seed_from_file(path)


def _adaptive_counts(rng, p, budget=32, group_size=4):
    """Counts of the ``mixed`` rule: sample until both classes (and ``group_size``) or the budget."""
    pos, tot = [], []
    for rate in p:
        s = f = 0
        while s + f < budget and not (s and f and s + f >= group_size):
            if rng.random() < rate:
                s += 1
            else:
                f += 1
        pos.append(s)
        tot.append(s + f)
    return pos, tot


def test_mle_prior_is_consistent_under_adaptive_stopping_where_moments_is_not():
    import numpy as np

    from reinforce_ada.sampling.memory import fit_beta_prior_mle

    rng = np.random.default_rng(1)
    p = rng.beta(0.4, 2.0, size=6000)
    pos, tot = _adaptive_counts(rng, p)
    a, b = fit_beta_prior_mle(pos, tot)
    assert a == pytest.approx(0.4, rel=0.12) and b == pytest.approx(2.0, rel=0.15)
    a_m, b_m = fit_beta_prior(pos, tot)  # the stopping rule depends on the rewards: moments are biased
    assert a_m > 0.55
    # fixed sample sizes: both agree
    fixed = list(rng.binomial(16, p))
    a, b = fit_beta_prior_mle(fixed, [16] * len(fixed))
    assert a / (a + b) == pytest.approx(0.4 / 2.4, abs=0.01)
    assert fit_beta_prior_mle([0, 0, 0], [5, 5, 5]) is None and fit_beta_prior_mle([1], [2]) is None


def test_lgamma_matches_the_standard_library():
    import math

    import numpy as np

    from reinforce_ada.sampling.memory import _lgamma

    x = np.array([1e-3, 0.05, 0.4, 1.0, 2.5, 7.999, 8.0, 31.25, 1e4])
    np.testing.assert_allclose(_lgamma(x), [math.lgamma(v) for v in x], rtol=0, atol=1e-9)


def test_memory_uses_the_chosen_prior_fit_and_checkpoints_it():
    mem = PassRateMemory(min_fit_entries=2, prior_fit="moments")
    for i, (s, f) in enumerate([(0, 32), (1, 3), (2, 2), (0, 32), (5, 1)]):
        mem.update(f"k{i}", s, f)
    mem.advance()
    moments = mem.prior
    state = mem.state_dict()
    assert state["prior_fit"] == "moments"
    mle = PassRateMemory(min_fit_entries=2)  # a resume that changed the fit: the state's counts, the new fit
    mle.load_state_dict(state)
    assert mle.prior_fit == "mle" and mle.prior == moments  # the fitted prior is state until the next refit
    mle.advance(0)
    assert mle.prior != moments
    with pytest.raises(ValueError, match="prior_fit"):
        PassRateMemory(prior_fit="median")


def test_per_visit_decay_is_the_papers_ada_ema():
    """v3 Alg. 1: on each visit ``N_pos <- lam N_pos + k_t``, ``N_tot <- lam N_tot + n_t``; ``p_hat = (N_pos + alpha) /
    (N_tot + alpha + beta)`` -- whatever the steps between visits (no time decay)."""
    mem = PassRateMemory(half_life=None, max_evidence=None, prior=(1.0, 16.0), empirical_prior=False,
                         visit_decay=0.9)
    p = Prompt(0, "q")
    assert mem.pass_rate(p) == pytest.approx(1 / 17)
    mem.update(p, 2, 6)  # visit 1: 8 samples, 2 positive
    mem.advance(5)  # steps pass without a visit: nothing decays
    assert mem.evidence(p) == pytest.approx((2.0, 6.0))
    mem.update(p, 4, 0)  # visit 2: 4 samples, 4 positive
    n_pos, n_tot = 0.9 * 2 + 4, 0.9 * 8 + 4
    assert sum(mem.evidence(p)) == pytest.approx(n_tot)
    assert mem.pass_rate(p) == pytest.approx((n_pos + 1) / (n_tot + 1 + 16))
    clone = PassRateMemory(half_life=None, max_evidence=None, prior=(1.0, 16.0), empirical_prior=False,
                           visit_decay=0.9)
    clone.load_state_dict(mem.state_dict())
    clone.update(p, 0, 2)
    mem.update(p, 0, 2)
    assert clone.evidence(p) == mem.evidence(p)


def test_visit_decay_must_be_a_factor():
    for bad in (0.0, 1.5, -0.1):
        with pytest.raises(ValueError, match="visit_decay"):
            PassRateMemory(visit_decay=bad)


@pytest.mark.fault("--resume --force-resume-changes with a changed setting of a sampler's pass-rate memory (Est's "
                   "est.decay / est.prior_alpha / est.prior_beta, memory.half_life, memory.max_evidence)",
                   "applied from the next step: the checkpoint brings back the counts only, the parameters are the "
                   "config's (before, the restored memory brought its own back and the change was recorded only)")
@pytest.mark.parametrize("changed", [dict(visit_decay=0.5), dict(prior=(1.0, 16.0)), dict(half_life=3.0),
                                     dict(max_evidence=4.0), dict(prior_fit="moments"), dict(empirical_prior=False),
                                     dict(min_fit_entries=64)])
def test_a_restored_memory_keeps_its_own_parameters_and_takes_the_counts(changed):
    """The rule for every memory: parameters from the config (the memory as built), counts from the checkpoint."""
    before = dict(half_life=8.0, max_evidence=128.0, prior=(1.0, 1.0), empirical_prior=True, min_fit_entries=2,
                  prior_fit="mle", visit_decay=0.9)
    mem = PassRateMemory(**before)
    for i in range(6):
        mem.update(f"k{i}", i, 6 - i)
    mem.advance(3)
    resumed, fresh = PassRateMemory(**{**before, **changed}), PassRateMemory(**{**before, **changed})
    resumed.load_state_dict(mem.state_dict())
    state, own = resumed.state_dict(), fresh.state_dict()
    counts = ("entries", "step", "prior", "prior_fitted")
    assert {k: v for k, v in state.items() if k not in counts} == {k: v for k, v in own.items() if k not in counts}
    assert state["entries"] == mem.state_dict()["entries"] and state["step"] == 3
    refits = {**before, **changed}["empirical_prior"]
    assert state["prior"] == (list(mem.prior) if refits else list(fresh.prior))
