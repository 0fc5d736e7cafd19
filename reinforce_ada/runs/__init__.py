"""The run folder and everything a run keeps in it, below the trainer and the commands.

* :mod:`.folder` -- which files belong to a run, the checks before anything loads (:func:`~.folder.check_run_folder`:
  a folder holding another run is refused, a resume's settings are compared with the checkpoint's), the start of a
  run (:func:`~.folder.prepare_run_folder`) and its event log (``config_history.jsonl``);
* :mod:`.lock` -- :class:`~.lock.RunLock`, one writer per run folder;
* :mod:`.files` -- atomic, durable writes; :mod:`.manifest` -- each checkpoint's list of its files' sizes and SHA-256;
* :mod:`.intact` -- finding checkpoints and checking that one is intact before anything loads;
* :mod:`.checkpoint` -- writing a checkpoint and reading it back (weights, optimizer, RNG state, final evaluation);
* :mod:`.metrics_file` -- reading ``metrics.jsonl`` and cutting it back to a checkpoint's step;
* :mod:`.source` -- what a command that takes a model was pointed at (a model folder, a checkpoint or a run);
* :mod:`.data` -- a run's data by one rule each (prompt-file keys, held-out prompts, verifier) and its fingerprint.
"""
