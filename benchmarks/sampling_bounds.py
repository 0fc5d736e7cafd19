"""How low can samples per signal-prompt go? Oracle bounds for the multi-step simulation.

Samples per signal-prompt at Ada-balanced's signal fraction is the measure of docs/beyond_the_paper.md. This script
asks what any sampler could reach on the same prompt visits (the same drifting pass rates, order and steps as
``benchmarks/multistep_allocation.py``) if it **knew every prompt's current pass rate exactly** -- an oracle no real
sampler has. For each visit it draws one long Bernoulli sequence and evaluates, on those same draws:

* ``ada-balanced``: the paper's sampler (rounds of M=8, exit checked after each round, at most N=4 rounds, exit
  once the pool has n/2 positives and n/2 negatives) -- the reference;
* one-at-a-time sampling that stops at the exit (the least any sampler with that exit rule can draw on a visit),
  under the ``balanced`` rule or the ``mixed`` rule (>= 1 positive and >= 1 negative, and n samples), with a
  per-visit budget ``B`` and an oracle that skips every visit whose ``min(p, 1 - p)`` is below a threshold.

For each rule and budget it reports the cheapest oracle point whose signal fraction is at least Ada-balanced's
(signal: the pool holds both classes, so the balanced downsampling keeps a group with unequal rewards). A second
oracle chooses **each visit's budget** from its pass rate (0 = skip, 4 ... 128), optimally for a price of signal
(the expectations per pass rate by Monte Carlo on 300 pass-rate bins), and reports its cheapest point at
Ada-balanced's signal fraction.

``--bayes`` adds a weaker, realistic bound: a sampler that does not know the pass rates but knows **the
simulator's own model** -- the Beta(0.4, 2) population of starting rates and the Normal(0.5, 0.5) logit drift per
epoch -- and keeps, per prompt, the exact posterior over (starting rate, drift) on a grid, updated with every
sample it ever drew. It runs the library's pricing rule (``min_signal_rate``: skip a prompt whose best
signal-per-sample is below the price, give up a one-class pool once the other class is less likely than the price;
mixed exit rule, budget 64) with that exact posterior instead of the memory's decayed Beta.

    python benchmarks/sampling_bounds.py [--prompts 2048] [--epochs 4] [--seeds 0 1 2 3]     # ~2 min
    python benchmarks/sampling_bounds.py --seeds 0 --bayes                                  # + ~3 min
"""

from __future__ import annotations

import argparse

import numpy as np

from reinforce_ada.research.simulate import pass_rates_from
from reinforce_ada.research.simulate_multistep import DriftingPassRates

BUDGETS = (32, 48, 64, 96, 128)


def visit_rates(rates: DriftingPassRates, num_epochs: int, batch_size: int, seed: int) -> np.ndarray:
    """Every prompt visit's pass rate, in the order and at the times of ``run_multistep``."""
    num = len(rates.initial)
    order_rng = np.random.default_rng(seed)
    orders = [order_rng.permutation(num) for _ in range(num_epochs)]
    steps_per_epoch = -(-num // batch_size)
    out = []
    for epoch, order in enumerate(orders):
        for start in range(0, num, batch_size):
            p = rates.at(epoch + (start // batch_size) / steps_per_epoch)
            out.append(p[order[start:start + batch_size]])
    return np.concatenate(out)


def first_exit(positives: np.ndarray, rule: str, group_size: int) -> np.ndarray:
    """Per visit, the number of samples after which the exit rule first holds (a large number when never)."""
    drawn = np.arange(1, positives.shape[1] + 1)
    negatives = drawn - positives
    if rule == "balanced":
        ok = (positives >= group_size // 2) & (negatives >= group_size - group_size // 2)
    else:  # mixed
        ok = (positives >= 1) & (negatives >= 1) & (drawn >= group_size)
    return np.where(ok.any(axis=1), ok.argmax(axis=1) + 1, 10**9)


def has_signal(positives: np.ndarray, cost: np.ndarray) -> np.ndarray:
    """Per visit: does the pool of its first ``cost`` samples hold both classes?"""
    pos = positives[np.arange(len(positives)), cost - 1]
    return (pos > 0) & (pos < cost)


def bounds(p: np.ndarray, seed: int, samples_per_round: int = 8, max_rounds: int = 4, group_size: int = 4) -> dict:
    rng = np.random.default_rng(seed + 7)
    horizon = max(BUDGETS)
    positives = np.cumsum(rng.random((len(p), horizon)) < p[:, None], axis=1)

    balanced_exit = first_exit(positives, "balanced", group_size)
    ada_cost = np.minimum(-(-balanced_exit // samples_per_round) * samples_per_round, samples_per_round * max_rounds)
    ada_signal = has_signal(positives, ada_cost)
    ada = ada_cost.sum() / ada_signal.sum()
    out = {"ada": {"samples_per_signal": float(ada), "signal": float(ada_signal.mean())},
           "per_visit": per_visit_budget_oracle(p, seed, (float(ada), float(ada_signal.mean())), group_size)}
    hardness = np.minimum(p, 1.0 - p)
    thresholds = np.concatenate([[0.0], np.quantile(hardness, np.linspace(0.0, 0.5, 201))])
    for rule in ("balanced", "mixed"):
        exit_at = first_exit(positives, rule, group_size)
        for budget in BUDGETS:
            cost = np.minimum(exit_at, budget)
            sig = has_signal(positives, cost)
            best = None
            for threshold in thresholds:
                keep = hardness >= threshold
                fraction = (sig & keep).mean()
                if fraction >= ada_signal.mean():
                    ratio = (cost * keep).sum() / (sig & keep).sum() / ada
                    if best is None or ratio < best[0]:
                        best = (float(ratio), float(fraction), float(threshold))
            out[f"{rule}/B={budget}"] = {"no_skip_ratio": float(cost.sum() / sig.sum() / ada),
                                        "no_skip_signal": float(sig.mean()), "oracle": best}
    return out


def bayes_priced(rates: DriftingPassRates, price: float, *, seed: int, num_epochs: int = 4, batch_size: int = 256,
                 budget: int = 64, group_size: int = 4, grid: int = 300, drift_grid: int = 15,
                 drift: tuple[float, float] = (0.5, 0.5)) -> tuple[float, float]:
    """(samples per signal-prompt, signal fraction) of the pricing rule under the exact grid posterior."""
    from statistics import NormalDist

    rng = np.random.default_rng(seed + 11)
    num = len(rates.initial)
    quantiles = (np.arange(grid) + 0.5) / grid
    start = np.clip(np.quantile(rng.beta(0.4, 2.0, 2_000_000), quantiles), 1e-9, 1 - 1e-9)
    start_logit = np.log(start) - np.log1p(-start)
    velocity = np.array([NormalDist(*drift).inv_cdf(q) for q in (np.arange(drift_grid) + 0.5) / drift_grid])
    log_post = np.zeros((num, grid * drift_grid))  # equal-mass grid: a uniform prior over its cells
    order_rng = np.random.default_rng(seed)
    orders = [order_rng.permutation(num) for _ in range(num_epochs)]
    steps_per_epoch = -(-num // batch_size)
    total = signal = visits = 0
    ks = np.arange(1, budget + 1)
    for epoch, order in enumerate(orders):
        for start_index in range(0, num, batch_size):
            t = epoch + (start_index // batch_size) / steps_per_epoch
            ids = order[start_index:start_index + batch_size]
            p_true = rates.at(t)[ids]
            g = (1.0 / (1.0 + np.exp(-(start_logit[:, None] + velocity[None, :] * t)))).reshape(-1)
            log1, log0 = np.log(g), np.log1p(-g)
            w = np.exp(log_post[ids] - log_post[ids].max(axis=1, keepdims=True))
            w /= w.sum(axis=1, keepdims=True)
            # skip: best P(both classes within k) / E[samples drawn] over k (at least group_size drawn)
            all_neg, all_pos = w @ np.exp(np.outer(log0, ks)), w @ np.exp(np.outer(log1, ks))
            not_both = np.concatenate([np.ones((len(ids), 1)), all_neg[:, :-1] + all_pos[:, :-1]], axis=1)
            not_both[:, :group_size] = 1.0
            both = 1.0 - all_neg - all_pos
            rate = (both / np.cumsum(not_both, axis=1))[:, group_size - 1:].max(axis=1)
            active = rate >= price
            pos = np.zeros(len(ids), int)
            neg = np.zeros(len(ids), int)
            for _ in range(budget):
                if not active.any():
                    break
                x = rng.random(len(ids)) < p_true
                pos += active & x
                neg += active & ~x
                active &= ~((pos > 0) & (neg > 0) & (pos + neg >= group_size))
                post = np.log(w + 1e-300) + np.outer(pos, log1) + np.outer(neg, log0)
                post = np.exp(post - post.max(axis=1, keepdims=True))
                mean = (post @ g) / post.sum(axis=1)
                other = np.where(pos == 0, mean, 1.0 - mean)
                active &= ~(((pos == 0) | (neg == 0)) & (other < price))
            visits += len(ids)
            total += int((pos + neg).sum())
            signal += int(((pos > 0) & (neg > 0)).sum())
            log_post[ids] += np.outer(pos, log1) + np.outer(neg, log0)
    return total / signal, signal / visits


def per_visit_budget_oracle(p: np.ndarray, seed: int, reference: tuple[float, float], group_size: int = 4,
                            bins: int = 300, draws: int = 2000) -> dict[str, float]:
    """Each visit gets the budget (0: skip) that maximises signal - cost * price for its pass rate; returns, per
    exit rule, the cheapest samples per signal-prompt (over Ada-balanced's ``reference``) at its signal fraction."""
    rng = np.random.default_rng(seed + 13)
    budgets = np.array([0, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128])
    edges = np.quantile(p, np.linspace(0.0, 1.0, bins + 1))
    which = np.clip(np.searchsorted(edges, p, side="right") - 1, 0, bins - 1)
    counts = np.bincount(which, minlength=bins)
    centers = np.array([p[which == i].mean() if counts[i] else 0.5 for i in range(bins)])
    ada_per_signal, ada_signal = reference
    out = {}
    for rule in ("balanced", "mixed"):
        sig = np.zeros((bins, len(budgets)))
        cost = np.zeros((bins, len(budgets)))
        for i, rate in enumerate(centers):
            positives = np.cumsum(rng.random((draws, budgets[-1])) < rate, axis=1)
            exit_at = first_exit(positives, rule, group_size)
            for j, budget in enumerate(budgets[1:], 1):
                c = np.minimum(exit_at, budget)
                sig[i, j], cost[i, j] = has_signal(positives, c).mean(), c.mean()
        best = float("inf")
        for price in np.geomspace(1e-3, 1.0, 400):
            choice = np.argmax(sig - cost * price, axis=1)
            fraction = (sig[np.arange(bins), choice] * counts).sum() / len(p)
            if fraction >= ada_signal:
                spent = (cost[np.arange(bins), choice] * counts).sum() / len(p)
                best = min(best, spent / fraction / ada_per_signal)
        out[rule] = best
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=2048)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    parser.add_argument("--bayes", action="store_true", help="also run the exact-posterior pricing bound")
    parser.add_argument("--prices", type=float, nargs="+", default=[0.008, 0.010, 0.012, 0.014, 0.016])
    args = parser.parse_args()
    for seed in args.seeds:
        rates = DriftingPassRates.draw(pass_rates_from("beta:0.4,2", args.prompts, seed), 0.5, 0.5, seed)
        result = bounds(visit_rates(rates, args.epochs, args.batch_size, seed), seed)
        ada = result.pop("ada")
        per_visit = result.pop("per_visit")
        print(f"seed {seed}: Ada-balanced {ada['samples_per_signal']:.2f} samples/signal-prompt at "
              f"{100 * ada['signal']:.1f}% signal (these draws)")
        print(f"  {'rule / budget':<16}{'one-at-a-time, no skip':>26}{'oracle skip at Ada signal':>30}")
        for name, row in result.items():
            oracle = row["oracle"]
            best = f"{oracle[0]:.3f}x at {100 * oracle[1]:.1f}%" if oracle else "never reaches it"
            print(f"  {name:<16}{row['no_skip_ratio']:>12.3f}x at {100 * row['no_skip_signal']:5.1f}%{best:>30}")
        print("  oracle budget per visit, at Ada signal: " + ", ".join(f"{rule} {ratio:.3f}x"
                                                                      for rule, ratio in per_visit.items()))
        if args.bayes:
            from reinforce_ada.config import SamplerConfig
            from reinforce_ada.research.simulate_multistep import StrategySpec, run_multistep

            reference = run_multistep(StrategySpec("ada-balanced", SamplerConfig()), rates, num_epochs=args.epochs,
                                      batch_size=args.batch_size, seed=seed)
            print(f"  exact-posterior pricing (mixed rule, budget 64) vs the library's ada-balanced "
                  f"({reference.samples_per_signal_prompt:.2f} samples/signal at "
                  f"{100 * reference.signal_fraction:.1f}% signal):")
            for price in args.prices:
                per_signal, fraction = bayes_priced(rates, price, seed=seed, num_epochs=args.epochs,
                                                    batch_size=args.batch_size)
                print(f"    price {price:<6g} {per_signal / reference.samples_per_signal_prompt:.3f}x at "
                      f"{100 * fraction:.1f}% signal")


if __name__ == "__main__":
    main()
