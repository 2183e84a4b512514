#!/usr/bin/env python3
"""Checks that folders include each other only in data-flow order:

    core -> ops -> autograd -> graph -> nn -> train -> bindings

A folder may include its own files and those of earlier folders (core/cuda counts as core,
ops/cuda as ops, graph/cuda as graph). Prints every include that runs against the order and
exits 1 if there is one; prints the include graph between folders otherwise.
"""

import pathlib
import re
import sys

ORDER = ["core", "ops", "autograd", "graph", "nn", "train", "bindings"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def folder(path: str) -> str | None:
    top = path.split("/", 1)[0]
    return top if top in ORDER else None


def main() -> int:
    root = pathlib.Path(__file__).resolve().parent.parent
    edges: dict[tuple[str, str], int] = {}
    wrong = []
    for src in sorted(root.glob("*/**/*")):
        if src.suffix not in {".h", ".cpp", ".cu", ".cuh"} or not src.is_file():
            continue
        rel = src.relative_to(root).as_posix()
        here = folder(rel)
        if here is None:
            continue
        for target in INCLUDE.findall(src.read_text(errors="replace")):
            there = folder(target)
            if there is None or there == here:
                continue
            edges[(here, there)] = edges.get((here, there), 0) + 1
            if ORDER.index(there) > ORDER.index(here):
                wrong.append(f"{rel}: includes {target} ({here} must not depend on {there})")
    if wrong:
        print("includes against the data flow core -> ops -> autograd -> graph -> nn -> train -> bindings:")
        print("\n".join("  " + w for w in wrong))
        return 1
    print("folder dependencies (includes):")
    for (a, b), n in sorted(edges.items(), key=lambda e: (ORDER.index(e[0][0]), ORDER.index(e[0][1]))):
        print(f"  {a} -> {b}: {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
