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
    delimiter = "openapi"
    while f"){delimiter}\"" in text:
        delimiter += "_"
    with open(out, "w", encoding="utf-8") as f:
        f.write("// Generated from docs/openapi.yaml by scripts/embed-openapi.py; do not edit.\n"
                "#include \"server/openapi.hpp\"\n\n"
                "namespace deviceshadow::server {\n\n"
                "std::string_view openapi_json() noexcept {\n"
                f"  static constexpr char kJson[] = R\"{delimiter}({text}){delimiter}\";\n"
                "  return {kJson, sizeof kJson - 1};\n"
                "}\n\n"
                "}  // namespace deviceshadow::server\n")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
