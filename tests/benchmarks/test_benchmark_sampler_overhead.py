"""The sampler-overhead benchmark's fakes behave like a real backend (so the benchmark measures the real loop)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np

from reinforce_ada.config import SamplerConfig
from reinforce_ada.types import Prompt

PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "sampler_overhead.py"


def load_benchmark():
    spec = importlib.util.spec_from_file_location("sampler_overhead", PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


def test_benchmark_measures_every_completion_drawn():
    bench = load_benchmark()
    assert bench.__doc__.startswith("Sampler overhead")
    prompts = [Prompt(i, "", metadata={"pass_rate": p}) for i, p in enumerate([0.0, 1.0, 0.5, 0.3])]
    result = bench.measure("t", SamplerConfig(), prompts, steps=2)
    # p=0 and p=1 never exit (32 each); the others draw 8..32.
    assert 2 * (32 + 32 + 8 + 8) <= result.completions <= 2 * 4 * 32
    assert result.seconds > 0 and result.cpu_seconds >= 0 and result.backend_seconds < result.seconds
    assert bench.format_table([result]).splitlines()[2].startswith("t ")


def test_precomputed_generator_hands_out_each_completion_once():
    bench = load_benchmark()
    generator = bench.PrecomputedGenerator()
    prompts = [Prompt(0, "", metadata={"pass_rate": 0.5})]
    generator.restock(prompts, 12, np.random.default_rng(0))
    from reinforce_ada.sampling.protocols import GenerationRequest

    first = generator.generate([GenerationRequest(prompts[0], 8)])[0]
    second = generator.generate([GenerationRequest(prompts[0], 4)])[0]
    assert len(first) == 8 and len(second) == 4
    assert len({id(c) for c in first + second}) == 12
    assert bench.TextVerifier()(prompts * 12, first + second) == [1.0 if c.text == "1" else 0.0 for c in first + second]
