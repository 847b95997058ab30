#!/usr/bin/env python3
"""Mutates hetplan's input files and checks that every command meets its error contract.

docs/cli.md: bad input is exit status 2 with a message that names the file, the key and what was
expected; never a crash, a stack trace or an internal message. This script takes real input files
(examples/, tests/data/, calibration_data/), changes one thing in each copy (a key deleted, a
value of the wrong type or out of range, a list emptied, the text cut short, bytes flipped; in
YAML files also anchors and aliases, an alias bomb, merge keys, tags, a second document or a
complex key; in YAML and JSON a very long scalar or deep nesting) and runs the command that
reads it, its address space held to --memory-limit (a command that would eat the machine fails
there instead). Each run is classed:

  ok        exit 0 (the mutation was harmless or a value still in range)
  refused   exit 1 or 2 with a message that names the input file
  unnamed   exit 1 or 2, but the message does not name the input file
  internal  the message leaks an internal error (a C++ library exception's text, json.exception,
            std::..., "terminate called", a sanitizer report)
  crash     killed by a signal, or an exit status other than 0, 1, 2
  hang      over the time limit: --timeout seconds of cpu (SIGXCPU), or four times that of wall
            time (a shared machine's load stretches the wall time of a run, not its cpu time)
  memory    ran out of the memory limit (std::bad_alloc, or killed)

Everything but ok and refused is a finding; the script prints each (the mutation, the command,
the message) and exits 1 when there is one. Deterministic for a given --seed.

  python3 scripts/fuzz_inputs.py --hetplan build/cli/hetplan [--runs 400] [--seed 1]
      [--targets strategy,model,...] [--timeout 20] [--memory-limit GIB] [--keep DIR]
      [--show-accepted] [--list]

Tested by tests/python/test_fuzz_inputs.py (12 mutations per input, fixed seed); results in
docs/benchmarks.md ("Input fuzzing").
"""

import argparse
import copy
import json
import lzma
import random
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent

# Texts that mean an error escaped without being turned into hetplan's own message.
INTERNAL = [
    re.compile(p)
    for p in (
        r"terminate called",
        r"internal error",
        r"\[json\.exception",
        r"\bstd::",
        r"basic_string",
        r"vector::_M",
        r"\bstoi\b|\bstod\b|\bstol\b",
        r"yaml-cpp:",
        r"bad_alloc|bad_optional|bad_variant|bad_any_cast",
        r"AddressSanitizer|LeakSanitizer|runtime error:",
        r"Segmentation fault|Aborted|core dumped",
        r"Assertion .* failed",
    )
]


class Target:
    """One input file and the command that reads it; `{input}`, `{dir}` (the input's folder) and
    `{tmp}` are filled in. An input read under a fixed name (`as_name`) is written as that name in
    a folder of its own, with the `beside` files copied next to it."""

    def __init__(self, name, seed, args, as_name=None, beside=(), lenient=False):
        self.name = name
        # Reads what it can by design (a journal's unreadable record becomes one of the file's
        # failures, as at the end of a calibration): most mutations are accepted.
        self.lenient = lenient
        self.seed = ROOT / seed
        self.args = args
        self.as_name = as_name
        self.beside = [ROOT / b for b in beside]
        self.kind = ("yaml" if self.seed.suffix in (".yaml", ".yml") else
                     "json" if self.seed.suffix == ".json" else
                     "jsonl" if self.seed.suffix == ".journal" else
                     "text")  # .ini, .log, .npy: bytes


STRATEGY = "examples/strategies/gpt2-medium-g4dn.json"
TARGETS = [
    Target("strategy", STRATEGY,
           ["predict", "--model", "gpt2-medium", "--cluster", "g4dn.12xlarge:4", "--strategy",
            "{input}", "--json", "{tmp}/out.json"]),
    Target("model", "examples/models/tiny-gpt.yaml",
           ["model-info", "--model", "{input}", "--work", "--micro-batch", "2", "--tp", "2",
            "--json", "{tmp}/out.json"]),
    Target("model-llama", "examples/models/tiny-llama.yaml",
           ["predict", "--model", "{input}", "--cluster", "g4dn.12xlarge:1", "--strategy",
            "{tmp}/s.json", "--no-default-calibration"]),
    Target("model-hybrid", "examples/models/tiny-hybrid.yaml",
           ["predict", "--model", "{input}", "--cluster", "g4dn.12xlarge:1", "--strategy",
            "{tmp}/s.json", "--no-default-calibration"]),
    Target("strategy-lora", "examples/strategies/llama2-7b-lora.json",
           ["predict", "--model", "llama2-7b", "--cluster", "dgx-h100:1", "--strategy",
            "{input}", "--json", "{tmp}/out.json"]),
    Target("hf-config", "tests/data/hf/tinyllama-1.1b/config.json",
           ["model-info", "--model", "{input}", "--work", "--micro-batch", "2", "--tp", "2",
            "--json", "{tmp}/out.json"]),
    Target("cluster", "examples/clusters/two-sites.yaml",
           ["search", "--model", "examples/models/tiny-gpt.yaml", "--cluster", "{input}",
            "--global-batch", "16", "--top", "1", "--quiet", "--threads", "1",
            "--no-default-calibration", "--json", "{tmp}/out.json"]),
    Target("cluster-h200", "examples/clusters/h200-node.yaml",
           ["predict", "--model", "examples/models/tiny-gpt.yaml", "--cluster", "{input}",
            "--strategy", "{tmp}/s8.json", "--no-default-calibration"]),
    Target("calibration", "tests/data/calibration/a100-sample.json",
           ["fit", "{input}", "--out", "{tmp}/profile.json", "--json", "{tmp}/q.json"]),
    Target("calibration-sdpa", "tests/data/torch_sdpa/h100_one_shape.json",
           ["import", "--format", "torch-sdpa", "{input}", "--out", "{tmp}/c.json"]),
    Target("kernel-bench", "tests/data/kernel_bench/h100_subset.json",
           ["import", "--format", "kernel-bench", "{input}", "--out", "{tmp}/c.json"]),
    Target("datasheet", "calibration_data/datasheet/t4.json",
           ["predict", "--model", "examples/models/tiny-gpt.yaml", "--cluster", "g4dn.12xlarge:1",
            "--strategy", "{tmp}/s.json", "--no-default-calibration", "--calibration",
            "{input}"]),
    Target("serve-cluster", "tests/data/serve_cluster.yaml",
           ["serve", "--model", "examples/models/tiny-gpt.yaml", "--cluster", "{input}",
            "--prompt-tokens", "16", "--output-tokens", "8", "--time-limit", "2", "--threads",
            "1", "--quiet", "--no-default-calibration",
            "--json", "{tmp}/out.json"]),
    Target("helix-ini", "examples/external/helix/clusters/single24.ini",
           ["serve", "--model", "examples/models/tiny-gpt.yaml", "--cluster", "{input}",
            "--prompt-tokens", "16", "--output-tokens", "8", "--time-limit", "0.5", "--evaluations",
            "200", "--no-milp", "--threads", "1", "--quiet", "--no-default-calibration"]),
    Target("helix-machines", "examples/external/helix/clusters/machine_profiles.ini",
           ["serve", "--model", "examples/models/tiny-gpt.yaml", "--cluster", "{dir}/single24.ini",
            "--prompt-tokens", "16", "--output-tokens", "8", "--time-limit", "0.5", "--evaluations",
            "200", "--no-milp", "--threads", "1", "--quiet", "--no-default-calibration"],
           as_name="machine_profiles.ini",
           beside=["examples/external/helix/clusters/single24.ini"]),
    # A placement (Helix's ILP solution) evaluated on Helix's 24-machine cluster and profiles.
    Target("helix-placement",
           "examples/external/helix/layouts/single_cluster-llama70b/ilp/ilp_sol.ini",
           ["serve", "--model", "llama2-70b", "--cluster",
            "examples/external/helix/clusters/cluster24.ini", "--profiles",
            "examples/external/helix/profiles/llama2_70b", "--placement", "{input}",
            "--no-simulation", "--quiet", "--no-default-calibration"]),
    # hetplan's own placement: what `serve --json` wrote (prepare()), given back to serve.
    Target("serve-placement", "{tmp}/placement.json",
           ["serve", "--model", "examples/models/tiny-gpt.yaml", "--cluster",
            "examples/external/helix/clusters/single24.ini", "--placement", "{input}",
            "--prompt-tokens", "16", "--output-tokens", "8", "--no-simulation", "--quiet",
            "--no-default-calibration"]),
    # Helix's per-GPU tables: the folder's name is the GPU type, the decode table beside.
    Target("helix-profile", "examples/external/helix/profiles/llama2_70b/a100/prompt_bs2time.csv",
           ["import", "--format", "helix", "{dir}/a100", "--model", "llama2-70b", "--out",
            "{tmp}/c.json"],
           as_name="a100/prompt_bs2time.csv",
           beside=["examples/external/helix/profiles/llama2_70b/a100/decode_bs2time.csv"]),
    Target("profile", "{tmp}/profile.json",
           ["predict", "--model", "examples/models/tiny-gpt.yaml", "--cluster", "p4d.24xlarge:1",
            "--strategy", "{tmp}/s.json", "--no-default-calibration", "--calibration",
            "{input}"]),
    Target("calibration-measured", "calibration_data/measured/h100-sxm/"
           "attention-torch-sdpa-2026-11-22.json",
           ["fit", "{input}", "--out", "{tmp}/profile-out.json"]),
    # The shipped H100 sources, kept xz-compressed: decompressed by prepare().
    Target("collectives", "{tmp}/collectives.json",
           ["fit-collectives", "{input}", "--out", "{tmp}/coll-out.json"]),
    Target("calibration-kernels", "{tmp}/kernels.json",
           ["fit", "{input}", "--out", "{tmp}/profile-out.json"]),
    # AMP's per-layer costs: a numpy array whose name says the model, the GPU and the tp width.
    Target("amp-npy", "examples/external/amp/known_cost/gpt2_G4_2.npy",
           ["import", "--format", "amp", "{input}", "--out", "{tmp}/c.json"],
           as_name="gpt2_G4_2.npy"),
    # A calibration's journal (JSON lines), as `calibrate --from-journal` reads it without a GPU;
    # written by prepare() from the shipped H100 kernels and the A100 sample's GEMMs and collectives.
    Target("journal", "{tmp}/run.journal",
           ["calibrate", "--out", "{dir}/c.json", "--from-journal"], as_name="c.json.journal",
           lenient=True),
    Target("megatron-log", "tests/data/megatron/gpt2-medium_tp2_pp2_dp2.log",
           ["import", "--format", "megatron", "{input}", "--out", "{tmp}/m.json", "--model",
            "gpt2-medium", "--cluster", "p4d.24xlarge:1"]),
    Target("deepspeed-log", "tests/data/deepspeed/gpt2-medium_dp8_zero2.log",
           ["import", "--format", "deepspeed", "{input}", "--out", "{tmp}/m.json", "--model",
            "gpt2-medium", "--cluster", "p4d.24xlarge:1"]),
    Target("measurements", "examples/measured/h100-2026-11-23/sweep-0245Z.json",
           ["report", "--predictions", "{tmp}/predictions.json", "--measurements", "{input}",
            "--out", "{tmp}/r.html"]),
    Target("strategy-stages", "{tmp}/staged.json",
           ["predict", "--model", "gpt2-medium", "--cluster", "amp-hetero", "--strategy",
            "{input}", "--json", "{tmp}/out.json"]),
    Target("export", "{tmp}/predicted.json",
           ["export", "--strategy", "{input}", "--format", "megatron", "--out", "{tmp}/e.txt"]),
    Target("export-search", "{tmp}/search.json",
           ["export", "--strategy", "{input}", "--index", "1", "--format", "torchtitan",
            "--allow-approximate", "--out", "{tmp}/e.toml"]),
]

# Strategies the targets above need beside their input (one GPU; eight GPUs), and one with its
# stages given: GPT-2 medium on AMP's cluster (3 x 4 V100, then 4 T4), pipeline rank 0 on the T4s.
ONE_GPU = {"dp": 1, "tp": 1, "pp": 1, "micro_batch": 2, "global_batch": 8}
EIGHT_GPUS = {"dp": 2, "tp": 2, "pp": 2, "micro_batch": 2, "global_batch": 16}
STAGED = {"dp": 2, "tp": 2, "pp": 4, "micro_batch": 1, "global_batch": 32, "zero": 1, "stages": [
    {"layers": [0, 2], "gpu_type": "t4", "devices": [12, 13, 14, 15]},
    {"layers": [3, 10], "gpu_type": "v100", "devices": [0, 1, 2, 3]},
    {"layers": [11, 18], "gpu_type": "v100", "devices": [4, 5, 6, 7]},
    {"layers": [19, 25], "gpu_type": "v100", "devices": [8, 9, 10, 11]}]}


def paths(doc, prefix=()):
    """Every key path of a parsed document (dict keys and list indices), the root included."""
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:8]):  # long tables: the first rows are enough
            out += paths(v, prefix + (i,))
    return out


def get(doc, path):
    for p in path:
        doc = doc[p]
    return doc


def replacement(rng, old):
    """A value of another type, or the same type out of range."""
    choices = [None, "", "x", -1, 0, 1e308, -1e308, 2**63, 2**31, 0.5, True, [], {}, [old],
               {"k": old}]
    if isinstance(old, bool):
        choices += ["yes", 2]
    elif isinstance(old, (int, float)):
        choices += [-old, old * 1000 + 1, old + 0.5, str(old), float("nan"), float("inf")]
    elif isinstance(old, str):
        choices += [old + "x", old.upper(), old * 40, 7, "../" + old]
    elif isinstance(old, list) and old:
        choices += [old[:1], old + old[-1:], list(reversed(old)), old[1:]]
    return rng.choice(choices)


def mutate_doc(rng, doc):
    """One change to a parsed document; returns (document, description)."""
    doc = copy.deepcopy(doc)
    candidates = [p for p in paths(doc) if p]
    if not candidates:
        return None, "nothing to mutate"
    path = rng.choice(candidates)
    parent = get(doc, path[:-1])
    key = path[-1]
    where = "/".join(str(p) for p in path)
    if rng.random() < 0.25:
        if isinstance(parent, dict):
            del parent[key]
        else:
            parent.pop(key)
        return doc, f"delete {where}"
    if isinstance(parent, dict) and rng.random() < 0.1:
        parent[str(key) + "_typo"] = parent.pop(key)
        return doc, f"rename {where} -> {key}_typo"
    new = replacement(rng, parent[key])
    parent[key] = new
    shown = json.dumps(new, allow_nan=True)
    return doc, f"set {where} = {shown[:60]}"


def mutate_text(rng, text):
    """A byte-level change: cut short, a line dropped or repeated, digits changed, bytes flipped."""
    lines = text.splitlines(keepends=True)
    op = rng.randrange(6)
    if op == 0:
        cut = rng.randrange(len(text)) if text else 0
        return text[:cut], f"cut at byte {cut}"
    if op == 1 and lines:
        i = rng.randrange(len(lines))
        return "".join(lines[:i] + lines[i + 1:]), f"drop line {i + 1}"
    if op == 2 and lines:
        i = rng.randrange(len(lines))
        return "".join(lines[:i + 1] + lines[i:]), f"repeat line {i + 1}"
    if op == 3:
        digits = [m.start() for m in re.finditer(r"\d", text)]
        if digits:
            i = rng.choice(digits)
            new = rng.choice(["-", "9999999999999999999999", "0", "nan", "1e400", "x"])
            return text[:i] + new + text[i + 1:], f"digit at byte {i} -> {new}"
    if op == 4 and text:
        i = rng.randrange(len(text))
        return text[:i] + "\x00\xff" + text[i:], f"binary bytes at byte {i}"
    return "", "empty file"


def mutate_line(rng, text):
    """One change to one record of a JSON-lines file (mutate_doc on that line alone)."""
    lines = text.splitlines(keepends=True)
    i = rng.randrange(len(lines))
    doc, what = mutate_doc(rng, json.loads(lines[i]))
    if doc is None:
        return text, what
    lines[i] = json.dumps(doc, allow_nan=True) + "\n"
    return "".join(lines), f"line {i + 1}: {what}"


class Anchor:
    """A value written with an anchor: &name value."""

    def __init__(self, name, value):
        self.name, self.value = name, value


class Alias:
    """*name."""

    def __init__(self, name):
        self.name = name


class Merge:
    """A mapping written with a merge key: {<<: base, rest...} (base a mapping, an anchor or
    alias of one, or a list of them)."""

    def __init__(self, base, rest):
        self.base, self.rest = base, rest


class Tagged:
    """!tag value."""

    def __init__(self, tag, value):
        self.tag, self.value = tag, value


class Raw:
    """Text written as it is (deep nesting, built without recursion)."""

    def __init__(self, text):
        self.text = text


def emit(node):
    """A document in YAML's flow style (JSON where it holds none of the classes above)."""
    if isinstance(node, Raw):
        return node.text
    if isinstance(node, Anchor):
        return f"&{node.name} {emit(node.value)}"
    if isinstance(node, Alias):
        return f"*{node.name}"
    if isinstance(node, Tagged):
        return f"{node.tag} {emit(node.value)}"
    if isinstance(node, Merge):
        parts = [f"<<: {emit(node.base)}"] + [f"{json.dumps(str(k))}: {emit(v)}"
                                               for k, v in node.rest.items()]
        return "{" + ", ".join(parts) + "}"
    if isinstance(node, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))}: {emit(v)}" for k, v in node.items()) + "}"
    if isinstance(node, list):
        return "[" + ", ".join(emit(v) for v in node) + "]"
    return json.dumps(node, allow_nan=True)


def replace_at(doc, path, value):
    """`doc` with the value at `path` replaced (the root when `path` is empty)."""
    if not path:
        return value
    get(doc, path[:-1])[path[-1]] = value
    return doc


def deep_text(rng):
    """Lists or mappings nested 50 to 100,000 deep."""
    depth = rng.choice([50, 300, 3000, 100000])
    if rng.random() < 0.5:
        return Raw("[" * depth + "1" + "]" * depth), f"{depth} lists deep"
    return Raw('{"a": ' * depth + "1" + "}" * depth), f"{depth} mappings deep"


def long_scalar(rng, old):
    """A string, number or key of 10^5 to 10^6 characters."""
    n = rng.choice([100000, 1000000])
    if isinstance(old, (int, float)) and not isinstance(old, bool):
        return Raw("9" * n), f"a number of {n} digits"
    return "x" * n, f"a string of {n} characters"


def mutate_shared(rng, doc, kind):
    """Deep nesting or a very long scalar, in YAML or JSON; returns (text, description)."""
    doc = copy.deepcopy(doc)
    path = rng.choice(paths(doc))
    where = "/".join(str(p) for p in path) or "(top level)"
    if rng.random() < 0.5:
        value, what = deep_text(rng)
    elif path and isinstance(get(doc, path[:-1]), dict) and rng.random() < 0.2:
        parent = get(doc, path[:-1])
        parent["k" * rng.choice([100000, 1000000])] = parent.pop(path[-1])
        return emit(doc), f"rename {where} to a key of 10^5-10^6 characters"
    else:
        value, what = long_scalar(rng, get(doc, path))
    return emit(replace_at(doc, path, value)), f"set {where} = {what}"


def alias_bomb(rng):
    """A list of nested anchors, each aliasing the one before 9 times: 9^depth values."""
    depth = rng.randrange(3, 10)
    items = [Anchor("l0", ["lol"] * 9)]
    items += [Anchor(f"l{i}", [Alias(f"l{i - 1}")] * 9) for i in range(1, depth)]
    return items, f"an alias bomb of 9^{depth} values"


def mutate_yaml(rng, doc):
    """A change only YAML can express (anchors and aliases, an alias bomb, merge keys, tags, a
    second document, a complex key, an undefined or cyclic alias), or deep nesting or a long
    scalar; returns (text, description)."""
    doc = copy.deepcopy(doc)
    everywhere = [p for p in paths(doc) if p]
    if not everywhere:
        return emit(doc), "nothing to mutate"
    mappings = [p for p in paths(doc) if isinstance(get(doc, p), dict) and get(doc, p)]
    op = rng.randrange(9)
    if op == 0:  # an anchored value aliased further on (document order: paths() order)
        i = rng.randrange(len(everywhere))
        first = everywhere[i]
        later = [q for q in everywhere[i + 1:] if q[:len(first)] != first]
        if later:
            second = rng.choice(later)
            value = get(doc, first)
            doc = replace_at(doc, second, Alias("a1"))
            doc = replace_at(doc, first, Anchor("a1", value))
            return emit(doc), (f"anchor {'/'.join(map(str, first))}, alias it at "
                               f"{'/'.join(map(str, second))}")
    if op == 1:
        path = rng.choice(everywhere)
        bomb, what = alias_bomb(rng)
        return emit(replace_at(doc, path, bomb)), f"set {'/'.join(map(str, path))} = {what}"
    if op in (2, 3) and mappings:  # merge keys: the mapping the same, or a key overridden
        path = rng.choice(mappings)
        m = get(doc, path)
        keys = list(m)
        rng.shuffle(keys)
        cut = rng.randrange(1, len(keys) + 1)
        base = {k: m[k] for k in keys[:cut]}
        rest = {k: m[k] for k in keys[cut:]}
        what = "merged from an anchored mapping"
        if op == 3:  # the base's value of a key the mapping sets itself loses
            k = rng.choice(keys[:cut])
            rest[k] = base[k]
            base = dict(base, **{k: replacement(rng, base[k])})
            what = f"merged, its own {k} overriding the base's"
        if rng.random() < 0.3 and len(base) > 1:  # a list of mappings to merge
            k0 = next(iter(base))
            merged = [Anchor("m1", {k0: base.pop(k0)}), base]
        else:
            merged = Anchor("m1", base)
        doc = replace_at(doc, path, Merge(merged, rest))
        return emit(doc), f"{'/'.join(map(str, path)) or '(top level)'} {what}"
    if op == 4:
        path = rng.choice(everywhere)
        value = get(doc, path)
        if isinstance(value, (dict, list)):
            tag = rng.choice(["!!map", "!!seq", "!!set", "!!omap", "!custom"])
        else:
            tag = rng.choice(["!!str", "!!int", "!!float", "!!bool", "!!null", "!custom",
                              "!!binary", "!!timestamp", "!!python/object:os.system"])
        doc = replace_at(doc, path, Tagged(tag, value))
        return emit(doc), f"tag {'/'.join(map(str, path))} {tag}"
    if op == 5:
        text = emit(doc)
        return text + "\n---\n" + text + "\n", "a second document"
    if op == 6 and mappings:
        path = rng.choice(mappings)
        m = get(doc, path)
        text = emit(doc)
        inner = emit(m)
        # An explicit key that is a list, first in the mapping.
        return (text.replace(inner, "{? [1, 2] : 3, " + inner[1:], 1) if len(inner) > 2 else text,
                f"a list as a key in {'/'.join(map(str, path)) or '(top level)'}")
    if op == 7:
        path = rng.choice(everywhere)
        value = rng.choice([Alias("nowhere"), Anchor("c1", [Alias("c1")])])
        what = "an undefined alias" if isinstance(value, Alias) else "an alias inside its anchor"
        return emit(replace_at(doc, path, value)), f"set {'/'.join(map(str, path))} = {what}"
    return mutate_shared(rng, doc, "yaml")


def dump(doc, kind):
    if kind == "yaml":
        return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
    return json.dumps(doc, indent=1, allow_nan=True)


def classify(proc, input_name, timed_out):
    err = (proc.stderr if proc else "") or ""
    if timed_out or proc.returncode == -signal.SIGXCPU:
        return "hang", err
    if "bad_alloc" in err or proc.returncode == -signal.SIGKILL:
        return "memory", err
    if any(p.search(err) for p in INTERNAL):
        return "internal", err
    if proc.returncode == 0:
        return "ok", err
    if proc.returncode not in (1, 2):
        return "crash", err
    if input_name not in err:
        return "unnamed", err
    return "refused", err


def prepare(tmp, hetplan):
    """The files the targets need beside their input: strategies, predictions, a search."""
    (tmp / "s.json").write_text(json.dumps(ONE_GPU))
    (tmp / "s8.json").write_text(json.dumps(EIGHT_GPUS))
    (tmp / "staged.json").write_text(json.dumps(STAGED, indent=1))
    run = lambda args: subprocess.run([hetplan] + args, cwd=ROOT, capture_output=True,
                                      text=True, timeout=120, check=True)
    run(["predict", "--model", "gpt2-medium", "--cluster", "amp-hetero", "--strategy",
         str(tmp / "staged.json"), "--json", str(tmp / "predicted.json")])
    # Pipelines with two chunks per rank among the plans (interleaved and the V schedules).
    run(["search", "--model", "gpt2-medium", "--cluster", "p4d.24xlarge:2", "--global-batch",
         "64", "--top", "3", "--quiet", "--threads", "1", "--schedules", "interleaved", "v-min",
         "--framework", str(ROOT / "tests/data/framework_fixture.yaml"),
         "--json", str(tmp / "search.json")])
    shutil.copy(tmp / "search.json", tmp / "predictions.json")
    run(["serve", "--model", "examples/models/tiny-gpt.yaml", "--cluster",
         "examples/external/helix/clusters/single24.ini", "--prompt-tokens", "16",
         "--output-tokens", "8", "--time-limit", "0.5", "--evaluations", "200", "--no-milp",
         "--threads", "1", "--quiet", "--no-default-calibration", "--no-simulation", "--json",
         str(tmp / "serve.json")])
    # What the placement reader reads of it (the rest is derived or about the search), so that
    # the mutations land there.
    placement = json.loads((tmp / "serve.json").read_text())["placement"]
    (tmp / "placement.json").write_text(json.dumps({"placement": [
        {k: m[k] for k in ("machine", "machine_type", "layers")} for m in placement]}, indent=1))
    run(["fit", str(ROOT / "tests/data/calibration/a100-sample.json"), "--out",
         str(tmp / "profile.json")])
    for name in ("collectives-single-gpu-2026-11-22", "kernels-2026-11-22"):
        text = lzma.decompress((ROOT / "calibration_data/sources/h100-sxm" /
                                f"{name}.json.xz").read_bytes())
        (tmp / (name.split("-")[0] + ".json")).write_bytes(text)
    # Helix's topologies read the machine types beside them.
    shutil.copy(ROOT / "examples/external/helix/clusters/machine_profiles.ini", tmp)
    kernels = json.loads((tmp / "kernels.json").read_text())
    sample = json.loads((ROOT / "tests/data/calibration/a100-sample.json").read_text())
    lines = [("context/" + kernels["context"].get("date", "?") + "/1", kernels["context"])]
    lines += [(f"kernel/{k['kernel']}/{i}", k) for i, k in enumerate(kernels["kernels"][:4])]
    lines += [(f"gemm/{i}", g) for i, g in enumerate(sample["gemm"][:4])]
    lines += [(f"collective/{i}", c) for i, c in enumerate(sample["collectives"][:3])]
    lines.append(("gemm/fp8/1", {"failed": {"what": "fp8 1x1x1", "error": "not supported"}}))
    (tmp / "run.journal").write_text(
        "".join(json.dumps({"key": k, "record": r}) + "\n" for k, r in lines))


def limits(gib, cpu_s):
    """A preexec_fn that holds the child's address space to `gib` GiB and its cpu time to `cpu_s`
    seconds (then SIGXCPU)."""
    def limit():
        cap = int(gib * (1 << 30))
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        cpu = max(1, int(cpu_s + 0.5))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    return limit


def fuzz(hetplan, runs, seed, targets=None, timeout=20.0, keep=None, show_accepted=False,
         memory_gib=4.0):
    """Runs `runs` mutated inputs over `targets` (all when None) in turn. Returns the counts by
    (target name, verdict) and the findings: (target, verdict, mutation, exit status, message,
    file name)."""
    chosen = [t for t in TARGETS if not targets or t.name in targets]
    rng = random.Random(seed)
    counts, findings = {}, []
    with tempfile.TemporaryDirectory(prefix="hetplan-fuzz-") as tmpdir:
        tmp = Path(tmpdir)
        prepare(tmp, hetplan)
        for i in range(runs):
            t = chosen[i % len(chosen)]
            source = Path(str(t.seed).replace(str(ROOT / "{tmp}"), str(tmp)))
            text = source.read_text(errors="surrogateescape")
            if t.kind == "jsonl" and rng.random() < 0.85:
                body, what = mutate_line(rng, text)
            elif t.kind not in ("text", "jsonl") and rng.random() < 0.85:
                doc = yaml.safe_load(text) if t.kind == "yaml" else json.loads(text)
                # YAML's own features in a third of a YAML file's document mutations; deep
                # nesting and long scalars in a tenth of a JSON file's.
                feature = rng.random()
                if t.kind == "yaml" and feature < 0.35:
                    body, what = mutate_yaml(rng, doc)
                elif t.kind == "json" and feature < 0.1:
                    body, what = mutate_shared(rng, doc, "json")
                else:
                    doc, what = mutate_doc(rng, doc)
                    if doc is None:
                        continue
                    body = dump(doc, t.kind)
            else:
                body, what = mutate_text(rng, text)
            name = f"fuzz{i:05d}-{t.name}{source.suffix}"
            folder = tmp
            if t.as_name:  # may hold a subfolder ("a100/prompt_bs2time.csv")
                folder = tmp / f"fuzz{i:05d}"
                name = f"{folder.name}/{t.as_name}"
                (tmp / name).parent.mkdir(parents=True)
                for b in t.beside:
                    shutil.copy(b, (tmp / name).parent)
            path = tmp / name
            path.write_text(body, errors="surrogateescape")
            args = [hetplan] + [s.replace("{input}", str(path)).replace("{dir}", str(folder))
                                .replace("{tmp}", str(tmp)) for s in t.args]
            proc, timed_out = None, False
            try:
                proc = subprocess.run(args, cwd=ROOT, capture_output=True, text=True,
                                      errors="replace", timeout=4 * timeout,
                                      preexec_fn=limits(memory_gib, timeout))
            except subprocess.TimeoutExpired:
                timed_out = True
            verdict, err = classify(proc, name, timed_out)
            counts[(t.name, verdict)] = counts.get((t.name, verdict), 0) + 1
            if verdict == "ok" and show_accepted:
                print(f"[accepted] {t.name}: {what}")
            if verdict not in ("ok", "refused"):
                status = "timeout" if timed_out else proc.returncode
                findings.append((t.name, verdict, what, status, err.strip()[-600:], name))
                if keep:
                    shutil.copy(path, Path(keep) / name.replace("/", "-"))
            if t.as_name:
                shutil.rmtree(folder)
            else:
                path.unlink()
    return counts, findings


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hetplan", default=str(ROOT / "build/cli/hetplan"))
    ap.add_argument("--runs", type=int, default=400, help="mutated inputs in all")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=20,
                    help="cpu seconds per run (wall: four times that)")
    ap.add_argument("--memory-limit", type=float, default=4,
                    help="GiB of address space per run (default 4)")
    ap.add_argument("--targets", default="", help="comma-separated target names (default all)")
    ap.add_argument("--keep", default="", help="copy each finding's input into this folder")
    ap.add_argument("--list", action="store_true", help="list the targets and exit")
    ap.add_argument("--show-accepted", action="store_true",
                    help="also print each mutation that a command accepted (exit 0)")
    a = ap.parse_args()
    if a.list:
        for t in TARGETS:
            print(f"{t.name:18} {str(t.seed).replace(str(ROOT) + '/', '')}")
        return 0
    names = [n for n in a.targets.split(",") if n]
    unknown = [n for n in names if n not in [t.name for t in TARGETS]]
    if unknown:
        sys.exit(f"fuzz_inputs: --targets: no target named {', '.join(unknown)} "
                 "(--list lists them)")
    if a.keep:
        Path(a.keep).mkdir(parents=True, exist_ok=True)
    counts, findings = fuzz(str(Path(a.hetplan).resolve()), a.runs, a.seed, names, a.timeout,
                            a.keep or None, a.show_accepted, a.memory_limit)
    print(f"{'target':18} {'ok':>5} {'refused':>8} {'findings':>9}")
    for t in TARGETS:
        if names and t.name not in names:
            continue
        ok = counts.get((t.name, "ok"), 0)
        refused = counts.get((t.name, "refused"), 0)
        bad = sum(v for (n, verdict), v in counts.items()
                  if n == t.name and verdict not in ("ok", "refused"))
        print(f"{t.name:18} {ok:5} {refused:8} {bad:9}")
    for name, verdict, what, status, err, file in findings:
        print(f"\n[{verdict}] {name}: {what} (exit {status}; {file})\n  {err}")
    print(f"\n{a.runs} runs, seed {a.seed}: {len(findings)} finding(s)")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
