#!/usr/bin/env python3
"""Build step: turns the web console's files (console/) into a C++ source file holding each one
with its content type and an ETag (a hash of its bytes), for shadowd to serve under /console/.

Usage: embed-console.py OUT.cpp FILE...   (each FILE is served as /console/<its name>)
"""
import hashlib
import pathlib
import sys

# The types a console file may have; any other extension fails the build rather than being
# served with a guessed type (browsers refuse scripts and styles with the wrong one).
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}


def literal(text, delimiter):
    # Pieces of at most 8000 characters: compilers need only support string literals up to
    # 64 KiB, and adjacent literals count as one.
    parts = [text[i:i + 8000] for i in range(0, len(text), 8000)] or [""]
    return "\n".join(f"        R\"{delimiter}({part}){delimiter}\"" for part in parts)


def main(out, files):
    entries = []
    for name in files:
        path = pathlib.Path(name)
        if path.suffix not in CONTENT_TYPES:
            sys.exit(f"{path}: no content type known for '{path.suffix}' (scripts/embed-console.py)")
        data = path.read_bytes()
        text = data.decode("utf-8")
        delimiter = "console"
        while f"){delimiter}\"" in text:
            delimiter += "_"
        etag = '"' + hashlib.sha256(data).hexdigest()[:20] + '"'
        entries.append(f"    {{\"{path.name}\", \"{CONTENT_TYPES[path.suffix]}\", R\"({etag})\",\n{literal(text, delimiter)}}},\n")
    with open(out, "w", encoding="utf-8") as f:
        f.write("// Generated from console/ by scripts/embed-console.py; do not edit.\n"
                "#include \"console/console.hpp\"\n\n"
                "namespace deviceshadow::console {\n\n"
                "namespace {\n"
                "constexpr Asset kAssets[] = {\n"
                f"{''.join(entries)}"
                "};\n"
                "}  // namespace\n\n"
                "std::span<const Asset> assets() noexcept { return kAssets; }\n\n"
                "}  // namespace deviceshadow::console\n")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2:])
