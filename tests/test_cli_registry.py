"""Every ``reinforce-ada`` subcommand is registered in one place: the table in ``reinforce_ada/cli.py``."""

import pathlib
import re

import reinforce_ada
from reinforce_ada import cli

PACKAGE = pathlib.Path(reinforce_ada.__file__).parent


def test_the_table_is_what_the_parser_offers():
    parser = cli.build_parser()
    (subparsers,) = [a for a in parser._actions if a.dest == "command"]
    assert list(subparsers.choices) == [c.name for c in cli.SUBCOMMANDS]
    assert [c.name for c in cli.SUBCOMMANDS] == ["train", "simulate", "plot", "eval", "select-prompts",
                                                 "simulate-multistep", "compare"]
    for command in cli.SUBCOMMANDS:
        args = subparsers.choices[command.name].parse_args(_minimal_argv(command.name))
        assert args.func is cli._resolve(command.run)


def _minimal_argv(name):
    return {"plot": ["run"], "eval": ["--model", "m", "--data", "d"],
            "select-prompts": ["--data", "d", "--tiny", "--out", "o"],
            "compare": ["--strategies", "grpo", "ada-balanced", "--lrs", "1e-3"]}.get(name, [])


def test_no_other_module_registers_a_subcommand():
    registering = [path.relative_to(PACKAGE).as_posix() for path in PACKAGE.rglob("*.py")
                   if re.search(r"\.add_(sub)?parsers?\(", path.read_text())]
    assert registering == ["cli.py"]
