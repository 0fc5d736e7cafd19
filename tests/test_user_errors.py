"""User errors from the command line: one line naming the field, file, row or option; exit status 2; no traceback.

Each case is a mistake a user really makes (a list where an int goes, a quoted "maybe" for a boolean, a YAML typo,
an abbreviated option, a data file with a missing column or answer, bytes that are not UTF-8, a model path that
does not exist). Nothing is loaded and no run folder is made for the ones the config and preflight checks catch.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reinforce_ada import cli
from reinforce_ada.config import ConfigError, SamplerConfig, TrainConfig, load_config
from reinforce_ada.errors import DataError, MissingColumnError, UserError
from reinforce_ada.types import Prompt

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture()
def no_trainer(monkeypatch):
    """Fail the test if a Trainer gets built: every error here must come before anything loads."""
    monkeypatch.setattr("reinforce_ada.training.Trainer.__init__", lambda *a, **k: pytest.fail("trainer was built"))


def run(capsys, *argv):
    """``reinforce-ada ARGV`` in this process: (exit status, stderr)."""
    code = cli.main(list(argv))
    return code, capsys.readouterr().err


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0]


def yaml_file(tmp_path, text, name="run.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


# -- config types ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, message", [
    ("max_steps: [1, 2]\n", "config field `max_steps`: expected int, got list [1, 2]"),
    ("resume: maybe\n", "config field `resume`: expected bool, got str 'maybe'"),
    ('resume: "true"\n', "config field `resume`: expected bool, got str 'true'"),
    ("batch_size: 5.5\n", "config field `batch_size`: expected int or None, got float 5.5"),
    ("batch_size: true\n", "config field `batch_size`: expected int or None, got bool True"),
    ("temperature: .nan\n", "config field `temperature`: expected a finite float, got float nan"),
    ("learning_rate: fast\n", "config field `learning_rate`: expected a finite float or None, got str 'fast'"),
    ("strategy: {name: grpo}\n", "config field `strategy`: expected str, got dict {'name': 'grpo'}"),
    # nested sections and the flat aliases of the sampler's fields name the field by its dotted name
    ("sampler: {group_size: 4.5}\n", "config field `sampler.group_size`: expected int, got float 4.5"),
    ("group_size: four\n", "config field `sampler.group_size`: expected int, got str 'four'"),
    ("sampler:\n  memory: {enabled: maybe}\n", "config field `sampler.memory.enabled`: expected bool, got str 'maybe'"),
    ("sampler: {streaming: {target: .inf}}\n",
     "config field `sampler.streaming.target`: expected a finite float, got float inf"),
    ("sampler: {streaming: 0.3}\n", "config field `sampler.streaming`: expected a mapping of StreamingConfig fields, "
                                    "got float 0.3"),
])
def test_yaml_values_of_the_wrong_type_name_the_field_and_file(tmp_path, capsys, no_trainer, text, message):
    path = yaml_file(tmp_path, text)
    code, err = run(capsys, "train", "--config", str(path))
    assert code == 2
    assert one_error_line(err) == f"error: {path}: {message}"


def test_wrong_types_are_refused_from_python_too():
    with pytest.raises(ConfigError, match=r"^config field `max_steps`: expected int, got list \[1\]$"):
        TrainConfig(max_steps=[1])
    with pytest.raises(ConfigError, match="config field `group_size`: expected int, got float 4.0"):
        SamplerConfig(group_size=4.0)
    with pytest.raises(ConfigError, match="config field `normalize_std`: expected bool, got str 'no'"):
        SamplerConfig(normalize_std="no")
    with pytest.raises(ConfigError, match="`positive_threshold`: expected a finite float, got float inf"):
        SamplerConfig(positive_threshold=math.inf)
    assert TrainConfig(learning_rate=1, max_steps=3).learning_rate == 1  # an int is a float
    assert SamplerConfig(exit_rule=lambda p, n, g: p > 0).exit_rule  # a callable where one is allowed


def test_nested_sampler_settings_from_yaml_and_the_command_line(tmp_path, capsys, no_trainer):
    path = yaml_file(tmp_path, "strategy: ada-positive\nsampler:\n  min_positive: 2\n  streaming: {target: 0.4}\n"
                               "samples_per_round: 6\n")
    config = load_config(TrainConfig, str(path), {"sampler.max_rounds": 3, "group_size": 2})
    sampler = config.sampler
    assert (sampler.exit_rule, sampler.min_positive, sampler.samples_per_round, sampler.max_rounds,
            sampler.group_size, sampler.streaming.target) == ("positive", 2, 6, 3, 2, 0.4)
    args = vars(cli.build_parser().parse_args(["train", "--sampler.exit-rule", "mixed", "--group-size", "2",
                                               "--sampler.memory.enabled", "--sampler.streaming.max-in-flight", "8"]))
    assert {k: args[k] for k in ("sampler.exit_rule", "group_size", "sampler.memory.enabled",
                                 "sampler.streaming.max_in_flight")} == {
        "sampler.exit_rule": "mixed", "group_size": 2, "sampler.memory.enabled": True,
        "sampler.streaming.max_in_flight": 8}


@pytest.mark.parametrize("argv, message", [
    (["--group-size", "2", "--sampler.group-size", "4"],
     "`group_size` and `sampler.group_size` are the same setting (sampler.group_size); give one"),
    (["--lr", "1e-3", "--learning-rate", "2e-3"], "`lr` and `learning_rate` are the same setting (learning_rate); "
                                                  "give one"),  # it trained at 0.002 without a word
    (["--learning-rate", "2e-3", "--lr", "1e-3"], "`learning_rate` and `lr` are the same setting (learning_rate)"),
    (["--sampler.exit-rule", "positive"],
     "sampler.exit_rule='positive' contradicts strategy='ada-balanced', which sets sampler.exit_rule='balanced'"),
    (["--strategy", "grpo", "--samples-per-round", "8"],
     "sampler.samples_per_round=8 contradicts strategy='grpo', which sets sampler.samples_per_round=4"),
])
def test_two_spellings_and_strategy_contradictions_are_named(capsys, no_trainer, argv, message):
    code, err = run(capsys, "train", *argv)
    assert code == 2 and message in one_error_line(err)


@pytest.mark.fault("the learning rate as lr: YAML `lr: 0.001`, and `train --lr 1e-3 --learning-rate 2e-3`",
                   "lr is learning_rate in YAML too; given beside learning_rate, exit 2 naming both (YAML said "
                   "'did you mean lora?'; the command line trained at 0.002 without a word)")
def test_yaml_lr_is_the_learning_rate_as_on_the_command_line(tmp_path):
    """YAML `lr: 0.001` answered "did you mean lora?"; `lr` is the learning rate's common spelling everywhere, and
    beside `learning_rate` it is refused as two spellings of one setting."""
    from reinforce_ada.config import load_config

    (tmp_path / "lr.yaml").write_text("lr: 0.001\n")
    assert load_config(TrainConfig, str(tmp_path / "lr.yaml")).learning_rate == 0.001
    assert load_config(TrainConfig, str(tmp_path / "lr.yaml"), {"learning_rate": 0.01}).learning_rate == 0.01
    (tmp_path / "both.yaml").write_text("lr: 0.001\nlearning_rate: 0.002\n")
    with pytest.raises(ConfigError, match=r"both.yaml: `lr` and `learning_rate` are the same setting"):
        load_config(TrainConfig, str(tmp_path / "both.yaml"))


def test_unknown_sampler_fields_name_the_closest_known_one():
    with pytest.raises(ConfigError, match=r"unknown config field\(s\) `streaming.targt` \(did you mean "
                                          r"`streaming.target`\?\)"):
        TrainConfig(sampler={"streaming": {"targt": 0.4}})
    with pytest.raises(ConfigError, match=r"unknown config field\(s\) `sampler.exit_rul` \(did you mean "
                                          r"`sampler.exit_rule`\?\)"):
        TrainConfig(sampler={"exit_rul": "mixed"})


def test_yaml_scientific_notation_is_a_number(tmp_path):
    # PyYAML follows YAML 1.1, where 1e-6 (no dot) is the *string* "1e-6"; the config loader reads YAML 1.2 floats
    config = load_config(TrainConfig, str(yaml_file(tmp_path, "learning_rate: 1e-6\nkl_coef: 2E-3\n")))
    assert config.learning_rate == 1e-6 and config.kl_coef == 2e-3


@pytest.mark.fault("a path starting with ~ where no shell expands it (YAML `output_dir: ~/run`, `--output-dir=~/run`)",
                   "the home folder, as a shell would give it (it made a folder named `~` in the current one)")
def test_a_path_from_yaml_starting_with_a_tilde_is_in_the_home_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    path = yaml_file(tmp_path, "output_dir: ~/run\ndata: ~/rows.jsonl\neval_data: ~/held_out.jsonl\nmodel: ~/model\n"
                               "sampler: {mode: streaming, memory: {enabled: true, seed: ~/rates.jsonl}}\n")
    config = load_config(TrainConfig, str(path))
    home = tmp_path / "home"
    assert (config.output_dir, config.data, config.eval_data, config.model, config.sampler.memory.seed) == (
        str(home / "run"), str(home / "rows.jsonl"), str(home / "held_out.jsonl"), str(home / "model"),
        str(home / "rates.jsonl"))
    assert load_config(TrainConfig, None, {"output_dir": "~/other"}).output_dir == str(home / "other")


def test_yaml_booleans_and_command_line_spellings(tmp_path, capsys, no_trainer):
    assert load_config(TrainConfig, str(yaml_file(tmp_path, "lora: yes\nresume: false\n"))).lora is True
    for spelling, value in [("true", True), ("On", True), ("1", True), ("no", False), ("FALSE", False)]:
        args = cli.build_parser().parse_args(["train", "--resume", spelling])
        assert args.resume is value
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["train", "--resume", "maybe"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "argument --resume: expected a boolean (true/yes/on/1 or false/no/off/0), got 'maybe'" in err


def test_yaml_syntax_error_names_file_line_and_column(tmp_path, capsys, no_trainer):
    path = yaml_file(tmp_path, "max_steps: 3\nbatch_size: [1, 2\nseed: 1\n")
    code, err = run(capsys, "train", "--config", str(path))
    line = one_error_line(err)
    assert code == 2 and line.startswith(f"error: {path}:3:") and "invalid YAML" in line


def test_yaml_mapping_value_error_and_non_mapping(tmp_path, capsys, no_trainer):
    path = yaml_file(tmp_path, "max_steps: 3\n  seed: 1: 2\n")
    code, err = run(capsys, "train", "--config", str(path))
    assert code == 2 and one_error_line(err).startswith(f"error: {path}:2:")
    path = yaml_file(tmp_path, "- max_steps\n- 3\n")
    code, err = run(capsys, "train", "--config", str(path))
    assert code == 2 and one_error_line(err) == (f"error: {path}: expected a mapping of config fields at the top "
                                                 "level (got list)")


def test_unknown_and_repeated_yaml_keys_are_named(tmp_path, capsys, no_trainer):
    path = yaml_file(tmp_path, "batch_sise: 3\nlearning_rat: 0.1\nzzz: 1\n")
    code, err = run(capsys, "train", "--config", str(path))
    assert code == 2
    assert one_error_line(err) == (f"error: {path}: unknown config field(s) `batch_sise` (did you mean `batch_size`?), "
                                   "`learning_rat` (did you mean `learning_rate`?), `zzz` for TrainConfig")
    path = yaml_file(tmp_path, "sampler:\n  exit_rul: mixed\n  streaming: {targt: 0.4}\n")  # in a section too
    code, err = run(capsys, "train", "--config", str(path))
    assert code == 2 and one_error_line(err) == (
        f"error: {path}: unknown config field(s) `sampler.exit_rul` (did you mean `sampler.exit_rule`?), "
        "`sampler.streaming.targt` (did you mean `sampler.streaming.target`?) for TrainConfig")
    path = yaml_file(tmp_path, "seed: 1\nmax_steps: 2\nseed: 3\n")
    code, err = run(capsys, "train", "--config", str(path))
    assert code == 2 and one_error_line(err) == (f"error: {path}:3:1: invalid YAML: key 'seed' appears twice "
                                                 "(first on line 1)")


def test_config_file_missing_or_not_utf8(tmp_path, capsys, no_trainer):
    code, err = run(capsys, "train", "--config", str(tmp_path / "nope.yaml"))
    assert code == 2 and one_error_line(err) == f"error: config file {tmp_path / 'nope.yaml'} does not exist"
    path = tmp_path / "latin1.yaml"
    path.write_bytes("seed: 1\n# caf\u00e9\n".encode("latin-1"))
    code, err = run(capsys, "train", "--config", str(path))
    assert code == 2 and one_error_line(err) == (f"error: {path}:2: not UTF-8 text (byte 0xe9 at byte offset 13); "
                                                 "save the file as UTF-8")


# -- options: no prefix matching, in every subcommand ---------------------------------------------------------------
@pytest.mark.parametrize("argv, option", [
    (["train", "--learning-rat", "0.1"], "--learning-rat"),
    (["eval", "--model", "m", "--data", "d", "--mod", "x"], "--mod"),
    (["simulate", "--prom", "10"], "--prom"),
    (["simulate-multistep", "--prom", "10"], "--prom"),
    (["select-prompts", "--dat", "x", "--tiny", "--out", "o"], "--dat"),
    (["plot", "run", "--ou", "x"], "--ou"),
    (["compare", "--strategie", "grpo", "--lrs", "1e-3"], "--strategie"),
    (["--verb", "simulate"], "--verb"),
])
def test_abbreviated_options_are_refused(capsys, no_trainer, argv, option):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    assert exit_info.value.code == 2
    assert option in capsys.readouterr().err


@pytest.mark.fault("a usage error: a value of the wrong type (train --learning-rate abc), a mistyped option at the "
                   "top level or in a subcommand (train --max-step 5, --verbos), a mistyped subcommand, a second "
                   "value for an option that takes one (compare --seed 0 1: said nothing of --seeds)",
                   "exit 2, one line naming the option and value, with the closest spelling (it printed train's "
                   "101-line usage, or the top-level usage with no suggestion)")
@pytest.mark.parametrize("argv, line", [
    (["train", "--learning-rate", "abc"],
     "error: argument --learning-rate: invalid float value: 'abc' (see reinforce-ada train "
     "--help)"),
    (["train", "--max-step", "5"],
     "error: unrecognized arguments: --max-step 5 (did you mean --max-steps?) (see reinforce-ada "
     "train --help)"),
    (["train", "--sampler.group-sise", "3"],
     "error: unrecognized arguments: --sampler.group-sise 3 (did you mean "
     "--sampler.group-size?) (see reinforce-ada train --help)"),
    (["--verbos", "simulate"],
     "error: unrecognized arguments: --verbos (did you mean --verbose?) (see reinforce-ada "
     "simulate --help)"),
    (["eval", "run", "--kk", "3"],
     "error: unrecognized arguments: --kk 3 (did you mean --k?) (see reinforce-ada eval --help)"),
    (["compare", "--seed", "0", "1"],
     "error: the following arguments are required: --strategies, --lrs (--seed takes one value; did you mean "
     "--seeds?) (see reinforce-ada compare --help)"),
    (["compare", "--seed", "0", "1", "--strategies", "grpo", "--lrs", "1e-3"],
     "error: unrecognized arguments: 1 (--seed takes one value; did you mean --seeds?) (see "
     "reinforce-ada compare --help)"),
    (["train", "--max-steps", "3", "4"],
     "error: unrecognized arguments: 4 (--max-steps takes one value) (see reinforce-ada train "
     "--help)"),
    (["trian"],
     "error: argument command: invalid choice: 'trian' (choose from train, simulate, plot, eval, "
     "select-prompts, simulate-multistep, compare); did you mean 'train'? (see reinforce-ada --help)"),
])
def test_usage_errors_are_one_line_naming_the_option_with_the_closest_spelling(capsys, no_trainer, argv, line):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.splitlines() == [line]


@pytest.mark.fault("another trainer's spelling of an option: train --lr 1e-3, --learning_rate 1e-3, --max_steps 3, "
                   "--sampler.est.prior_beta 16",
                   "taken as the option itself (--lr suggested --lora; the underscores were unrecognized)")
@pytest.mark.parametrize("argv, setting, value", [
    (["--lr", "1e-3"], "learning_rate", 1e-3), (["--learning_rate", "1e-3"], "learning_rate", 1e-3),
    (["--max_steps", "3"], "max_steps", 3), (["--group_size", "2"], "group_size", 2),
    (["--strategy", "ada-est", "--sampler.est.prior_beta", "16"], "sampler.est.prior_beta", 16.0),
    (["--use_chat_template", "false"], "use_chat_template", False),
])
def test_other_trainers_spellings_are_the_options_themselves(argv, setting, value):
    from reinforce_ada.config import TrainConfig, load_config

    args = cli.build_parser().parse_args(["train", *argv])
    overrides = {k: v for k, v in vars(args).items() if k not in ("command", "func", "config", "verbose")}
    config = load_config(TrainConfig, None, overrides)
    *sections, name = setting.split(".")
    if name == "group_size":
        sections = ["sampler"]
    for part in sections:
        config = getattr(config, part)
    assert getattr(config, name) == value


@pytest.mark.fault("a mistyped choice of a config field (train --strategy grop)",
                   "exit 2, one line under the prefix every error has, the choices and the closest one (it offered "
                   "'(or a callable)', which no command line can give, under another prefix than argparse's)")
def test_a_mistyped_choice_names_the_choices_and_the_closest_under_the_one_prefix(capsys, no_trainer):
    assert cli.main(["train", "--strategy", "grop"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "error: strategy='grop' is not one of ada-balanced, ada-positive, ada-mixed, ada-budget, ada-est, grpo, dapo; "
        "did you mean 'grpo'?"]
    with pytest.raises(ConfigError, match=r"exit_rule='balancd' is not one of .* \(or, from Python, a callable\); "
                                          r"did you mean 'balanced'\?"):
        SamplerConfig(exit_rule="balancd")


def test_every_subcommand_parser_refuses_abbreviations():
    parser = cli.build_parser()
    subparsers = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    assert set(subparsers.choices) >= {"train", "eval", "simulate", "simulate-multistep", "select-prompts", "plot"}
    assert not parser.allow_abbrev and all(not p.allow_abbrev for p in subparsers.choices.values())


# -- data -----------------------------------------------------------------------------------------------------------
def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture()
def model_dir(tmp_path):
    """A folder standing for a local model: the data errors come before the model loads, so it holds only the
    config.json that makes it a model folder."""
    path = tmp_path / "model"
    path.mkdir()
    (path / "config.json").write_text("{}")
    return path


def on_data(command, model_dir, data, tmp_path):
    """``train`` (into a fresh run folder) or ``eval`` of ``model_dir`` on the data file ``data``."""
    argv = [command, "--model", str(model_dir), "--data", str(data)]
    return argv + ["--output-dir", str(tmp_path / "run")] if command == "train" else argv


@pytest.mark.parametrize("command", ["train", "eval"])
def test_missing_column_is_named_with_the_available_ones_in_train_and_eval(tmp_path, capsys, model_dir, command):
    data = write_jsonl(tmp_path / "d.jsonl", [{"question": "1+1?", "solution": "2"}])
    code, err = run(capsys, *on_data(command, model_dir, data, tmp_path))
    assert code == 2
    assert one_error_line(err) == (f"error: {data}: no column 'prompt' (given as prompt_key); available columns: "
                                   "'question', 'solution'")


@pytest.mark.fault("an empty or whitespace-only prompt in a data file (train, eval)",
                   "exit 2 naming the file and row, before the model loads")
@pytest.mark.parametrize("command", ["train", "eval"])
@pytest.mark.parametrize("text", ["", "   \n"])
def test_an_empty_prompt_is_named_before_the_model_loads(tmp_path, capsys, model_dir, command, text):
    data = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "1+1=", "answer": "2"}, {"prompt": text, "answer": "3"}])
    code, err = run(capsys, *on_data(command, model_dir, data, tmp_path))
    assert code == 2
    assert one_error_line(err) == f"error: {data} row 1: the prompt is empty or whitespace only"


@pytest.mark.fault("chat prompts (--system-prompt or a messages column) for a tokenizer without a chat template",
                   "exit 2, one line naming the prompt and what to change, once the model has loaded (it was a "
                   "ValueError traceback, exit 1)")
def test_chat_prompts_for_a_tokenizer_without_a_chat_template_are_one_line(tmp_path, capsys):
    from reinforce_ada.models.tiny import SHIPPED_START_MODELS

    data = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "1+1=", "answer": "2"}])
    code, err = run(capsys, "train", "--model", str(SHIPPED_START_MODELS / "arithmetic"), "--data", str(data),
                    "--verifier", "exact", "--max-new-tokens", "8", "--system-prompt", "Add.",
                    "--output-dir", str(tmp_path / "run"))
    assert code == 2 and "Traceback" not in err  # (after the weights load: the prompts are encoded there)
    assert err.strip().splitlines()[-1].startswith("error: prompt ") and "has no chat_template" in err


def test_rows_without_an_answer_are_refused_naming_them(tmp_path, capsys, model_dir):
    rows = [{"prompt": "a", "answer": "1"}, {"prompt": "b", "answer": None}, {"prompt": "c"},
            {"prompt": "d", "answer": "  "}, {"prompt": "e", "answer": 0}]
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    code, err = run(capsys, "train", "--model", str(model_dir), "--data", str(data),
                    "--output-dir", str(tmp_path / "run"))
    assert code == 2
    assert one_error_line(err) == (f"error: {data}: 3 of 5 rows have no answer in column 'answer' (row 1 (line 2), "
                                   "row 2 (line 3), row 3 (line 4)); give every row a reference answer or remove "
                                   "those rows")


def test_missing_answers_in_csv_and_parquet_name_the_rows(tmp_path):
    from reinforce_ada.data import load_prompts

    csv = tmp_path / "d.csv"
    csv.write_text("prompt,answer\na,1\nb,\n")
    with pytest.raises(DataError, match=r"1 of 2 rows have no answer in column 'answer' \(row 1 \(line 3\)\)"):
        load_prompts(csv)
    pa, pq = pytest.importorskip("pyarrow"), pytest.importorskip("pyarrow.parquet")
    parquet = tmp_path / "d.parquet"
    pq.write_table(pa.table({"prompt": ["a", "b"], "answer": [float("nan"), 2.0]}), parquet)
    with pytest.raises(DataError, match=r"1 of 2 rows have no answer in column 'answer' \(row 0\)"):
        load_prompts(parquet)
    assert [p.answer for p in load_prompts(parquet, answer_key=None)] == [None, None]  # no answers asked for


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".json"])
def test_bytes_that_are_not_utf8_are_named_by_line_and_offset(tmp_path, suffix):
    from reinforce_ada.data import load_prompts

    path = tmp_path / f"d{suffix}"
    head = {".jsonl": b'{"prompt": "a", "answer": "1"}\n{"prompt": "b", "answer": "2"}\n',
            ".csv": b"prompt,answer\na,1\n", ".json": b'[{"prompt": "a",\n "answer": "1"},\n'}[suffix]
    path.write_bytes(head + b'{"prompt": "caf\xe9"}\n')
    offset = len(head) + len(b'{"prompt": "caf')
    line = head.count(b"\n") + 1
    with pytest.raises(DataError) as info:
        load_prompts(path)
    assert str(info.value) == (f"{path}:{line}: not UTF-8 text (byte 0xe9 at byte offset {offset}); "
                               "save the file as UTF-8")


def test_a_utf8_bom_is_accepted(tmp_path):
    from reinforce_ada.data import load_prompts

    path = tmp_path / "d.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + b'{"prompt": "a", "answer": "1"}\n')
    assert load_prompts(path)[0].prompt == "a"


def test_missing_column_error_is_a_data_error_and_a_key_error(tmp_path):
    from reinforce_ada.data import load_prompts

    path = write_jsonl(tmp_path / "d.jsonl", [{"q": "a"}])
    with pytest.raises(MissingColumnError) as info:
        load_prompts(path)
    assert isinstance(info.value, KeyError) and isinstance(info.value, UserError)
    assert str(info.value).startswith(f"{path}: no column 'prompt'")  # not quoted as KeyError would


# -- model paths ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("model, message", [
    ("./no/such/model", "model path ./no/such/model does not exist"),
    ("/no/such/model", "model path /no/such/model does not exist"),
    ("models/run1/checkpoint-5", "model path models/run1/checkpoint-5 does not exist"),
    ("no-such-org/no-such-model", "model path no-such-org/no-such-model does not exist, and "
                                  "'no-such-org/no-such-model' is not in the Hugging Face cache (HF_HUB_OFFLINE=1: "
                                  "nothing is downloaded)"),
    ("bad name!", "model path bad name! does not exist (nor is 'bad name!' a Hugging Face model id)"),
])
def test_a_model_that_does_not_exist_is_named_before_anything_is_made(tmp_path, capsys, monkeypatch, model, message):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "run"
    code, err = run(capsys, "train", "--model", model, "--output-dir", str(out), "--task", "arithmetic")
    assert code == 2 and one_error_line(err) == f"error: {message}"
    assert not out.exists()


def test_hub_ids_in_the_offline_cache_and_built_in_names_pass(tmp_path, monkeypatch):
    from reinforce_ada.training.preflight import check_model

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cache = tmp_path / "hub"
    snapshot = cache / "models--some-org--cached-model" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    (cache / "models--some-org--cached-model" / "refs").mkdir()
    (cache / "models--some-org--cached-model" / "refs" / "main").write_text("abc123")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(cache))
    check_model("some-org/cached-model")
    check_model("tiny")
    with pytest.raises(ConfigError, match="some-org/other-model"):
        check_model("some-org/other-model")
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    asked = []
    monkeypatch.setattr("huggingface_hub.model_info", lambda name, **kwargs: asked.append(name))
    check_model("some-org/other-model")  # online: the hub has it, so the loader downloads it
    check_model("some-org/cached-model")  # cached: nothing asked
    assert asked == ["some-org/other-model"]


def _hub_error(cls):
    """An instance of one of huggingface_hub's HTTP errors (their constructor wants an HTTP response)."""
    err = cls.__new__(cls)
    Exception.__init__(err, "hub says no")
    return err


@pytest.mark.fault("`train --model Qwen/Qwen2.5-0.5B-Instruct` without HF_HUB_OFFLINE on a machine without network "
                   "(the model not cached)", "one line within seconds naming HF_HUB_OFFLINE and a local folder, before "
                   "anything loads (it took 55 s and printed 45 lines of retry warnings first)")
def test_a_hub_model_the_hub_cannot_be_asked_for_fails_fast_with_the_way_out(tmp_path, capsys, monkeypatch):
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    from reinforce_ada.training.preflight import HUB_PROBE_TIMEOUT_S, check_model

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr("reinforce_ada.training.loop.load_model", lambda *a, **k: pytest.fail("the model loaded"))
    timeouts = []

    def unreachable(name, timeout=None, **kwargs):
        timeouts.append(timeout)
        raise ConnectionError("[Errno -2] Name or service not known")

    monkeypatch.setattr("huggingface_hub.model_info", unreachable)
    monkeypatch.chdir(tmp_path)
    code, err = run(capsys, "train", "--model", "some-org/some-model")
    assert code == 2 and one_error_line(err) == (
        "error: model path some-org/some-model does not exist, and 'some-org/some-model' is not in the Hugging Face "
        "cache nor can https://huggingface.co be reached to download it (ConnectionError: [Errno -2] Name or service "
        "not known); download it where there is network and run with HF_HUB_OFFLINE=1, or give a local model folder")
    assert timeouts == [HUB_PROBE_TIMEOUT_S] and os.listdir(tmp_path) == []

    def no_such(error):
        def ask(name, **kwargs):
            raise _hub_error(error)
        return ask

    monkeypatch.setattr("huggingface_hub.model_info", no_such(RepositoryNotFoundError))
    with pytest.raises(ConfigError, match="nor does the Hugging Face hub have a model 'some-org/some-model'"):
        check_model("some-org/some-model")
    monkeypatch.setattr("huggingface_hub.model_info", no_such(GatedRepoError))
    check_model("some-org/some-model")  # the hub answered: what a gated model needs, the loader says


def test_preflight_names_a_bad_task_verifier_or_data_file(tmp_path, capsys, no_trainer):
    out = tmp_path / "run"
    from reinforce_ada.training.preflight import check_train_inputs

    with pytest.raises(ConfigError, match="task 'arithmatic' is not one of"):
        check_train_inputs(TrainConfig(task="arithmatic"))
    with pytest.raises(ConfigError, match="verifier 'exakt' is not one of .* \\(did you mean 'exact'\\?\\)"):
        check_train_inputs(TrainConfig(verifier="exakt"))
    with pytest.raises(ConfigError, match="verifier 'no_such_module:fn': cannot import module 'no_such_module'"):
        check_train_inputs(TrainConfig(verifier="no_such_module:fn"))
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    with pytest.raises(DataError, match="data: .*missing.jsonl does not exist"):
        check_train_inputs(TrainConfig(model=str(tmp_path / "model"), data=str(tmp_path / "missing.jsonl")))
    assert not out.exists()


def test_a_held_out_task_is_checked_and_the_tiny_model_on_a_prompt_file_is_told_what_to_give(tmp_path, capsys,
                                                                                              monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("reinforce_ada.training.loop.load_model", lambda *a, **k: pytest.fail("the model loaded"))
    data = write_jsonl(tmp_path / "rows.jsonl", [{"prompt": "1+1=", "answer": "2"}])
    code, err = run(capsys, "train", "--data", str(data), "--eval-data", "task:")
    assert code == 2 and one_error_line(err) == ("error: eval_data='task:' names no task; give e.g. --eval-data "
                                                 "task:arithmetic")
    code, err = run(capsys, "train", "--data", str(data), "--eval-data", "task:arithmatic")
    assert code == 2 and one_error_line(err).startswith("error: task 'arithmatic' is not one of")
    code, err = run(capsys, "train", "--data", str(data))  # a file outside any run: which model to start from
    assert code == 2 and one_error_line(err) == (
        f"error: model='tiny' is warm-started on a built-in task (--task), not on a prompt file such as {data}; start "
        f"from a trained model instead: a run of the tiny model (--model runs/default, the demo's; add --eval-data "
        f"task:arithmetic for its held-out accuracy) or a real --model")
    assert sorted(os.listdir(tmp_path)) == ["rows.jsonl"]


# -- the real entry point -------------------------------------------------------------------------------------------
def test_console_entry_point_prints_one_line_and_no_traceback(tmp_path):
    path = yaml_file(tmp_path, "max_steps: [1, 2]\n")
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-m", "reinforce_ada.cli", "train", "--config", str(path),
                           "--output-dir", str(out)], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr == f"error: {path}: config field `max_steps`: expected int, got list [1, 2]\n"
    assert proc.stdout == "" and not out.exists()


def test_unexpected_exceptions_keep_their_traceback(monkeypatch):
    def broken(self, config, **kwargs):
        raise TypeError("a bug, not a user error")

    monkeypatch.setattr("reinforce_ada.training.Trainer.__init__", broken)
    with pytest.raises(TypeError, match="a bug"):
        cli.main(["train", "--max-steps", "1"])


@pytest.mark.parametrize("argv, message", [
    (["train", "--task-digits", "12"], "error: task 'arithmetic': digits must be an integer in [1, 9] (got 12)"),
    (["train", "--template", "no placeholder"],
     "error: template must contain '{prompt}' where the prompt goes (got 'no placeholder')"),
])
def test_bad_task_options_are_named_before_anything_is_made(tmp_path, capsys, argv, message):
    out = tmp_path / "run"
    code, err = run(capsys, *argv, "--output-dir", str(out))
    assert code == 2 and one_error_line(err) == message
    assert not out.exists()


def test_a_cut_metrics_line_and_a_bad_pass_rate_file_are_named(tmp_path, capsys):
    (tmp_path / "metrics.jsonl").write_text('{"step": 1}\n{"step": 2, "tra')
    code, err = run(capsys, "plot", str(tmp_path), "--out", str(tmp_path))
    assert code == 2 and one_error_line(err).startswith(f"error: {tmp_path / 'metrics.jsonl'}:2: not valid JSON")
    rates = tmp_path / "rates.txt"
    rates.write_text("0.5\nhalf\n")
    code, err = run(capsys, "simulate", "--dist", str(rates), "--plot", "", "--prompts", "10")
    assert code == 2 and one_error_line(err).startswith(f"error: {rates}: pass rates must be numbers in [0, 1]")


def test_select_prompts_names_a_missing_model_too(tmp_path, capsys):
    data = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "1+1=", "answer": "2"}])
    code, err = run(capsys, "select-prompts", "--data", str(data), "--model", str(tmp_path / "nope"),
                    "--out", str(tmp_path / "out.jsonl"))
    assert code == 2 and one_error_line(err) == (f"error: --model {tmp_path / 'nope'} does not exist (a run folder, "
                                                 "a checkpoint or a model folder)")
    assert not (tmp_path / "out.jsonl").exists()


def test_select_prompts_preset_beside_its_own_options_is_refused(tmp_path, capsys):
    data = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "1+1=", "answer": "2"}])
    code, err = run(capsys, "select-prompts", "--data", str(data), "--tiny", "--preset", "paper-filter", "--max", "0.5",
                    "-k", "8", "--out", str(tmp_path / "out.jsonl"))
    assert code == 2 and one_error_line(err) == ("error: --preset paper-filter sets -k, --min and --max; give either "
                                                 "the preset or -k/--max")
    assert not (tmp_path / "out.jsonl").exists()


def test_answer_key_null_means_no_answer_column(tmp_path):
    path = yaml_file(tmp_path, "answer_key: null\ndata: rows.jsonl\nmodel: some/model\n")
    assert load_config(TrainConfig, str(path)).answer_key is None


@pytest.fixture()
def saved_model(tmp_path):
    """The tiny model saved as a folder (its weights must not load in these tests)."""
    from reinforce_ada.models import build_char_tokenizer, build_tiny_model

    path = tmp_path / "saved"
    build_tiny_model().save_pretrained(path)
    build_char_tokenizer().save_pretrained(path)
    return path


@pytest.mark.fault("a prompt that encodes to zero tokens, or holds a lone surrogate (`\\ud800` in JSON) "
                   "(train, eval, select-prompts)",
                   "exit 2 in one line naming the file and row, before the weights load (it was a traceback after "
                   "the model loaded)")
@pytest.mark.parametrize("command", ["train", "eval", "select-prompts"])
@pytest.mark.parametrize("fault", ["zero-tokens", "surrogate"])
def test_a_prompt_no_tokenizer_can_take_is_refused_before_the_weights_load(tmp_path, capsys, monkeypatch,
                                                                          saved_model, command, fault):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("transformers.AutoModelForCausalLM.from_pretrained",
                        lambda *a, **k: pytest.fail("weights were loaded"))
    rows = tmp_path / "rows.jsonl"
    first = '{"prompt": "\u65e5\u672c", "answer": "1"}' if fault == "zero-tokens" else \
        '{"prompt": "1+\\ud800=", "answer": "1"}'
    rows.write_text(first + '\n{"prompt": "2+2=", "answer": "4"}\n')
    capsys.readouterr()  # the fixture's progress bar
    argv = {"train": ["train", "--model", "saved", "--data", "rows.jsonl", "--output-dir", "run"],
            "eval": ["eval", "saved", "--data", "rows.jsonl"],
            "select-prompts": ["select-prompts", "saved", "--data", "rows.jsonl", "--out", "o.jsonl"]}[command]
    code, err = run(capsys, *argv, "--max-new-tokens", "4")
    line = one_error_line(err)
    assert code == 2
    if fault == "surrogate":
        assert line == ("error: rows.jsonl:1: field 'prompt' holds a lone surrogate ('\\ud800' at character 2), "
                        "which is not Unicode text; fix the \\u escape or drop the row")
    else:
        what = {"train": "training prompt", "eval": "rows.jsonl prompt", "select-prompts": "rows.jsonl prompt"}
        assert line.startswith(f"error: {what[command]} at row 0: prompt ")
        assert line.endswith("('日本') encodes to zero tokens with this model's tokenizer; a completion needs a "
                             "non-empty prompt: fix or drop it")
    assert sorted(os.listdir(tmp_path)) == ["rows.jsonl", "saved"]


@pytest.mark.fault("docs/reliability.md's repro `train --data arithmetic` (the default model)",
                   "the documented line: `data: 'arithmetic' is a built-in task, not a dataset: give --task arithmetic "
                   "(or --data task:arithmetic)` (it said the tiny model needs --task)")
def test_a_task_given_as_data_is_named_so_with_the_default_model(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("reinforce_ada.training.loop.load_model", lambda *a, **k: pytest.fail("the model loaded"))
    code, err = run(capsys, "train", "--data", "arithmetic")
    assert os.listdir(tmp_path) == []
    assert code == 2 and one_error_line(err) == (
        "error: data: 'arithmetic' is a built-in task, not a dataset: give --task arithmetic (or --data "
        "task:arithmetic)")


@pytest.mark.fault("an output path that is one of the command's inputs (select-prompts / eval --out = --data, "
                   "also through a symlink; --out = --pass-rates)", "one-line UsageError, exit 2, before any work")
@pytest.mark.parametrize("case", ["select-prompts", "select-prompts-link", "select-prompts-pass-rates", "eval"])
def test_an_output_is_never_one_of_the_inputs(tmp_path, capsys, model_dir, case):
    data = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "1+1=", "answer": "2"}])
    before = data.read_bytes()
    out = data
    if case == "select-prompts-link":
        out = tmp_path / "link.jsonl"
        out.symlink_to(data)
    if case == "eval":
        argv = ["eval", "--model", str(model_dir), "--data", str(data), "--out", str(out)]
        culprit = f"--out {out} is the same file as --data {data}"
    elif case == "select-prompts-pass-rates":
        out = tmp_path / "o.jsonl"
        argv = ["select-prompts", "--data", str(data), "--model", str(model_dir), "--out", str(out),
                "--pass-rates", str(out)]
        culprit = f"--pass-rates {out} is the same file as --out {out}"
    else:
        argv = ["select-prompts", "--data", str(data), "--model", str(model_dir), "--out", str(out)]
        culprit = f"--out {out} is the same file as --data {data}"
    code, err = run(capsys, *argv)
    assert code == 2
    assert one_error_line(err).startswith(f"error: {culprit}: an input is never overwritten")
    assert data.read_bytes() == before


@pytest.mark.fault("a bounded setting out of its range (positive threshold, target accuracy, seeds)",
                   "exit 2 before the model loads: `error: NAME must be in RANGE (got VALUE)`")
@pytest.mark.parametrize("argv, message", [
    (["--sampler.positive-threshold", "2"], "positive_threshold must be in [0, 1) (got 2.0)"),
    (["--sampler.positive-threshold", "-0.5"], "positive_threshold must be in [0, 1) (got -0.5)"),
    (["--sft-target-accuracy", "2"], "sft_target_accuracy must be in (0, 1] (got 2.0)"),
    (["--sft-target-accuracy", "0"], "sft_target_accuracy must be in (0, 1] (got 0.0)"),
    (["--seed", "-1"], "seed must be an integer in 0..4294967295 (2**32-1) (got -1)"),
    (["--seed", str(2**40)], f"seed must be an integer in 0..4294967295 (2**32-1) (got {2**40})"),
    (["--sft-seed", "-3"], "sft_seed must be an integer in 0..4294967295 (2**32-1) (got -3)"),
])
def test_bounded_settings_out_of_range_are_one_line_before_the_model(capsys, no_trainer, argv, message):
    code, err = run(capsys, "train", *argv)
    assert code == 2 and message in one_error_line(err)


def test_seeds_at_the_ends_of_the_range_are_accepted():
    assert TrainConfig(task="addition", seed=2**32 - 1).sampler.seed == 2**32 - 1
    assert TrainConfig(task="addition", seed=0, sft_seed=2**32 - 1).sft_seed == 2**32 - 1


@pytest.mark.fault("simulate / simulate-multistep given a NaN Beta parameter, a seed numpy refuses, an absurd prompt "
                   "count, zero concurrency, a negative --length-median or a zero --half-life (these two were "
                   "ValueError tracebacks)", "exit 2 before simulating: `error: --NAME must be ... (got VALUE)`")
@pytest.mark.parametrize("argv, message", [
    (["simulate", "--dist", "beta:nan,2"], "Beta parameters must be positive finite numbers"),
    (["simulate", "--dist", "beta:inf,2"], "Beta parameters must be positive finite numbers"),
    (["simulate", "--seed", "-1"], "--seed must be in 0..4294967295 (2**32-1) (got -1)"),
    (["simulate", "--seed", str(2**40)], f"--seed must be in 0..4294967295 (2**32-1) (got {2**40})"),
    (["simulate", "--prompts", "1000000000"], "--prompts must be a positive integer at most 10000000 (got 1000000000)"),
    (["simulate", "--batch-size", "0"], "--batch-size must be a positive integer (got 0)"),
    (["simulate-multistep", "--concurrency", "0"], "--concurrency must be a positive integer (got 0)"),
    (["simulate-multistep", "--seed", "-1"], "--seed must be in 0..4294967295 (2**32-1) (got -1)"),
    (["simulate-multistep", "--dist", "beta:nan,2"], "Beta parameters must be positive finite numbers"),
    (["simulate-multistep", "--length-median", "-5"], "--length-median must be a positive number (got -5.0)"),
    (["simulate-multistep", "--half-life", "0"], "--half-life must be a positive number (got 0.0)"),
    (["simulate-multistep", "--skip-below", "-1"], "skip_below must be in [0, 1] (got -1.0)"),
])
def test_simulate_inputs_out_of_range_are_one_line(capsys, argv, message):
    code, err = run(capsys, *argv)
    assert code == 2 and message in one_error_line(err)


@pytest.mark.fault("simulate where no prompt ever gives signal (a ratio over zero prompts)",
                   "strict JSON: `null`, never `Infinity` or `NaN`")
def test_simulate_json_has_no_infinity(tmp_path, capsys):
    rates = tmp_path / "rates.txt"
    rates.write_text("0\n0\n0\n0\n")  # nothing ever passes: samples per signal prompt is a ratio over zero prompts
    code = cli.main(["simulate", "--dist", str(rates), "--prompts", "4", "--batch-size", "4", "--json"])
    out = capsys.readouterr().out
    assert code == 0 and "Infinity" not in out and "NaN" not in out
    rows = json.loads(out, parse_constant=lambda name: pytest.fail(f"{name} in the JSON"))
    assert {row["samples_per_signal_prompt"] for row in rows} == {None}


@pytest.mark.fault("prompts with an unhashable or a duplicated id (select-prompts, the samplers, evaluation)",
                   "a named ValueError/TypeError before any generation, naming the prompt's index and id")
@pytest.mark.parametrize("prompts, error, message", [
    ([Prompt(["a"], "1+1=", "2")], TypeError, "prompts[0].prompt_id=['a'] is a list, which cannot be a key"),
    ([Prompt("a", "1+1=", "2"), Prompt("a", "2+2=", "4")], ValueError, "prompts[1].prompt_id='a' is duplicated"),
])
def test_select_prompts_refuses_bad_prompts_before_generating(prompts, error, message):
    from reinforce_ada.research.select_prompts import estimate_pass_rates

    class NoGenerator:
        def generate(self, requests):
            pytest.fail("generated before the prompts were checked")

    with pytest.raises(error) as caught:
        estimate_pass_rates(prompts, NoGenerator(), lambda prompts, completions: [0.0] * len(completions), k=2)
    assert message in str(caught.value)


@pytest.mark.fault("select-prompts given a prompt file whose ids two rows share (given twice, or given and a row's "
                   "implicit line number) or whose id is a list",
                   "exit 2, one line naming the file, line and id, before any model loads (it was a ValueError or "
                   "TypeError traceback, exit 1)")
@pytest.mark.parametrize("rows, line", [
    ([{"id": 1, "prompt": "1+1=", "answer": "2"}, {"id": 1, "prompt": "1+2=", "answer": "3"}],
     "p.jsonl:2: id 1 (its id) is also the id of line 1 (its id); every prompt needs its own id (a row without one "
     "gets its 0-based line number)"),
    ([{"prompt": "1+1=", "answer": "2"}, {"id": 0, "prompt": "1+2=", "answer": "3"}],
     "p.jsonl:2: id 0 (its id) is also the id of line 1 (its line number, as it has no id); every prompt needs its own "
     "id (a row without one gets its 0-based line number)"),
    ([{"id": [1], "prompt": "1+1=", "answer": "2"}], "p.jsonl:1: id [1] is a list; give a string or an integer"),
])
def test_select_prompts_names_an_id_two_rows_share_or_of_another_kind(tmp_path, capsys, monkeypatch, rows, line):
    write_jsonl(tmp_path / "p.jsonl", rows)
    monkeypatch.chdir(tmp_path)
    code = cli.main(["select-prompts", "--tiny", "--data", "p.jsonl", "--out", "o.jsonl", "-k", "1",
                     "--max-new-tokens", "4"])
    assert code == 2 and one_error_line(capsys.readouterr().err) == f"error: {line}"


@pytest.mark.fault("select-prompts given a prompt file with an empty or whitespace-only prompt",
                   "DataError naming file and line before any generation: `FILE:LINE: the prompt is empty ...`")
def test_select_prompts_names_an_empty_prompt_line(tmp_path):
    from reinforce_ada.research.select_prompts import read_prompts_jsonl

    path = tmp_path / "p.jsonl"
    write_jsonl(path, [{"prompt": "1+1=", "answer": "2"}, {"prompt": "  \t", "answer": "4"}])
    with pytest.raises(DataError, match=r"p.jsonl:2: the prompt is empty or whitespace only"):
        read_prompts_jsonl(path)
