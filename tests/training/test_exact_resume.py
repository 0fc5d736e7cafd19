"""Exact resume for every setting: a run stopped at a checkpoint and resumed
ends with the same weights, optimizer and metrics, bit for bit, as the same run left uninterrupted -- with every
option that holds state: the KL term's reference model, the warm-up schedule, several PPO epochs, the cross-step
memory, streaming mode, budget mode, Reinforce-Ada-Est and Seq's explicit weight. Tiny model, four steps: a few seconds each."""

import json
import shutil
from pathlib import Path

import pytest
import torch

from reinforce_ada.models import build_char_tokenizer, build_tiny_model
from reinforce_ada.training import Trainer
from trainer_fixtures import addition_prompts, digit_verifier, small_config

# the metrics that depend on the run's state (times and rates of the machine left out)
COMPARED = ("step", "total_samples", "total_tokens", "train/loss", "train/kl", "train/grad_norm", "train/lr",
            "sampling/reward_mean", "sampling/total_samples", "eval/accuracy")

SETTINGS = {
    "kl": dict(kl_coef=0.05),
    "warmup": dict(warmup_steps=3),
    "ppo_epochs": dict(ppo_epochs=2, mini_batch_size=8),
    "memory": dict(sampler={"memory": {"enabled": True}}),
    "streaming": dict(sampler={"mode": "streaming"}),
    "budget": dict(strategy="ada-budget"),
    "est": dict(strategy="ada-est"),
    "seq-log": dict(sampler={"objective": "log"}),
    "all": dict(kl_coef=0.05, warmup_steps=3, ppo_epochs=2, mini_batch_size=8, sampler={"memory": {"enabled": True}}),
}


def parts():
    return dict(model=build_tiny_model(seed=0), tokenizer=build_char_tokenizer(), train_prompts=addition_prompts(64, 1),
                eval_prompts=addition_prompts(8, 2), verifier=digit_verifier)


def metrics(folder):
    lines = [json.loads(x) for x in (folder / "metrics.jsonl").read_text().splitlines()]
    return [{k: r[k] for k in COMPARED if k in r} for r in lines]


def run(folder, steps, **settings):
    trainer = Trainer(small_config(folder, max_steps=steps, save_steps=2, eval_steps=2, **settings), **parts())
    trainer.train()
    return trainer


def resumed(folder, steps, **settings):
    trainer = Trainer(small_config(folder, max_steps=steps, save_steps=2, eval_steps=2, resume=True, **settings),
                      **parts())
    trainer.train()
    return trainer


def assert_same(a, b, folder_a, folder_b):
    for (name, x), (_, y) in zip(a.model.state_dict().items(), b.model.state_dict().items()):
        assert torch.equal(x, y), f"{name} differs"
    assert metrics(folder_a) == metrics(folder_b)
    assert a.summary(None)["accuracy_history"] == b.summary(None)["accuracy_history"]


@pytest.mark.fault("resume with state-holding settings (KL reference, warmup, PPO epochs, memory, streaming, budget, est)",
                   "bit-identical to the uninterrupted run")
@pytest.mark.parametrize("name", list(SETTINGS))
def test_a_run_killed_at_a_checkpoint_and_resumed_equals_the_uninterrupted_run(tmp_path, name):
    """Killed after checkpoint-2: the uninterrupted run's folder cut back to what a kill -9 during step 3 leaves
    (checkpoint-4 and the summary gone, metrics of later steps still there), then resumed."""
    settings = SETTINGS[name]
    whole = run(tmp_path / "whole", 4, **settings)
    shutil.copytree(tmp_path / "whole", tmp_path / "cut")
    shutil.rmtree(tmp_path / "cut" / "checkpoint-4")
    (tmp_path / "cut" / "summary.json").unlink()
    assert_same(whole, resumed(tmp_path / "cut", 4, **settings), tmp_path / "whole", tmp_path / "cut")


def test_a_resumed_run_keeps_its_strata_and_their_metrics(tmp_path, monkeypatch):
    """The difficulty strata are fixed once, before training: a resumed run reads them from its checkpoint (even
    with strata.json gone) instead of drawing them again, and every evaluation's per-stratum accuracy, pass@k and
    entropy equal the uninterrupted run's, bit for bit."""
    from reinforce_ada.training import loop

    run(tmp_path / "whole", 4)
    shutil.copytree(tmp_path / "whole", tmp_path / "cut")
    shutil.rmtree(tmp_path / "cut" / "checkpoint-4")
    (tmp_path / "cut" / "summary.json").unlink()
    (tmp_path / "cut" / "strata.json").unlink()
    monkeypatch.setattr(loop, "fix_strata", lambda *a: pytest.fail("a resumed run drew its strata again"))
    resumed(tmp_path / "cut", 4)
    assert (tmp_path / "cut" / "strata.json").read_text() == (tmp_path / "whole" / "strata.json").read_text()

    def evaluations(folder):
        lines = [json.loads(x) for x in (folder / "metrics.jsonl").read_text().splitlines()]
        return [{k: v for k, v in r.items() if k.startswith("eval/")} for r in lines if "eval/accuracy" in r]

    whole = evaluations(tmp_path / "whole")
    assert whole == evaluations(tmp_path / "cut") and len(whole) == 3  # steps 0, 2, 4
    assert all("eval/num_prompts/hard" in r and "eval/pass@2" in r and "eval/entropy" in r for r in whole)


@pytest.mark.fault("--resume --max-steps beyond a finished run",
                   "the final evaluation kept; bit-identical to the longer uninterrupted run")
@pytest.mark.parametrize("eval_steps", [2, 3])
def test_extending_a_finished_run_equals_the_longer_uninterrupted_run(tmp_path, eval_steps):
    """A finished 2-step run extended to 4 steps keeps its final evaluation and ends as an
    uninterrupted 4-step run, whether step 2 is an evaluation step of the longer run (eval_steps=2) or not (3)."""
    settings = dict(kl_coef=0.05, save_steps=2, eval_steps=eval_steps)
    whole = Trainer(small_config(tmp_path / "whole", max_steps=4, **settings), **parts())
    whole.train()
    Trainer(small_config(tmp_path / "ext", max_steps=2, **settings), **parts()).train()
    final = json.loads((tmp_path / "ext" / "summary.json").read_text())["accuracy_after"]
    ext = Trainer(small_config(tmp_path / "ext", max_steps=4, resume=True, **settings), **parts())
    ext.train()
    for (name, x), (_, y) in zip(whole.model.state_dict().items(), ext.model.state_dict().items()):
        assert torch.equal(x, y), f"{name} differs"
    steps = lambda f: [r for r in metrics(f) if "sampling/total_samples" in r]  # noqa: E731
    assert [{k: v for k, v in r.items() if k != "eval/accuracy"} for r in steps(tmp_path / "whole")] == \
        [{k: v for k, v in r.items() if k != "eval/accuracy"} for r in steps(tmp_path / "ext")]
    assert (2, final) in [tuple(x) for x in ext.accuracy_history]  # the finished run's final evaluation is kept
    assert {"step": 2, "eval/accuracy": final} in [{k: r[k] for k in ("step", "eval/accuracy") if k in r}
                                                   for r in metrics(tmp_path / "ext")]


class Killed(BaseException):
    """A kill -9 inside the process: nothing after it runs (no 'stopped' event, no cleanup but the lock's)."""


def by_step(folder):
    """The compared metrics of each step, its training line and its evaluation line merged (an evaluation at a
    step is one line with the step's in an uninterrupted run, its own line where a run ended or resumed there)."""
    merged = {}
    for record in metrics(folder):
        merged.setdefault(record["step"], {}).update(record)
    return merged


@pytest.mark.fault("kill -9 during a finished run's final evaluation (or while recording it), then --resume "
                   "--max-steps beyond it",
                   "the cut-short evaluation redone; metrics, accuracy history and checkpoint weights bit-identical to "
                   "the longer uninterrupted run (steps 5-6 differed, exit 0)")
@pytest.mark.parametrize("window", ["evaluating", "writing final_evaluation.pt", "listing it in the manifest"])
def test_a_run_killed_during_its_final_evaluation_and_extended_equals_the_longer_run(tmp_path, monkeypatch, window):
    """A 4-step run (an evaluation every 2 steps) killed after its last checkpoint, while its final evaluation runs or
    is being recorded, then extended to 6 steps, ends as an uninterrupted 6-step run: the longer run evaluates at
    step 4, so the resumed one does that evaluation again before step 5."""
    from reinforce_ada.runs import checkpoint as ck

    settings = dict(kl_coef=0.05, save_steps=2, eval_steps=2)
    whole = Trainer(small_config(tmp_path / "whole", max_steps=6, **settings), **parts())
    whole.train()
    cut = Trainer(small_config(tmp_path / "cut", max_steps=4, **settings), **parts())
    if window == "evaluating":
        real = cut.evaluate
        monkeypatch.setattr(cut, "evaluate", lambda: real() if cut.step < 4 else (_ for _ in ()).throw(Killed()))
    elif window == "writing final_evaluation.pt":
        real_replace = ck.os.replace

        def replace(src, dst):
            if Path(dst).name == ck.FINAL_EVALUATION:
                raise Killed()
            real_replace(src, dst)

        monkeypatch.setattr(ck.os, "replace", replace)
    else:
        monkeypatch.setattr(ck, "write_atomic", lambda *a: (_ for _ in ()).throw(Killed()))
    with pytest.raises(Killed):
        cut.train()
    monkeypatch.undo()
    assert (tmp_path / "cut" / "checkpoint-4").is_dir() and not (tmp_path / "cut" / "summary.json").exists()
    ext = Trainer(small_config(tmp_path / "cut", max_steps=6, resume=True, **settings), **parts())
    ext.train()
    for (name, x), (_, y) in zip(whole.model.state_dict().items(), ext.model.state_dict().items()):
        assert torch.equal(x, y), f"{name} differs"
    assert (tmp_path / "whole" / "checkpoint-6" / "model" / "model.safetensors").read_bytes() == \
        (tmp_path / "cut" / "checkpoint-6" / "model" / "model.safetensors").read_bytes()
    assert by_step(tmp_path / "whole") == by_step(tmp_path / "cut")
    assert whole.accuracy_history == ext.accuracy_history


@pytest.mark.fault("kill -9 while a finished run draws its plot, then --resume with no more steps",
                   "no torn training.png (drawn to a temporary file and renamed); the resume's 'nothing to do' line "
                   "says the plot is missing and which command draws it (it said only 'nothing to do')")
def test_a_kill_while_drawing_the_plot_leaves_no_torn_plot_and_the_resume_says_so(tmp_path, monkeypatch):
    import matplotlib.figure

    out = tmp_path / "run"
    trainer = Trainer(small_config(out, max_steps=2, save_steps=2, eval_steps=2), **parts())
    real = matplotlib.figure.Figure.savefig

    def killed_while_drawing(self, fname, *args, **kwargs):
        real(self, fname, *args, **kwargs)
        Path(fname).write_bytes(Path(fname).read_bytes()[:100])  # half of it on disk
        raise Killed()

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", killed_while_drawing)
    with pytest.raises(Killed):
        trainer.train()
    monkeypatch.undo()
    assert (out / "summary.json").exists() and not list((out / "plots").iterdir())
    again = Trainer(small_config(out, max_steps=2, save_steps=2, eval_steps=2, resume=True), **parts())
    assert again.nothing_to_do == (f"nothing to do: {out} is already at step 2 (max_steps 2) and finished; give a "
                                   f"larger --max-steps to extend it (its plot was not drawn, and a resume does not "
                                   f"draw it: reinforce-ada plot {out} does)")


@pytest.mark.fault("--resume after a kill, the run logging to tensorboard (--report-to tensorboard)",
                   "one warning line: the cut-back metrics lines stay in the tensorboard log, which cannot be "
                   "rewritten (nothing said)")
def test_a_resume_says_which_logged_lines_it_cannot_take_back(tmp_path, caplog):
    out = tmp_path / "run"
    Trainer(small_config(out, max_steps=2, save_steps=1, eval_steps=2, report_to="tensorboard"), **parts()).train()
    shutil.rmtree(out / "checkpoint-2")  # what a kill during step 2's checkpoint leaves, metrics lines after step 1
    (out / "summary.json").unlink()
    Trainer(small_config(out, max_steps=2, save_steps=1, eval_steps=2, report_to="tensorboard", resume=True),
            **parts()).train()
    said = [r.getMessage() for r in caplog.records if "cannot be rewritten" in r.getMessage()]
    assert said == ["2 metrics lines the interrupted run wrote after step 1 are gone from metrics.jsonl and will be "
                    "written again, but its tensorboard log keeps them (it cannot be rewritten)"]
