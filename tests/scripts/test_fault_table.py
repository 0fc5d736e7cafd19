"""docs/reliability.md's fault table is the one scripts/fault_table.py generates from the marked tests."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("fault_table", ROOT / "scripts" / "fault_table.py")
fault_table = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fault_table)


def test_the_committed_table_is_the_generated_one(capsys):
    assert fault_table.main(["--check"]) == 0, capsys.readouterr().out


def test_every_marked_test_is_a_row(tmp_path):
    (tmp_path / "test_x.py").write_text(
        "import pytest\n\n"
        "@pytest.mark.fault('disk full', 'exit 2')\ndef test_a():\n    pass\n\n"
        "@pytest.mark.parametrize('x', [1])\ndef test_b(x):\n    pass\n")
    rows = fault_table.collect(tmp_path)
    assert [row[:2] for row in rows] == [("disk full", "exit 2")] and rows[0][2].endswith("test_x.py::test_a")


def test_a_marker_without_two_literals_is_refused(tmp_path):
    (tmp_path / "test_y.py").write_text("import pytest\nC = 'c'\n\n@pytest.mark.fault(C)\ndef test_a():\n    pass\n")
    with pytest.raises(ValueError, match="two string literals"):
        fault_table.collect(tmp_path)
