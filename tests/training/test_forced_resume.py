"""A change forced on --resume is applied or refused by name: the checkpoint brings back counts (weights, the
optimizer's moments, the schedule's step, the memory's evidence), the config brings the parameters; a setting that lives
only in restored state (the seed, the memory's seed file, the warm start, the strata) is refused even when forced."""

import json

import pytest

from reinforce_ada.errors import RunFolderError
from reinforce_ada.training import Trainer
from trainer_fixtures import addition_prompts, folder_bytes, small_config, tiny_parts


def est_parts() -> dict:
    """Four training prompts, so that every step of a batch of four visits each one again (the decay applies)."""
    return {**tiny_parts(), "train_prompts": addition_prompts(4, 1)}


def memory_state(folder, step: int) -> dict:
    state = json.loads((folder / f"checkpoint-{step}" / "trainer_state.json").read_text())
    return state["sampler"]["memory"]


def est(folder, **overrides):
    return small_config(folder, strategy="ada-est", save_steps=2, eval_steps=0, **overrides)


@pytest.mark.fault("--resume --force-resume-changes --sampler.est.decay 0.5 (or prior-beta) of a killed ada-est run",
                   "the change applies from the next step (the memory keeps its counts and takes the config's "
                   "decay and prior); before, the run went on bit-identical to the unchanged one")
@pytest.mark.parametrize("changed, value, field, recorded", [("decay", 0.5, "visit_decay", 0.5),
                                                             ("prior_beta", 16.0, "prior", [1.0, 16.0])])
def test_a_forced_est_setting_changes_the_run(tmp_path, changed, value, field, recorded):
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    Trainer(est(whole, max_steps=4), **est_parts()).train()
    Trainer(est(cut, max_steps=2), **est_parts()).train()
    Trainer(est(cut, max_steps=4, resume=True, force_resume_changes=True, sampler={"est": {changed: value}}),
            **est_parts()).train()
    resumed, unchanged = memory_state(cut, 4), memory_state(whole, 4)
    assert resumed[field] == recorded and unchanged[field] != recorded
    assert resumed["entries"] != unchanged["entries"]  # the visits of steps 3 and 4 decayed (or read p_hat) anew


@pytest.mark.fault("--resume --force-resume-changes --learning-rate / --weight-decay / --warmup-steps",
                   "the optimizer continues with the new values from the next step (its moments and the schedule's "
                   "step from the checkpoint); before, the checkpoint's learning rate and weight decay came back")
def test_a_forced_learning_rate_reaches_the_optimizer(tmp_path):
    out = tmp_path / "run"
    Trainer(small_config(out, max_steps=2, warmup_steps=4), **tiny_parts()).train()
    same = Trainer(small_config(out, max_steps=3, warmup_steps=4, resume=True), **tiny_parts())
    group = same.update.optimizer.param_groups[0]
    assert group["lr"] == 1e-2 * 3 / 4 and group["weight_decay"] == small_config(out).weight_decay  # step 3 of 4
    same.close()
    forced = Trainer(small_config(out, max_steps=3, resume=True, force_resume_changes=True, learning_rate=1e-3,
                                  weight_decay=0.5, warmup_steps=0), **tiny_parts())
    group = forced.update.optimizer.param_groups[0]
    assert (group["lr"], group["weight_decay"], forced.update.scheduler.base_lrs) == (1e-3, 0.5, [1e-3])
    assert forced.update.optimizer.state  # Adam's moments are the checkpoint's
    forced.close()


@pytest.mark.fault("--resume --force-resume-changes of a setting that lives only in the checkpoint's state (seed, "
                   "the memory seed file, the warm start's sft_*, the strata's eval_strata_*)",
                   "exit 2 naming the setting and why a resume cannot apply it, before anything is written")
@pytest.mark.parametrize("field, value", [("seed", 1), ("sft_seed", 3), ("eval_strata_samples", 4)])
def test_a_setting_a_resume_cannot_apply_is_refused_by_name(tmp_path, field, value):
    out = tmp_path / "run"
    Trainer(small_config(out, max_steps=2), **tiny_parts()).train()
    before = folder_bytes(out)
    with pytest.raises(RunFolderError, match=rf"--resume cannot change {field} \(.* -> {value}\), not even with "
                                             rf"--force-resume-changes: "):
        Trainer(small_config(out, max_steps=3, resume=True, force_resume_changes=True, **{field: value}),
                **tiny_parts())
    assert folder_bytes(out) == before


@pytest.mark.fault("`train --resume --max-steps 120 --output-dir runs/est` of an ada-est run",
                   "the run continues as it was configured (ada-est), changing only what is given; before, the "
                   "options' defaults were compared with the run's: \"strategy 'ada-est' -> 'ada-balanced'\"")
def test_a_resume_from_the_command_line_takes_the_runs_own_settings(tmp_path, capsys):
    from reinforce_ada import cli

    out = tmp_path / "est"
    start = ["--strategy", "ada-est", "--sampler.est.decay", "0.8", "--eval-prompts", "8", "--eval-strata-samples",
             "0", "--output-dir", str(out)]
    assert cli.main(["train", "--max-steps", "1", *start]) == 0
    assert cli.main(["train", "--resume", "--max-steps", "2", "--output-dir", str(out)]) == 0
    saved = json.loads((out / "checkpoint-2" / "trainer_state.json").read_text())["config"]
    assert (saved["strategy"], saved["sampler"]["mode"], saved["sampler"]["est"]["decay"]) == ("ada-est", "est", 0.8)
    assert (saved["eval_prompts"], saved["eval_strata_samples"]) == (8, 0)
    history = [json.loads(line) for line in (out / "config_history.jsonl").read_text().splitlines()]
    assert history[-1]["event"] == "resume" and history[-1]["changed"] == {"max_steps": [1, 2]}
    capsys.readouterr()
    # only what is given changes, and a change is still checked as before: refused unless forced, by name
    before = folder_bytes(out)
    assert cli.main(["train", "--resume", "--max-steps", "3", "--sampler.est.decay", "0.5", "--output-dir",
                     str(out)]) == 2
    assert "changed settings (sampler.est.decay: 0.8 -> 0.5)" in capsys.readouterr().err
    assert cli.main(["train", "--resume", "--max-steps", "3", "--strategy", "grpo", "--output-dir", str(out)]) == 2
    assert "changed settings (strategy: 'ada-est' -> 'grpo', " in capsys.readouterr().err
    assert folder_bytes(out) == before
