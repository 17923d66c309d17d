#!/usr/bin/env python3
"""Checks that the sources keep their layers (docs/architecture.md).

Builds the graph of folders from the quoted includes of every .hpp/.cpp under src/ and
include/deviceshadow/: a file of src/X/… is in folder X (src/notify/targets and src/notify/stream
are notify), one of include/deviceshadow in "include"; an include "X/…" names folder X,
"deviceshadow/…" names "include". The graph must have no cycle, and every include must follow
ALLOWED below.

Usage: scripts/check-layers.py [ROOT] [--graph | --dot]
  no option: check; exit status 1 with one line per fault, naming the file, line and include.
  --graph: print the folder graph as a text adjacency list; --dot: in Graphviz dot.
"""
import argparse
import pathlib
import re
import sys

# The folders each folder may include, besides itself. Arrows point down, so this table must be
# acyclic (checked). It holds the edges the code has today: a new one is a decision made here.
ALLOWED = {
    "shadowd": {"api", "awsiot", "console", "jobs", "live", "notify", "http", "query", "aws", "include"},  # composition root
    "api": {"http", "jobs", "live", "notify", "query", "include"},  # REST API v1
    "console": {"http", "include"},                  # the web console's files, served
    "live": {"http", "notify", "query", "include"},           # live change streams (SSE): hub, replay
    "awsiot": {"http", "notify", "aws", "include"},  # AWS IoT facade and MQTT bridge
    "cli": {"http", "aws", "include"},               # shadowctl
    "notify": {"store", "query", "aws", "include"},  # dispatcher, targets, stream consumer
    "http": {"aws", "include"},                      # transport, auth, metrics, logging
    "store": {"aws", "include"},                     # memory, SQLite, DynamoDB
    "jobs": {"query", "include"},                    # bulk jobs: the runner
    "query": {"include"},                            # fleet queries: filters, search, count
    "engine": {"include"},                           # read, merge, write, history
    "core": {"include"},                             # document core: pure functions
    "aws": {"include"},                              # SigV4, credentials, signed POST
    "include": set(),                                # include/deviceshadow: the public API
}

INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


def build_graph(root):
    """{(from, to): [(file, line, include), …]} over every quoted include, and the faults found."""
    edges, faults = {}, []
    files = sorted(root.glob("src/**/*.[ch]pp")) + sorted(root.glob("include/deviceshadow/**/*.hpp"))
    for path in files:
        rel = path.relative_to(root)
        src = "include" if rel.parts[0] == "include" else rel.parts[1]
        if src not in ALLOWED:
            faults.append(f"{rel}: folder '{src}' is not in the layer table (ALLOWED in scripts/check-layers.py)")
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if m := INCLUDE.match(line):
                first = m.group(1).split("/")[0] if "/" in m.group(1) else src
                dst = "include" if first == "deviceshadow" else first
                edges.setdefault((src, dst), []).append((rel, number, m.group(1)))
    return edges, faults


def find_cycle(graph):
    """A cycle of `graph` ({node: set of nodes}) as a list of nodes, first == last; or None."""
    done, path = set(), []

    def visit(node):
        if node in path:
            return path[path.index(node):] + [node]
        if node in done:
            return None
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt != node and (cycle := visit(nxt)):
                return cycle
        path.pop()
        done.add(node)
        return None

    return next((cycle for cycle in map(visit, sorted(graph)) if cycle), None)


def print_graph(graph, edges, dot):
    level = {}  # 0: includes no other folder; else one above the highest it includes

    def layer(f):
        if f not in level:
            level[f] = 0  # provisional: ends the recursion on a cycle
            level[f] = 1 + max((layer(d) for d in graph[f]), default=-1)
        return level[f]

    order = sorted(graph, key=lambda f: (-layer(f), f))
    if dot:
        print("digraph layers {\n  node [shape=box];")
        for a in order:
            for b in sorted(graph[a]):
                print(f'  "{a}" -> "{b}" [label="{len(edges[(a, b)])}"];')
        print("}")
        return
    print("# folder -> the folders it includes (how many #include lines)")
    for a in order:
        print(f"{a:8} -> " + (", ".join(f"{b} ({len(edges[(a, b)])})" for b in sorted(graph[a])) or "(nothing)"))
    if cycle := find_cycle(graph):
        print("# CYCLE: " + " -> ".join(cycle))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("root", nargs="?", type=pathlib.Path, default=pathlib.Path(__file__).resolve().parent.parent)
    parser.add_argument("--graph", action="store_true", help="print the folder graph as an adjacency list")
    parser.add_argument("--dot", action="store_true", help="print the folder graph in Graphviz dot")
    args = parser.parse_args()
    if not (args.root / "src").is_dir():
        parser.error(f"{args.root} has no src/ folder")
    if cycle := find_cycle(ALLOWED):
        print("check-layers.py: the layer table ALLOWED has a cycle: " + " -> ".join(cycle))
        return 1
    edges, faults = build_graph(args.root.resolve())
    graph = {f: set() for pair in edges for f in pair}
    for a, b in edges:
        if a != b:
            graph[a].add(b)
    if args.graph or args.dot:
        print_graph(graph, edges, args.dot)
        return 0

    if cycle := find_cycle(graph):
        faults.append("cycle between folders: " + " -> ".join(cycle))
        for a, b in zip(cycle, cycle[1:]):
            path, number, name = edges[(a, b)][0]
            faults.append(f'  {a} -> {b}: {path}:{number}: #include "{name}"')
    for (a, b), uses in sorted(edges.items()):
        if a != b and b not in ALLOWED.get(a, ()):
            why = f"{a} -> {b} is not allowed" if b in ALLOWED else f"'{b}' is no folder of src/"
            faults += [f'{path}:{number}: #include "{name}": {why} (ALLOWED["{a}"] in scripts/check-layers.py)'
                       for path, number, name in uses]
    print("\n".join(faults or [f"layers: ok ({len(graph)} folders, no cycle, every include allowed)"]))
    if faults:
        print(f"{sum(not f.startswith(' ') for f in faults)} fault(s); the layers: docs/architecture.md")
    return 1 if faults else 0


if __name__ == "__main__":
    sys.exit(main())
