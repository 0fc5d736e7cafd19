import json

import pytest

from reinforce_ada.models import build_char_tokenizer, build_tiny_model
from trainer_fixtures import addition_prompts, digit_verifier


@pytest.fixture
def tiny_setup():
    return dict(model=build_tiny_model(seed=0), tokenizer=build_char_tokenizer(),
                train_prompts=addition_prompts(64, 1), eval_prompts=addition_prompts(8, 2), verifier=digit_verifier)


@pytest.fixture
def cli_run(tmp_path):
    """A tiny model saved as a folder and a prompt file, so `reinforce-ada train --model DIR --data FILE` runs in
    seconds without the warm start (2 steps; a later ``--max-steps`` overrides)."""
    model_dir = tmp_path / "model"
    build_tiny_model(seed=0).save_pretrained(model_dir)
    build_char_tokenizer().save_pretrained(model_dir)
    data = tmp_path / "prompts.jsonl"
    data.write_text("".join(json.dumps({"prompt": p.prompt, "answer": p.answer}) + "\n"
                            for p in addition_prompts(32, 1)))
    return ["train", "--model", str(model_dir), "--data", str(data), "--max-steps", "2", "--batch-size", "4",
            "--samples-per-round", "4", "--max-rounds", "2", "--max-new-tokens", "4", "--learning-rate", "0.01",
            "--num-threads", "1"]
