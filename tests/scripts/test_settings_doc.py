"""docs/settings.md is the page scripts/settings_doc.py writes from the config tree, and ``train --help`` is short
enough to read: under 300 lines at 80 columns, one spelling shown per option, grouped, the strategies spelled out."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("settings_doc", ROOT / "scripts" / "settings_doc.py")
settings_doc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(settings_doc)


def test_the_committed_page_is_the_generated_one(capsys):
    assert settings_doc.main(["--check"]) == 0, capsys.readouterr().out


def train_help() -> str:
    done = subprocess.run([sys.executable, "-m", "reinforce_ada.cli", "train", "--help"], capture_output=True,
                          text=True, env={"COLUMNS": "80", "PATH": ""}, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_train_help_is_short_grouped_and_shows_one_spelling_per_option():
    from reinforce_ada.config import TrainConfig
    from reinforce_ada.config.loading import config_options
    from reinforce_ada.config.strategies import strategies_text

    text = train_help()
    assert len(text.splitlines()) < 300, len(text.splitlines())
    shown = re.findall(r"^  (--[\w.-]+)", text, re.M)
    settings = config_options(TrainConfig)
    assert sorted(shown) == sorted(["--config", *(s.options[0] for s in settings)])  # each once (and -h, --help)
    assert "--sampler.group-size" not in text and "alias of" not in text  # the dotted spelling: said once, by group
    groups = re.findall(r"^(\S[^:\n]*):$", text, re.M)
    assert groups == ["options", "model", "data and reward", "sampling", "sampler", "sampler.streaming",
                      "sampler.memory", "sampler.est", "generation engine", "optimisation", "run"]
    assert "STRATEGY_SAMPLER_SETTINGS" not in text
    assert " ".join(strategies_text().split()) in " ".join(text.split())
