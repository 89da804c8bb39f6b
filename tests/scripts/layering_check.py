#!/usr/bin/env python3
"""Dependencies go one way: app -> strategies -> engine -> profiling, and inside app
cli -> (gui, perf) -> analysis. Reads every #include "..." of our sources and fails on any that
points up a layer, and on a strategy's name compared outside strategies/ (the rest of the program
asks the strategy; it never compares its name).

Usage: layering_check.py SOURCE_DIR   (exit 0 when clean, 1 with one line per offence)"""
import os
import re
import sys

# Lower number = lower layer. A file may include its own layer or any lower one.
LAYERS = [
    ("profiling/", 0),
    ("engine/", 1),
    ("strategies/", 2),
    ("app/analysis/", 3),
    ("app/gui/", 4),
    ("app/perf/", 4),
    ("app/cli/", 5),
    ("app/main.cpp", 6),
]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
# A strategy name in a string compared with ==, or a kind/name check: the pattern that knowledge
# about a strategy has leaked out of strategies/.
NAME_COMPARE = re.compile(r'(==|!=)\s*"(single|torch_ddp|ddp_flat|ddp_bucketed|zero1|zero2|fsdp|'
                          r'tp|pp|hybrid|cp|ep)"')


def layer_of(path):
    best = None
    for prefix, level in LAYERS:
        if path.startswith(prefix) and (best is None or len(prefix) > len(best[0])):
            best = (prefix, level)
    return best


def main():
    root = sys.argv[1]
    offences = []
    sources = 0
    for top in ("profiling", "engine", "strategies", "app"):
        for folder, _, names in os.walk(os.path.join(root, top)):
            for name in names:
                if not name.endswith((".h", ".cpp")):
                    continue
                path = os.path.relpath(os.path.join(folder, name), root)
                sources += 1
                own = layer_of(path)
                text = open(os.path.join(root, path), encoding="utf-8").read()
                for target in INCLUDE.findall(text):
                    other = layer_of(target)
                    if own and other and other[1] > own[1]:
                        offences.append(f"{path}: includes {target} ({other[0]} is above {own[0]})")
                    # protoc's output lives in the build tree, its .proto in ours.
                    generated = target.endswith(".pb.h") and os.path.exists(
                        os.path.join(root, target[: -len(".pb.h")] + ".proto"))
                    if other and not generated and not os.path.exists(os.path.join(root, target)):
                        offences.append(f"{path}: includes {target}, which does not exist")
                if not path.startswith("strategies/"):
                    for match in NAME_COMPARE.finditer(text):
                        offences.append(f"{path}: compares a strategy name ({match.group(0)})")
    for line in offences:
        print(line)
    print(f"{sources} sources read, {len(offences)} offences")
    return 1 if offences or sources < 100 else 0


if __name__ == "__main__":
    sys.exit(main())
