import pytest

from reinforce_ada.models import build_char_tokenizer, build_tiny_model
from trainer_fixtures import addition_prompts, digit_verifier


@pytest.fixture
def tiny_setup():
    return dict(model=build_tiny_model(seed=0), tokenizer=build_char_tokenizer(),
                train_prompts=addition_prompts(64, 1), eval_prompts=addition_prompts(8, 2), verifier=digit_verifier)
