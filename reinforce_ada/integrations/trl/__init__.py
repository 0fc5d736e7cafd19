"""Reinforce-Ada for TRL: change one import and three config fields.

.. code-block:: python

    from reinforce_ada.integrations.trl import AdaGRPOConfig as GRPOConfig, AdaGRPOTrainer as GRPOTrainer

    args = GRPOConfig(..., num_generations=4, samples_per_round=8, max_rounds=4, exit_rule="balanced")
    trainer = GRPOTrainer(model=..., reward_funcs=..., args=args, train_dataset=...)

``AdaGRPOTrainer`` is a ``trl.GRPOTrainer`` whose training completions come from Reinforce-Ada's adaptive sampler
(rounds of M samples per prompt, up to N rounds, early exit, downsampling to n = ``num_generations``) and whose
advantages are TRL's (``scale_rewards``, ``multi_objective_aggregation``) on whole-pool statistics; TRL's loss,
logging, accelerate/DeepSpeed scaling and vLLM modes are unchanged. See ``docs/trl.md``. Importing this module checks
the installed TRL (tested: ``trl>=1.14.1,<1.17``; newer versions that still have the hooks import with a warning).
"""

from reinforce_ada.integrations.trl._version import SUPPORTED_TRL, check_trl_version

check_trl_version()

from reinforce_ada.integrations.trl.config import AdaGRPOConfig  # noqa: E402
from reinforce_ada.integrations.trl.generation import TRLGenerator  # noqa: E402
from reinforce_ada.integrations.trl.rewards import TRLRewardVerifier  # noqa: E402
from reinforce_ada.integrations.trl.trainer import AdaGRPOTrainer  # noqa: E402

__all__ = ["AdaGRPOConfig", "AdaGRPOTrainer", "TRLGenerator", "TRLRewardVerifier", "SUPPORTED_TRL",
           "check_trl_version"]
