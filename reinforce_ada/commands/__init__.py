"""The ``reinforce-ada`` subcommands' options (``add_arguments(parser)``) and actions (``run(args) -> int``), one
module each: :mod:`.train`, :mod:`.eval`, :mod:`.simulate`, :mod:`.plot`. They are registered in
:data:`reinforce_ada.cli.SUBCOMMANDS` with ``select-prompts`` and ``simulate-multistep``, whose options and actions
live beside their research tools. A command reads its options, calls the library and prints; the work is done below.
"""
