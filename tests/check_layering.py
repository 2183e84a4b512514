#!/usr/bin/env python3
"""Checks that folders depend on each other only in data-flow order:

    core -> ops -> autograd -> graph -> nn -> train -> bindings

A folder may use its own code and that of earlier folders (core/cuda counts as core, ops/cuda as
ops, graph/cuda as graph). Two levels:

- includes: every `#include` of a project header;
- symbols (with --objects, the library's object files): no object uses a symbol that an object
  of a later folder defines (so core links alone, ops with core alone, ...), and no folder
  defines a member of a class that another folder's header declares (each layer defines what
  it declares: a method declared in core/ and defined in ops/ is an error even where nothing in
  core calls it).

Prints every violation and exits 1 if there is one; prints the dependencies between folders
otherwise.
"""

import argparse
import pathlib
import re
import subprocess
import sys

ORDER = ["core", "ops", "autograd", "graph", "nn", "train", "bindings"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
# A class or struct definition (not a forward declaration), or a namespace, or a brace.
SCOPE = re.compile(r"\b(?:(namespace)\s+([\w:]+)\s*\{|(class|struct)\s+(\w+)\b[^;{()]*\{)|([{}])")
# A demangled function: its qualified scope and its name.
MEMBER = re.compile(r"^((?:\w+::)+)(~?\w+|operator[^(]*)\(")


def folder(path: str) -> str | None:
    top = path.split("/", 1)[0]
    return top if top in ORDER else None


def sources(root: pathlib.Path):
    for src in sorted(root.glob("*/**/*")):
        if src.suffix in {".h", ".cpp", ".cu", ".cuh"} and src.is_file():
            rel = src.relative_to(root).as_posix()
            if folder(rel):
                yield rel, src


def check_includes(root: pathlib.Path, edges: dict, wrong: list) -> None:
    for rel, src in sources(root):
        here = folder(rel)
        for target in INCLUDE.findall(src.read_text(errors="replace")):
            there = folder(target)
            if there is None or there == here:
                continue
            edges[(here, there)] = edges.get((here, there), 0) + 1
            if ORDER.index(there) > ORDER.index(here):
                wrong.append(f"{rel}: includes {target} ({here} must not depend on {there})")


def strip_comments(text: str) -> str:
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r'"(?:\\.|[^"\\])*"', '""', text)


def declared_classes(root: pathlib.Path) -> dict[str, str]:
    """Qualified name ("encore::graph::Tracer") -> the folder whose header defines the class."""
    classes = {}
    for rel, src in sources(root):
        if not rel.endswith((".h", ".cuh")):
            continue
        scopes: list[list[str]] = []  # per open brace: the names it opened (none for a body)
        text = strip_comments(src.read_text(errors="replace"))
        pos = 0
        while m := SCOPE.search(text, pos):
            pos = m.end()
            if m.group(3) and text[: m.start()].rstrip()[-1:] in ("<", ","):
                pos = m.end(4)  # a template parameter ("template <class T> struct S {")
                continue
            if m.group(1):
                scopes.append(m.group(2).split("::"))
            elif m.group(3):
                name = "::".join([n for names in scopes for n in names] + [m.group(4)])
                classes.setdefault(name, folder(rel))
                scopes.append([m.group(4)])
            elif m.group(5) == "{":
                scopes.append([])
            elif scopes:
                scopes.pop()
    return classes


def object_folder(path: str) -> str | None:
    parts = pathlib.PurePath(path).parts
    for i, p in enumerate(parts):
        if p.endswith(".dir") and i + 1 < len(parts) and parts[i + 1] in ORDER:
            return parts[i + 1]
    return None


def nm(objects: list[str]) -> list[tuple[str, str, str]]:
    """(object, kind, demangled symbol) for every symbol of every object, in one nm call."""
    out = subprocess.run(["nm", "-A", "-C", *objects], capture_output=True, text=True, check=True).stdout
    symbols = []
    for line in out.splitlines():
        m = re.match(r"^(.*?\.o):\s*(?:[0-9a-f]+\s+)?([A-Za-z])\s+(.*)$", line)
        if m:
            symbols.append((m.group(1), m.group(2), m.group(3)))
    return symbols


def check_symbols(root: pathlib.Path, objects: list[str], edges: dict, wrong: list) -> None:
    defined: dict[str, tuple[str, str]] = {}  # strong symbol -> (folder, object)
    used: list[tuple[str, str, str]] = []
    classes = declared_classes(root)
    for obj, kind, symbol in nm([o for o in objects if object_folder(o)]):
        here = object_folder(obj)
        name = pathlib.PurePath(obj).name
        if kind in "TDBR":
            defined.setdefault(symbol, (here, name))
            m = MEMBER.match(symbol)
            declared = classes.get(m.group(1)[:-2]) if m else None
            if declared and declared != here:
                wrong.append(f"{here}/{name}: defines {symbol}, a member of a class {declared}/ declares "
                             f"(each layer defines what it declares)")
        elif kind == "U":
            used.append((here, name, symbol))
    for here, name, symbol in used:
        there = defined.get(symbol, (None, None))[0]
        if there is None or there == here:
            continue
        edges[(here, there)] = edges.get((here, there), 0) + 1
        if ORDER.index(there) > ORDER.index(here):
            wrong.append(f"{here}/{name}: uses {symbol}, defined in {there}/{defined[symbol][1]} "
                         f"({here} must not depend on {there})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", nargs="*", default=[], help="the library's object files (symbol check)")
    args = parser.parse_args()
    root = pathlib.Path(__file__).resolve().parent.parent
    include_edges: dict[tuple[str, str], int] = {}
    symbol_edges: dict[tuple[str, str], int] = {}
    wrong: list[str] = []
    check_includes(root, include_edges, wrong)
    if args.objects:
        check_symbols(root, args.objects, symbol_edges, wrong)
    if wrong:
        print("dependencies against the data flow core -> ops -> autograd -> graph -> nn -> train -> bindings:")
        print("\n".join("  " + w for w in wrong))
        return 1
    for title, edges in (("includes", include_edges), ("symbols", symbol_edges)):
        if not edges:
            continue
        print(f"folder dependencies ({title}):")
        for (a, b), n in sorted(edges.items(), key=lambda e: (ORDER.index(e[0][0]), ORDER.index(e[0][1]))):
            print(f"  {a} -> {b}: {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
