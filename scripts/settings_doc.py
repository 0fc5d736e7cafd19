"""Write docs/settings.md, every setting of ``reinforce-ada train`` with its whole description, from the config tree.

``reinforce-ada train --help`` shows the first sentence of each option's docstring, grouped as here; this page has
each docstring whole, its spellings (command line and YAML) and its default, made from the same list
(:func:`reinforce_ada.config.loading.config_options`). ``--check`` exits 1 when the committed page differs, which
``tests/scripts/test_settings_doc.py`` runs in CI.

    python scripts/settings_doc.py          # rewrite the page
    python scripts/settings_doc.py --check  # compare only
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "settings.md"

HEAD = """# Settings of `reinforce-ada train`

Every option of `reinforce-ada train` is a field of `TrainConfig` (`reinforce_ada/config/train.py`) or of the sampler
tree under it (`reinforce_ada/config/sampler.py`, `reinforce_ada/config/streaming.py`), and the same name is a key of
a `--config` YAML file (nested: `sampler: {streaming: {target: 0.4}}`). `reinforce-ada train --help` lists them in
these groups with the first sentence of each description; here is each description whole, from the field's own
docstring. Written by `python scripts/settings_doc.py`; `tests/scripts/test_settings_doc.py` fails when this page
and the code disagree. How settings combine (the strategy table, one name per setting):
[architecture.md](architecture.md#configuration-one-tree).
"""


def page() -> str:
    from reinforce_ada.config import TrainConfig
    from reinforce_ada.config.loading import SECTION_NOTES, config_options

    def cell(text: str) -> str:
        return " ".join(text.split()).replace("|", "\\|")

    lines = [HEAD]
    section = None
    for setting in config_options(TrainConfig):
        if setting.section != section:
            section = setting.section
            lines += ["", f"## {section}", ""]
            if section in SECTION_NOTES:
                lines += [SECTION_NOTES[section], ""]
            lines += ["| option | YAML | default | what it does |", "|---|---|---|---|"]
        options = ", ".join(f"`{option}`" for option in setting.options)
        default = f"`{setting.default}`" if setting.default and setting.default != "by model" else (
            setting.default or "")
        lines.append(f"| {options} | `{setting.dotted}` | {default} | {cell(setting.doc)} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed page; exit 1 if it differs")
    args = parser.parse_args(argv)
    expected = page()
    if args.check:
        if not DOC.exists() or DOC.read_text() != expected:
            print(f"{DOC.relative_to(ROOT)} is out of date: run python scripts/settings_doc.py")
            return 1
        return 0
    DOC.write_text(expected)
    print(f"wrote {DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
