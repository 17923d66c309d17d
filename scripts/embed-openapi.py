#!/usr/bin/env python3
"""Build step: turns docs/openapi.yaml into a C++ source file that holds it as compact JSON, for
shadowd to serve at GET /v1/openapi.json.

Usage: embed-openapi.py docs/openapi.yaml OUT.cpp
"""
import json
import sys

import yaml


def main(source, out):
    with open(source, encoding="utf-8") as f:
        document = yaml.safe_load(f)
    # YAML reads unquoted dates and times as datetime objects; JSON has none of those.
    try:
        text = json.dumps(document, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as e:
        sys.exit(f"{source}: not expressible as JSON ({e}); quote dates and times")
    # Pieces of at most 8000 characters (32000 bytes): compilers need only support string
    # literals up to 64 KiB, and adjacent literals count as one.
    parts = [text[i:i + 8000] for i in range(0, len(text), 8000)]
    delimiter = "openapi"
    while any(f"){delimiter}\"" in part for part in parts):
        delimiter += "_"
    literals = "".join(f"    R\"{delimiter}({part}){delimiter}\",\n" for part in parts)
    with open(out, "w", encoding="utf-8") as f:
        f.write("// Generated from docs/openapi.yaml by scripts/embed-openapi.py; do not edit.\n"
                "#include \"api/openapi.hpp\"\n\n"
                "#include <string>\n\n"
                "namespace deviceshadow::api {\n"
                "namespace {\n\n"
                "constexpr std::string_view kParts[] = {\n"
                f"{literals}"
                "};\n\n"
                "}  // namespace\n\n"
                "std::string_view openapi_json() noexcept {\n"
                "  static const std::string json = [] {\n"
                "    std::string s;\n"
                "    for (std::string_view part : kParts) s += part;\n"
                "    return s;\n"
                "  }();\n"
                "  return json;\n"
                "}\n\n"
                "}  // namespace deviceshadow::api\n")

if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
