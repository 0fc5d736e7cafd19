"""Every relative link in README.md and docs/ resolves: the file (or folder) exists, and an anchor names a heading of
the page it points at, slugged as GitHub slugs headings (lower case, punctuation dropped, spaces as hyphens, ``-1``,
``-2`` ... after a repeated heading)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

_LINK = re.compile(r"(?<!!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_IMAGE = re.compile(r"!\[[^\]]*\]\(\s*<?([^)\s>]+)>?\s*\)")
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
_CODE = re.compile(r"`[^`\n]*`")


def slug(heading: str) -> str:
    """GitHub's anchor of a heading's text."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)  # punctuation goes; letters, digits, _, - and spaces stay
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = _FENCE.sub("", page.read_text(encoding="utf-8"))
    found: set[str] = set()
    seen: dict[str, int] = {}
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", text, re.M):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    found.update(re.findall(r"<a\s+(?:name|id)=\"([^\"]+)\"", text))
    return found


def links(page: Path) -> list[str]:
    text = _CODE.sub("", _FENCE.sub("", page.read_text(encoding="utf-8")))
    return _LINK.findall(text) + _IMAGE.findall(text)


def broken(page: Path) -> list[str]:
    out = []
    for target in links(page):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: -- not checked here
            continue
        path_part, _, anchor = target.partition("#")
        path = (page.parent / path_part).resolve() if path_part else page
        if not path.exists():
            out.append(f"{target} (no such file)")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            out.append(f"{target} (no heading with that anchor)")
    return out


def test_the_slugs_are_githubs():
    assert slug("Beds (`--bed`): is any bed signal-limited?") == "beds---bed-is-any-bed-signal-limited"
    assert slug("A real pretrained LM on a GPU: SmolLM2-135M-Instruct on an H200 (`scripts/gpu_compare.sh`)") == \
        "a-real-pretrained-lm-on-a-gpu-smollm2-135m-instruct-on-an-h200-scriptsgpu_comparesh"


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    assert broken(page) == []
