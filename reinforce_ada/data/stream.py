"""The training prompt stream: prompts in a seeded random order, reshuffled every epoch.

Its position (epoch, index in the epoch's order) is part of the trainer's checkpoint, so a resumed run draws the
same prompts as an uninterrupted one.
"""

from __future__ import annotations

import random
from typing import Sequence

from reinforce_ada.types import Prompt


class PromptStream:
    """Prompts in a seeded random order, reshuffled every epoch; its position is part of the checkpoint."""

    def __init__(self, prompts: Sequence[Prompt], seed: int):
        if not prompts:
            raise ValueError("the training prompt set is empty")
        self.prompts = list(prompts)
        if len({p.prompt_id for p in self.prompts}) != len(self.prompts):
            raise ValueError("training prompts must have unique prompt_id values (a batch never repeats a prompt)")
        self.seed = seed
        self.epoch = 0
        self.position = 0
        self._order = self._shuffle()

    def _shuffle(self) -> list[int]:
        order = list(range(len(self.prompts)))
        random.Random(self.seed * 1_000_003 + self.epoch).shuffle(order)
        return order

    def __iter__(self):
        return self

    def __next__(self) -> Prompt:
        if self.position == len(self._order):
            self.epoch += 1
            self.position = 0
            self._order = self._shuffle()
        prompt = self.prompts[self._order[self.position]]
        self.position += 1
        return prompt

    def take(self, num: int) -> list[Prompt]:
        """``num`` prompts with distinct ids (a batch never holds the same prompt twice)."""
        batch, ids = [], set()
        for _ in range(min(num, len(self.prompts))):
            prompt = next(self)
            if prompt.prompt_id in ids:  # wrapped into a new epoch mid-batch
                prompt = next(p for p in self if p.prompt_id not in ids)
            ids.add(prompt.prompt_id)
            batch.append(prompt)
        return batch

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "position": self.position}

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Continue at ``state``'s epoch and position; a position past this set's end (a tampered state, or one of
        another prompt set) is a ValueError naming both."""
        epoch, position = int(state["epoch"]), int(state["position"])
        if not 0 <= position <= len(self.prompts) or epoch < 0:
            raise ValueError(f"the prompt stream's position {position} (epoch {epoch}) is outside this training set "
                             f"of {len(self.prompts)} prompts")
        self.epoch, self.position = epoch, position
        self._order = self._shuffle()
