"""The built-in tiny model computes the same numbers on every x86 CPU: torch's CPU kernels are pinned before torch loads.

torch chooses its CPU kernels by what the processor can do (``torch.backends.cpu.get_cpu_capability()``: DEFAULT,
AVX2 or AVX512), and MKL, which computes its matrix products, chooses a code path of its own the same way. The
vectorised kernels round differently from one another -- softmax and log-softmax, sigmoid and SiLU, ``addcmul`` and
``lerp`` (AdamW's update), the normal sampler behind ``randn``, scaled-dot-product attention -- and MKL's paths sum a
product in different orders. Over the demo's 100 steps the differences change which completions are sampled, so the
same seed ended at different accuracies: 50.5% (``ATEN_CPU_CAPABILITY=default``, this project's AMD EPYC machine),
50.9% (the same machine's own AVX2 kernels) and 50.1% (a user's AVX-512 machine), from 24.4%.

So a command that runs the tiny model (or a checkpoint trained from it) with the ``hf`` generator (``train``;
``compare`` when every run of its grid does) pins both before torch loads: ATen to its portable kernels
(``ATEN_CPU_CAPABILITY=default``, the same compiled code on every x86-64 CPU) and MKL to its reproducible path
(``MKL_CBWR=COMPATIBLE``, MKL's conditional numerical reproducibility: the same results on Intel and compatible
processors). The cost, measured on the project's 2-core
machine (whole ``reinforce-ada train``, CPU seconds, median of 3): 21.2 s unpinned, 23.4 s with ATen pinned, 25.2 s
with MKL pinned, 28.0 s with both (+32%). For a pretrained model the same pins would cost far more (a
SmolLM2-135M-sized matrix product 2.5x slower on MKL's compatible path, softmax and SiLU 2x slower on ATen's portable
kernels), and no documented figure depends on its exact numbers, so other models and the vLLM and server generators
keep the machine's fastest kernels.

A variable the user has set is left as it is (``ATEN_CPU_CAPABILITY=avx2`` runs the tiny model on AVX2 kernels);
once torch is loaded (a test calling the command line in-process) its kernels are chosen already and nothing is set.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Mapping, MutableMapping

__all__ = ["PORTABLE_NUMERICS", "pin_portable_numerics", "runs_portable"]

PORTABLE_NUMERICS: Mapping[str, str] = {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE"}
"""The environment variables that make torch's and MKL's CPU results independent of the processor, and their
values."""


def runs_portable(settings: Mapping[str, Any]) -> bool:
    """Whether a run with these train settings (``model``, ``generator``; absent: the defaults) gets the portable
    kernels: the built-in tiny model -- or a folder holding one, a run or checkpoint trained from it -- sampled by the
    ``hf`` generator, the demo and every figure the docs give for it."""
    from reinforce_ada.models.tiny import holds_tiny_model

    model = settings.get("model", "tiny")
    return (model == "tiny" or holds_tiny_model(model)) and settings.get("generator", "hf") == "hf"


def pin_portable_numerics(environ: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """Set each of :data:`PORTABLE_NUMERICS` the user has not set, unless torch is loaded already; returns what was
    set."""
    environ = os.environ if environ is None else environ
    if "torch" in sys.modules:
        return {}
    pinned = {name: value for name, value in PORTABLE_NUMERICS.items() if name not in environ}
    environ.update(pinned)
    return pinned
