"""``reinforce-ada compare``'s library (the command: :mod:`reinforce_ada.commands.compare`; docs/compare.md): a grid
of strategies x learning rates x seeds, each run a normal ``train`` run folder, reported against a baseline at equal
steps, at the baseline's generated tokens and at its step seconds.

* :mod:`.grid` -- :class:`Grid`, :func:`make_grid` (the grid and its checks), :func:`run_comparison` (``compare.json``,
  resuming, training the unfinished runs, writing the report files);
* :mod:`.runs` -- training the runs (K worker processes, interleaved by strategy), ``runs.jsonl``, reading a finished
  run folder back;
* :mod:`.report` -- the report as data (``report.json``): best lr, budgets, paired differences, cost ratios,
  verdicts, breakdown;
* :mod:`.selection` -- which held-out prompts choose the lrs and which judge them (``--lr-selection split``);
* :mod:`.verdict` -- *ahead* / *behind* / *inconclusive* ("no resolved difference") per budget, and the seeds an
  unresolved one needs;
* :mod:`.breakdown` -- where a difference lands: difficulty strata, pass@k, entropy, sampling dynamics;
* :mod:`.markdown` -- ``report.md``, the verdict first; :mod:`.figure` -- ``report.png``;
* :mod:`.stats` -- exact Student-t quantiles and intervals, ratio intervals, interpolation at a budget, the steps
  bootstrap;
* :mod:`.strategies` -- the named strategies and ``NAME=SETTINGS``.
"""

from reinforce_ada.research.compare.grid import MANIFEST, OWN_OPTIONS, Grid, make_grid, run_comparison

__all__ = ["MANIFEST", "OWN_OPTIONS", "Grid", "make_grid", "run_comparison"]
