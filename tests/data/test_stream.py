"""The training prompt stream: each prompt once per epoch, a seeded order, unique ids."""

import pytest

from reinforce_ada.data.stream import PromptStream
from reinforce_ada.types import Prompt


def test_prompt_stream_covers_each_prompt_once_per_epoch_and_rejects_duplicate_ids():
    prompts = [Prompt(i, str(i)) for i in range(10)]
    stream = PromptStream(prompts, seed=3)
    first_epoch = [p.prompt_id for p in stream.take(4) + stream.take(4)] + [next(stream).prompt_id,
                                                                           next(stream).prompt_id]
    assert sorted(first_epoch) == list(range(10))
    batch = stream.take(10)
    assert len({p.prompt_id for p in batch}) == 10
    with pytest.raises(ValueError, match="unique"):
        PromptStream(prompts + [Prompt(0, "again")], seed=0)
