#!/usr/bin/env python3
"""Fails when the core's folders depend on each other in a cycle.

A folder of Sources/FlowPilotCore depends on another when one of its files
names a type declared at the top level of a file in the other (struct, class,
enum, protocol, actor, typealias; nested types and extensions are their
declaring file's), or calls a free function declared at the top level there
(`writeAll(`). The folders must form a graph without cycles, so each can be
read, tested and moved knowing only those below it (CONTRIBUTING.md,
"Layout"). Prints each cycle's edges, with a name that makes each, and exits 1.

    Scripts/folder-cycles.py [Sources/FlowPilotCore]
"""
import collections
import pathlib
import re
import sys

DECLARATION = re.compile(
    r"^(?:@\w+(?:\([^)]*\))?\s+)*(?:(?:public|internal|package|private|fileprivate|final|indirect|nonisolated)\s+)*"
    r"(?:struct|class|enum|protocol|actor|typealias)\s+([A-Z]\w*)",
    re.M)
# A free function: `func` at the start of a line (members are indented).
FUNCTION = re.compile(
    r"^(?:@\w+(?:\([^)]*\))?\s+)*(?:(?:public|internal|package|private|fileprivate)\s+)*func\s+([a-zA-Z_]\w*)",
    re.M)


def graph(root: pathlib.Path):
    owner: dict[str, str] = {}
    functions: dict[str, str] = {}
    texts: list[tuple[str, str]] = []
    for path in sorted(root.rglob("*.swift")):
        parts = path.relative_to(root).parts
        folder = parts[0] if len(parts) > 1 else "."
        text = path.read_text(encoding="utf-8")
        # Comments and string literals name types without depending on them.
        code = re.sub(r'"(?:[^"\\\n]|\\.)*"', '""', re.sub(r"//[^\n]*", "", text))
        texts.append((folder, code))
        for match in DECLARATION.finditer(text):
            owner.setdefault(match.group(1), folder)
        for match in FUNCTION.finditer(text):
            functions.setdefault(match.group(1), folder)
    # A type is named anywhere; a free function where it is called.
    names = re.compile(
        r"\b(" + "|".join(sorted(owner, key=len, reverse=True)) + r")\b"
        + (r"|\b(" + "|".join(sorted(functions, key=len, reverse=True)) + r")\(" if functions else ""))
    edges: dict[str, dict[str, str]] = collections.defaultdict(dict)
    for folder, code in texts:
        for match in names.finditer(code):
            other = owner[match.group(1)] if match.group(1) else functions[match.group(2)]
            if other != folder and other != ".":
                edges[folder].setdefault(other, match.group(1) or match.group(2) + "()")
    return edges


def cycles(edges) -> list[list[str]]:
    """Each strongly connected component of more than one folder (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(set(edges) | {w for ws in edges.values() for w in ws}):
        if v not in index:
            visit(v)
    return found


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "Sources/FlowPilotCore")
    edges = graph(root)
    bad = cycles(edges)
    for component in bad:
        print("folders in a cycle: " + ", ".join(component), file=sys.stderr)
        for a in component:
            for b, name in sorted(edges[a].items()):
                if b in component:
                    print(f"  {a} -> {b} ({name})", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
