"""Every input of a run is fingerprinted in its checkpoints and checked on --resume: the held-out prompts, the start
model's weights, the memory seed file (refused when changed, unless --force-resume-changes, which records the change;
a changed start model with the KL term always), and a local reward module's source (a warning, recorded)."""

import json
import sys
from pathlib import Path

import pytest

from reinforce_ada.errors import RunFolderError
from reinforce_ada.training import Trainer
from trainer_fixtures import addition_prompts, folder_bytes, small_config, tiny_parts


def last_event(folder: Path) -> dict:
    return json.loads((folder / "config_history.jsonl").read_text().splitlines()[-1])


@pytest.mark.fault("--resume after the held-out file (--eval-data) was replaced",
                   "exit 2 naming the held-out prompts' row counts and hashes, before anything is rewritten; "
                   "--force-resume-changes records it (it resumed, printing an accuracy 'before -> after' of two "
                   "different files, exit 0)")
def test_resume_on_other_held_out_prompts_is_refused_unless_forced(tmp_path):
    out = tmp_path / "run"
    Trainer(small_config(out, max_steps=2), **tiny_parts()).train()
    before = folder_bytes(out)
    with pytest.raises(RunFolderError, match=r"--resume: the held-out prompts \(task arithmetic, test split\) changed "
                                             r"since .*checkpoint-2 was written: 8 rows with SHA-256 \w+\.\.\. then, "
                                             r"8 rows with SHA-256 \w+\.\.\. now; put the original back, pass "
                                             r"--force-resume-changes"):
        Trainer(small_config(out, max_steps=3, resume=True), **tiny_parts(eval_seed=9))
    assert folder_bytes(out) == before
    Trainer(small_config(out, max_steps=3, resume=True, force_resume_changes=True), **tiny_parts(eval_seed=9)).train()
    event = last_event(out)
    assert event["event"] == "resume" and event["forced"] and set(event["changed"]) == {"held_out", "max_steps"}


@pytest.mark.fault("--resume after the start model's weights were replaced (with and without --kl-coef)",
                   "exit 2 naming the weights' hashes, before anything is rewritten; --force-resume-changes records "
                   "it, but never with the KL term, whose reference is the start model (it resumed, the KL "
                   "reference following the new file, exit 0)")
@pytest.mark.parametrize("kl_coef", [0.0, 0.05])
def test_resume_from_other_start_weights_is_refused(tmp_path, kl_coef):
    out = tmp_path / "run"
    Trainer(small_config(out, max_steps=2, kl_coef=kl_coef), **tiny_parts()).train()
    before = folder_bytes(out)
    changed = r"the start model's weights \(--model injected\) changed since .*checkpoint-2 was written: \d+ tensors "
    kl_refusal = (r"with kl_coef 0.05 the KL term's reference is the start model, so the run cannot continue on "
                  r"other weights: put the original weights back, or start a new run")
    way_out = kl_refusal if kl_coef else r"put the original back, pass --force-resume-changes"
    with pytest.raises(RunFolderError, match=rf"--resume: {changed}.* now; {way_out}"):
        Trainer(small_config(out, max_steps=3, kl_coef=kl_coef, resume=True), **tiny_parts(model_seed=5))
    assert folder_bytes(out) == before
    forced = small_config(out, max_steps=3, kl_coef=kl_coef, resume=True, force_resume_changes=True)
    if kl_coef:  # not even when forced
        with pytest.raises(RunFolderError, match=rf"{changed}.* now; {kl_refusal}"):
            Trainer(forced, **tiny_parts(model_seed=5))
        assert folder_bytes(out) == before
    else:
        Trainer(forced, **tiny_parts(model_seed=5)).train()
        assert "model" in last_event(out)["changed"]


@pytest.mark.fault("--resume after the memory seed file (--sampler.memory.seed) was rewritten",
                   "exit 2 naming the file and its hashes, before anything is rewritten; not forceable (the memory "
                   "it seeded is in the checkpoint)")
def test_resume_on_a_rewritten_memory_seed_is_refused(tmp_path):
    from reinforce_ada.sampling.memory import prompt_key

    key = prompt_key(tiny_parts()["train_prompts"][0])
    seed = tmp_path / "pass_rates.jsonl"
    seed.write_text(json.dumps({"key": key, "pass_rate": 0.5, "num_samples": 4}) + "\n")
    out = tmp_path / "run"
    sampler = {"memory": {"enabled": True, "seed": str(seed)}}
    Trainer(small_config(out, max_steps=2, sampler=sampler), **tiny_parts()).train()
    seed.write_text(json.dumps({"key": key, "pass_rate": 0.9, "num_samples": 4}) + "\n")
    before = folder_bytes(out)
    with pytest.raises(RunFolderError, match=rf"--resume: the memory seed file \(--sampler.memory.seed {seed}\) "
                                             rf"changed since .*checkpoint-2 was written: \d+ bytes with SHA-256"):
        Trainer(small_config(out, max_steps=3, resume=True, sampler=sampler), **tiny_parts())
    assert folder_bytes(out) == before
    with pytest.raises(RunFolderError, match=r"changed since .* so a resume cannot apply it \(not even with "
                                             r"--force-resume-changes\)"):
        Trainer(small_config(out, max_steps=3, resume=True, force_resume_changes=True, sampler=sampler),
                **tiny_parts())
    assert folder_bytes(out) == before


@pytest.mark.fault("--resume after a local reward module (`my_rewards.py`) was edited",
                   "a warning naming the file and its hashes, the change recorded in config_history.jsonl; the run "
                   "continues (it was not noticed)")
def test_an_edited_local_reward_module_is_warned_about_and_recorded(tmp_path, monkeypatch, caplog):
    module = tmp_path / "edited_rewards_mod.py"
    module.write_text("def reward(prompts, completions, **kw):\n    return [1.0 for _ in completions]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "edited_rewards_mod", raising=False)
    out = tmp_path / "run"
    Trainer(small_config(out, max_steps=2, verifier="edited_rewards_mod:reward"), **tiny_parts()).train()
    module.write_text(module.read_text() + "# edited\n")
    Trainer(small_config(out, max_steps=3, resume=True, verifier="edited_rewards_mod:reward"), **tiny_parts()).train()
    assert any(f"the reward function's source file ({module}) changed since" in r.getMessage()
               and "its rewards may differ" in r.getMessage() for r in caplog.records)
    assert "reward_source" in last_event(out)["changed"]


def test_cli_resume_on_a_replaced_eval_data_file_is_one_line_and_forced_says_the_accuracies_differ(
        tmp_path, monkeypatch, capsys):
    """The command line, as a user meets it: `train --eval-data FILE`, FILE replaced, `--resume`: exit 2 in one
    line; forced, the printed 'before -> after' accuracy says the two are on different prompts."""
    from reinforce_ada import cli

    def held_out(seed):
        rows = addition_prompts(8, seed)
        return "".join(json.dumps({"prompt": p.prompt, "answer": p.answer}) + "\n" for p in rows)

    monkeypatch.chdir(tmp_path)
    Path("heldout.jsonl").write_text(held_out(2))
    args = ["train", "--task", "arithmetic", "--eval-data", "heldout.jsonl", "--output-dir", "run", "--num-threads",
            "1", "--batch-size", "4"]
    assert cli.main([*args, "--max-steps", "1"]) == 0
    Path("heldout.jsonl").write_text(held_out(9))
    capsys.readouterr()
    assert cli.main([*args, "--max-steps", "2", "--resume"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("error: --resume: the held-out prompts (--eval-data heldout.jsonl) "
                                               "changed since run/checkpoint-1 was written: 8 rows with SHA-256 ")
    assert cli.main([*args, "--max-steps", "2", "--resume", "--force-resume-changes"]) == 0
    said = capsys.readouterr().out.splitlines()[0]
    assert said.startswith("held-out sampled accuracy: ") and said.endswith(
        "% (not comparable: the held-out prompts were replaced at step 1, --force-resume-changes)")
