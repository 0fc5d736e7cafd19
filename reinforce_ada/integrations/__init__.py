"""Integrations with other RL training frameworks.

Each sub-package is imported on its own and pulls in its framework lazily, so ``import reinforce_ada`` never needs
them: ``reinforce_ada.integrations.trl`` (TRL's ``GRPOTrainer``, extra ``reinforce-ada[trl]``).
"""
