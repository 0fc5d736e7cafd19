"""Write docs/reliability.md's fault-class table from the tests that are marked ``@pytest.mark.fault(cls, outcome)``.

Every row is a test: the fault class, what it gets, and the test that asserts it. The table sits between the markers
``<!-- fault-table:start -->`` and ``<!-- fault-table:end -->``; ``--check`` exits 1 (printing the table it expected)
when the committed one differs, which ``tests/scripts/test_fault_table.py`` runs in CI.

    python scripts/fault_table.py          # rewrite the table
    python scripts/fault_table.py --check  # compare only
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "reliability.md"
START, END = "<!-- fault-table:start -->", "<!-- fault-table:end -->"


def _fault_args(decorator: ast.expr) -> tuple[str, str] | None:
    """``(cls, outcome)`` of a ``pytest.mark.fault("...", "...")`` decorator, ``None`` for any other decorator."""
    if not (isinstance(decorator, ast.Call) and isinstance(decorator.func, ast.Attribute)
            and decorator.func.attr == "fault" and ast.unparse(decorator.func.value) == "pytest.mark"):
        return None
    args = decorator.args
    if len(args) != 2 or decorator.keywords or not all(isinstance(a, ast.Constant) and isinstance(a.value, str)
                                                       for a in args):
        raise ValueError(f"line {decorator.lineno}: pytest.mark.fault takes two string literals (cls, outcome)")
    return args[0].value, args[1].value


def collect(tests: Path = ROOT / "tests") -> list[tuple[str, str, str]]:
    """``(cls, outcome, test id)`` for every marked test function, sorted by class then test."""
    rows = []
    base = tests.parent
    for path in sorted(tests.rglob("test_*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for decorator in node.decorator_list:
                    try:
                        found = _fault_args(decorator)
                    except ValueError as err:
                        raise ValueError(f"{path.relative_to(base)}: {err}") from None
                    if found:
                        rows.append((*found, f"{path.relative_to(base)}::{node.name}"))
    return sorted(rows)


def table(rows: list[tuple[str, str, str]]) -> str:
    def cell(text: str) -> str:
        return " ".join(text.split()).replace("|", "\\|")

    lines = [START, "", "| fault | what it gets | test |", "|---|---|---|"]
    lines += [f"| {cell(cls)} | {cell(outcome)} | `{test}` |" for cls, outcome, test in rows]
    return "\n".join(lines + ["", END])


def render(doc: str, rows: list[tuple[str, str, str]]) -> str:
    if doc.count(START) != 1 or doc.count(END) != 1 or doc.index(START) > doc.index(END):
        raise ValueError(f"{DOC.relative_to(ROOT)} needs one {START} ... {END} block")
    head, rest = doc.split(START)
    return head + table(rows) + rest.split(END, 1)[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed table; exit 1 if it differs")
    args = parser.parse_args(argv)
    doc, rows = DOC.read_text(), collect()
    expected = render(doc, rows)
    if args.check:
        if expected != doc:
            print(f"{DOC.relative_to(ROOT)}'s fault table is out of date: run python scripts/fault_table.py\n")
            print(table(rows))
            return 1
        return 0
    DOC.write_text(expected)
    print(f"wrote {len(rows)} rows into {DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
