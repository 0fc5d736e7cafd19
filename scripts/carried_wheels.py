"""The wheels ``scripts/gpu_check.sh`` carries to a GPU machine without network access (standard library only).

    python scripts/carried_wheels.py list DIR       # each wheel of scripts/gpu_check_wheels.txt in DIR, with sizes
    python scripts/carried_wheels.py missing DIR    # those whose package this Python does not have installed

The list is scripts/gpu_check_wheels.txt (or the file ``GPU_CHECK_WHEELS_LIST`` names). ``list`` fails (exit 1)
when a listed wheel is not in DIR, when DIR holds two versions of one package, or when the wheels together exceed the
64 MiB that travel with a checkout. ``missing`` prints one wheel path per line.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import sys
from pathlib import Path

LIMIT_BYTES = 64 * 2**20
REQUIREMENTS = Path(os.environ.get("GPU_CHECK_WHEELS_LIST") or Path(__file__).with_name("gpu_check_wheels.txt"))
"""The pinned list (``GPU_CHECK_WHEELS_LIST`` overrides it, for tests)."""


def normalize(name: str) -> str:
    """PEP 503 name normalisation (``Foo_Bar.baz`` -> ``foo-bar-baz``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements(path: Path = REQUIREMENTS) -> list[tuple[str, str]]:
    """``(name, version)`` for each ``name==version`` line (comments and blank lines ignored)."""
    pinned = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, version = line.partition("==")
        if not sep or not version.strip():
            raise ValueError(f"{path}:{number}: {line!r} is not an exact pin (name==version)")
        pinned.append((name.strip(), version.strip()))
    return pinned


def wheels_in(folder: Path, pinned: list[tuple[str, str]]) -> tuple[list[Path], list[str]]:
    """The wheel of each pinned package in ``folder``, and the problems found (missing, duplicated, extra)."""
    problems: list[str] = []
    found: dict[str, list[Path]] = {}
    for wheel in sorted(folder.glob("*.whl")) if folder.is_dir() else []:
        name, version = wheel.name.split("-")[:2]
        found.setdefault(normalize(name), []).append(wheel)
    chosen = []
    for name, version in pinned:
        candidates = found.pop(normalize(name), [])
        matching = [w for w in candidates if w.name.split("-")[1] == version]
        if not matching:
            have = ", ".join(w.name for w in candidates) or "nothing"
            problems.append(f"{name}=={version}: no wheel in {folder} (found {have})")
        elif len(candidates) > 1:
            problems.append(f"{name}: several wheels in {folder} ({', '.join(w.name for w in candidates)}); keep one")
        else:
            chosen.append(matching[0])
    problems += [f"{w.name}: in {folder} but not listed in {REQUIREMENTS.name}" for ws in found.values() for w in ws]
    return chosen, problems


def installed(name: str) -> bool:
    try:
        importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("list", "missing"):
        print(__doc__, file=sys.stderr)
        return 2
    command, folder = argv[0], Path(argv[1])
    pinned = requirements()
    wheels, problems = wheels_in(folder, pinned)
    if command == "missing":
        by_name = {normalize(w.name.split("-")[0]): w for w in wheels}
        for name, version in pinned:
            if not installed(name):
                if normalize(name) not in by_name:
                    print(f"{name}=={version} is not installed and has no wheel in {folder}", file=sys.stderr)
                    return 1
                print(by_name[normalize(name)])
        return 0
    total = sum(w.stat().st_size for w in wheels)
    for wheel in wheels:
        print(f"  {wheel.stat().st_size / 2**20:7.2f} MiB  {wheel.name}")
    print(f"  {total / 2**20:7.2f} MiB  in all ({len(wheels)} wheels; limit {LIMIT_BYTES // 2**20} MiB)")
    if total > LIMIT_BYTES:
        problems.append(f"the wheels take {total / 2**20:.1f} MiB, more than {LIMIT_BYTES // 2**20} MiB")
    for problem in problems:
        print(f"  problem: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
