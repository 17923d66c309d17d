#!/usr/bin/env python3
"""Checks that the documentation stands on its own in a clone of the repository.

1. Every relative link in README.md and docs/*.md ([text](path), [text](path#anchor),
   [text](#anchor)) points to a file or directory of the repository, and its anchor to a heading
   of the Markdown file it names (GitHub's anchor rules).
2. No file of the repository cites material outside it (the contract the product was built to).

Usage: scripts/check-docs.py [REPOSITORY_ROOT]; exit status 1 with one line per fault.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)
LINK = re.compile(r"(?<!!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
EXTERNAL = ("http://", "https://", "mailto:")
# Outside material a file must not cite; spelled in pieces so that this file does not match.
OUTSIDE = [re.compile(p) for p in (r"\.\./" + "shared", "SPEC" + r"\.md", r"\bSPEC" + r" ?§")]
SCANNED = ["README.md", "docs", "src", "include", "tests", "scripts", "bench", "fuzz", "CMakeLists.txt", ".ci"]


def prose_lines(text):
    """The lines of a Markdown text outside fenced code blocks, with their numbers."""
    fence = None
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.lstrip()
        marker = stripped[:3]
        if marker in ("```", "~~~"):
            if fence is None:
                fence = marker
            elif marker == fence:
                fence = None
            continue
        if fence is None:
            yield number, line


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"`|\*\*|__", "", heading).strip().lower()
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link in a heading keeps its text
    return "".join(c for c in text if c.isalnum() or c in " -_").replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        seen = {}
        found = set()
        for _, line in prose_lines(path.read_text(encoding="utf-8")):
            m = HEADING.match(line)
            if not m:
                continue
            base = slug(m.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
        cache[path] = found
    return cache[path]


def check_links(faults):
    files = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
    for md in files:
        for number, line in prose_lines(md.read_text(encoding="utf-8")):
            line = re.sub(r"`[^`]*`", "", line)  # code spans are not links
            for m in LINK.finditer(line):
                target = m.group(1)
                if target.startswith(EXTERNAL):
                    continue
                where = f"{md.relative_to(ROOT)}:{number}: {target}"
                path_part, _, anchor = target.partition("#")
                dest = (md.parent / path_part).resolve() if path_part else md
                if not dest.exists():
                    faults.append(f"{where}: no such file")
                    continue
                try:
                    dest.relative_to(ROOT.resolve())
                except ValueError:
                    faults.append(f"{where}: outside the repository")
                    continue
                if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                    faults.append(f"{where}: no heading with this anchor in {dest.relative_to(ROOT.resolve())}")


def check_outside_citations(faults):
    me = pathlib.Path(__file__).resolve()
    for name in SCANNED:
        top = ROOT / name
        paths = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file()) if top.exists() else []
        for path in paths:
            if path.resolve() == me or "__pycache__" in path.parts:
                continue
            try:
                text = path.read_text(encoding="utf-8")
            except (UnicodeDecodeError, OSError):
                continue
            for number, line in enumerate(text.splitlines(), 1):
                for pattern in OUTSIDE:
                    if pattern.search(line):
                        faults.append(f"{path.relative_to(ROOT)}:{number}: cites material outside the repository: "
                                      f"{line.strip()[:100]}")


def main():
    faults = []
    check_links(faults)
    check_outside_citations(faults)
    for fault in faults:
        print(fault)
    if faults:
        print(f"{len(faults)} fault(s)")
        return 1
    print("documentation links and citations: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
