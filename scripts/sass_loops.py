#!/usr/bin/env python3
"""Summarises the loops of nvdisasm output, kernel by kernel: what one trip through each loop
issues, per warp. Reads SASS as `nvdisasm -c` prints it (scripts/sass.sh makes it).

    python3 scripts/sass_loops.py FILE.sass [--kernel SUBSTRING] [--min 100] [--json]

A loop is the span from a label to a branch back to it. For each loop of at least --min
instructions it prints the instruction count, the count of each opcode, and what usually costs a
tensor-core kernel its speed where no profiler is at hand:

- branches inside the loop (and how many of them skip an MUFU, i.e. a transcendental the
  compiler put under a condition, which also keeps it from overlapping its neighbours),
- local-memory loads and stores (register spills) inside the loop,
- instructions per wgmma (HGMMA): what the CUDA cores issue for each tensor-core instruction.

The counts are static: a loop's every instruction once, whether or not a branch skips it. No GPU
is needed; nothing here says how long an instruction takes.
"""
import argparse
import collections
import json
import re
import subprocess
import sys

_FUNC = re.compile(r"^\s+\.type\s+(\S+),@function", re.M)
_INSTR = re.compile(r"^\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
_LABEL = re.compile(r"^(\.L_x_\d+):")
_BRANCH = re.compile(r"\bBRA\b[^`]*`\((\.L_x_\d+)\)")
_PRED = re.compile(r"^@!?U?P[T0-9]+\s+")


def opcode(text):
    """The instruction's opcode without predicate or modifiers: '@P0 LDS.64 R2, [R3]' -> 'LDS'."""
    return _PRED.sub("", text).split()[0].split(".")[0]


def demangle(names):
    try:
        out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True,
                             check=True).stdout.splitlines()
        return out if len(out) == len(names) else names
    except (OSError, subprocess.CalledProcessError):
        return names


def parse(text):
    """[(mangled name, [(address, instruction text)], {label: instruction index})] per function."""
    starts = [(m.start(), m.group(1)) for m in _FUNC.finditer(text)]
    functions = []
    for k, (start, name) in enumerate(starts):
        end = starts[k + 1][0] if k + 1 < len(starts) else len(text)
        instrs, labels = [], {}
        for line in text[start:end].splitlines():
            lm = _LABEL.match(line)
            if lm:
                labels[lm.group(1)] = len(instrs)
                continue
            im = _INSTR.match(line)
            if im:
                instrs.append((int(im.group(1), 16), im.group(2)))
        functions.append((name, instrs, labels))
    return functions


def loops(instrs, labels):
    """(first, last) instruction index of every loop: a branch back to a label at or before it.
    Nested loops are listed each; the outermost span per back-branch target is kept once."""
    found = {}
    for i, (_, text) in enumerate(instrs):
        m = _BRANCH.search(text)
        if m and m.group(1) in labels and labels[m.group(1)] <= i:
            first = labels[m.group(1)]
            found[first] = max(found.get(first, i), i)
    return sorted(found.items())


def trip_lengths(instrs, first, last, labels):
    """Fewest and most instructions on a path from the loop's head to its branch back, over the
    loop's forward branches (inner loops' branches back are taken as not taken). A tile-level
    `if` (masked and unmasked forms, say) shows as the two ends of this range."""
    inside = {lab: idx for lab, idx in labels.items() if first <= idx <= last}
    INF = float("inf")
    best = {first: (0, 0)}  # instruction index -> (fewest, most) instructions before it
    for i in range(first, last + 1):
        if i not in best:
            continue
        lo, hi = best[i]
        lo, hi = lo + 1, hi + 1
        if i == last:
            return lo, hi
        text = instrs[i][1]
        succ = []
        m = _BRANCH.search(text)
        conditional = text.startswith("@") and not text.startswith("@PT ")
        if m and inside.get(m.group(1), -1) > i:
            succ.append(inside[m.group(1)])
        if not m or conditional or inside.get(m.group(1), -1) <= i:
            if not (m and not conditional and m.group(1) not in inside) and \
                    opcode(text) not in ("EXIT", "RET"):
                succ.append(i + 1)
        for j in succ:
            old = best.get(j, (INF, -INF))
            best[j] = (min(old[0], lo), max(old[1], hi))
    return None, None


def summarise(instrs, first, last, labels):
    body = instrs[first:last + 1]
    ops = collections.Counter(opcode(t) for _, t in body)
    # Forward branches inside the loop whose skipped span holds an MUFU: a transcendental under
    # a condition.
    inside = {lab: idx for lab, idx in labels.items() if first <= idx <= last + 1}
    mufu_under_branch = 0
    branches = 0
    for i in range(first, last + 1):
        m = _BRANCH.search(instrs[i][1])
        if not m:
            continue
        branches += 1
        target = inside.get(m.group(1))
        if target is not None and target > i:
            mufu_under_branch += sum(1 for _, t in instrs[i + 1:target] if opcode(t) == "MUFU")
    hgmma = ops.get("HGMMA", 0)
    shortest, longest = trip_lengths(instrs, first, last, labels)
    return {
        "shortest_trip": shortest, "longest_trip": longest,
        "first_address": body[0][0], "instructions": len(body), "branches": branches,
        "mufu": ops.get("MUFU", 0), "mufu_under_branch": mufu_under_branch,
        "spill_loads": ops.get("LDL", 0), "spill_stores": ops.get("STL", 0), "hgmma": hgmma,
        "per_hgmma": round((len(body) - hgmma) / hgmma, 1) if hgmma else None,
        "opcodes": dict(ops.most_common()),
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sass", help="nvdisasm -c output ('-' for stdin)")
    ap.add_argument("--kernel", default="", help="only kernels whose demangled name has this")
    ap.add_argument("--min", type=int, default=100, help="smallest loop to list (instructions)")
    ap.add_argument("--json", action="store_true", help="print JSON instead of text")
    args = ap.parse_args(argv)
    text = sys.stdin.read() if args.sass == "-" else open(args.sass, encoding="utf-8").read()
    functions = parse(text)
    if not functions:
        sys.exit(f"sass_loops.py: {args.sass}: no '.type NAME,@function' in it; "
                 "expected the output of nvdisasm -c")
    names = demangle([f[0] for f in functions])
    report = []
    for (mangled, instrs, labels), name in zip(functions, names):
        if args.kernel not in name:
            continue
        found = [summarise(instrs, a, b, labels) for a, b in loops(instrs, labels)
                 if b - a + 1 >= args.min]
        report.append({"kernel": name, "mangled": mangled, "instructions": len(instrs),
                       "loops": found})
    if not report:
        sys.exit(f"sass_loops.py: no kernel matches --kernel '{args.kernel}'")
    if args.json:
        json.dump(report, sys.stdout, indent=1)
        print()
        return
    for k in report:
        print(f"{k['kernel']}: {k['instructions']} instructions")
        for lp in k["loops"]:
            top = ", ".join(f"{op} {n}" for op, n in list(lp["opcodes"].items())[:12])
            per = f", {lp['per_hgmma']} per HGMMA" if lp["hgmma"] else ""
            print(f"  loop at {lp['first_address']:#06x}: {lp['instructions']} instructions"
                  f" ({lp['shortest_trip']} to {lp['longest_trip']} per trip)"
                  f"{per}; {lp['branches']} branches, MUFU {lp['mufu']} "
                  f"({lp['mufu_under_branch']} under a branch), spills {lp['spill_loads']} "
                  f"LDL / {lp['spill_stores']} STL")
            print(f"    {top}")


if __name__ == "__main__":
    main()
