"""Checks /metrics as Prometheus reads it: its own parser (python3-prometheus-client, which
scripts/setup.sh installs from Debian), then the rules of the text format 0.0.4 that parser
lets pass."""
import math
import re
import sys

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:  # Debian's package, beside an interpreter of another origin
    sys.path.append("/usr/lib/python3/dist-packages")
    from prometheus_client.parser import text_string_to_metric_families

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*",?)*\})? (\S+)$')
SUFFIXES = {"histogram": ("_bucket", "_sum", "_count"), "counter": ("",), "gauge": ("",)}


def problems(text):
    """What is wrong with an exposition, as a list of sentences (empty: nothing)."""
    found = []
    try:
        families = list(text_string_to_metric_families(text))
    except Exception as e:  # noqa: BLE001 - any refusal of Prometheus's parser is the finding
        return [f"Prometheus's parser refuses it: {e}"]
    if not families:
        found.append("no metric at all")
    declared, types, series = set(), {}, set()
    current = None
    for line in text.splitlines():
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            kind, name = line.split(" ", 3)[1:3]
            if name != current and name in declared:
                found.append(f"{name} is declared in two places")
            declared.add(name)
            current = name
            if kind == "TYPE":
                if name in types:
                    found.append(f"{name} has two TYPE lines")
                types[name] = line.split(" ", 3)[3]
            continue
        m = SAMPLE.match(line)
        if not m:
            found.append(f"not a sample line: {line[:120]!r}")
            continue
        name, labels, value = m.group(1), m.group(2) or "", m.group(3)
        family = next((f for f in (current,) if f and any(name == f + s for s in SUFFIXES.get(types.get(f), ("",)))), None)
        if family is None:
            found.append(f"{name} comes without its HELP and TYPE before it")
        if (name, labels) in series:
            found.append(f"{name}{labels} is given twice")
        series.add((name, labels))
        if types.get(current) == "counter" and not name.endswith("_total"):
            found.append(f"the counter {name} does not end in _total")
        try:
            v = float(value)
            if math.isnan(v):
                found.append(f"{name}{labels} is NaN")
        except ValueError:
            found.append(f"{name}{labels} has the value {value!r}")
    for family in families:
        if family.type != "histogram":
            continue
        by_series = {}
        for s in family.samples:
            key = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
            by_series.setdefault(key, {"buckets": [], "count": None})
            if s.name.endswith("_bucket"):
                by_series[key]["buckets"].append((float(s.labels["le"]), s.value))
            elif s.name.endswith("_count"):
                by_series[key]["count"] = s.value
        for key, h in by_series.items():
            counts = [c for _, c in sorted(h["buckets"])]
            if counts != sorted(counts):
                found.append(f"{family.name}{dict(key)}: buckets are not cumulative")
            if not h["buckets"] or sorted(h["buckets"])[-1][0] != math.inf or counts[-1] != h["count"]:
                found.append(f"{family.name}{dict(key)}: the +Inf bucket is not the count")
    return found
