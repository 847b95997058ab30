#!/usr/bin/env python3
"""The frameworks' own definitions of what hetplan's exports write, for tests/data/frameworks/.

Reads a framework's source with Python's ast module (nothing of the framework is imported or
run) and prints one definitions file: names, value kinds, allowed values, and the rules the
exports must respect, each rule checked against the source text it comes from.

    python3 scripts/framework_definitions.py megatron --repo DIR [--commit REV] \
        > tests/data/frameworks/megatron_arguments.txt
    python3 scripts/framework_definitions.py deepspeed --repo DIR [--commit REV] \
        > tests/data/frameworks/deepspeed_config.txt
    python3 scripts/framework_definitions.py torchtitan --repo DIR [--commit REV] \
        [--pytorch-schedules schedules.py] > tests/data/frameworks/torchtitan_config.txt
    python3 scripts/framework_definitions.py torchtitan-toml --repo DIR --commit REV \
        > tests/data/frameworks/torchtitan_toml_config.txt

DIR is a git directory (bare or not; files are read from REV, default HEAD, with `git show`) or a
plain checkout (files read from disk). docs/exports.md says which commit each shipped file
was made from. Exit status 1 when a rule's source text is gone (the framework changed: read the
code and update the rule table below), 2 for bad arguments.
"""

import argparse
import ast
import os
import subprocess
import sys

# --- Reading a repository: a git object or a checkout ---


class Source:
    """Files of one version of a repository."""

    def __init__(self, repo, commit=None):
        self.repo = repo
        self.commit = None
        self.date = None
        is_git = subprocess.run(["git", "-C", repo, "rev-parse", "--git-dir"],
                                capture_output=True).returncode == 0
        bare = is_git and subprocess.run(
            ["git", "-C", repo, "rev-parse", "--is-bare-repository"], capture_output=True,
            text=True).stdout.strip() == "true"
        if commit or bare:
            self.commit = self._git("rev-parse", (commit or "HEAD") + "^{commit}").strip()
            self.date = self._git("log", "-1", "--format=%cI", self.commit).strip()
        elif is_git:
            head = subprocess.run(["git", "-C", repo, "rev-parse", "HEAD"], capture_output=True,
                                  text=True)
            self.checkout_of = head.stdout.strip() if head.returncode == 0 else None

    def _git(self, *args):
        r = subprocess.run(["git", "-C", self.repo, *args], capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"framework_definitions: git {' '.join(args)}: {r.stderr.strip()}")
        return r.stdout

    def read(self, path):
        """The file's text, or None when the version has no such file."""
        if self.commit:
            r = subprocess.run(["git", "-C", self.repo, "show", f"{self.commit}:{path}"],
                               capture_output=True, text=True)
            return r.stdout if r.returncode == 0 else None
        full = os.path.join(self.repo, path)
        if not os.path.isfile(full):
            return None
        with open(full, encoding="utf-8") as f:
            return f.read()

    def version(self):
        if self.commit:
            return f"{self.commit} ({self.date})"
        of = getattr(self, "checkout_of", None)
        return f"checkout {self.repo}" + (f" (of {of}; local changes not checked)" if of else "")


class Modules:
    """Python modules of a Source, parsed, with names resolved through their imports."""

    def __init__(self, source):
        self.source = source
        self.trees = {}

    def path(self, module):
        base = module.replace(".", "/")
        for candidate in (base + ".py", base + "/__init__.py"):
            if self.source.read(candidate) is not None:
                return candidate
        return None

    def tree(self, module):
        if module not in self.trees:
            path = self.path(module)
            text = self.source.read(path) if path else None
            self.trees[module] = (ast.parse(text), text) if text is not None else (None, None)
        return self.trees[module][0]

    def text(self, module):
        self.tree(module)
        return self.trees[module][1]

    def is_package(self, module):
        p = self.path(module)
        return p is not None and p.endswith("__init__.py")

    def absolute(self, module, node):
        """The module an ImportFrom in `module` names."""
        if node.level == 0:
            return node.module
        parts = module.split(".")
        package = parts if self.is_package(module) else parts[:-1]
        package = package[:len(package) - (node.level - 1)]
        return ".".join(package + ([node.module] if node.module else []))

    def binding(self, module, name, scope=None):
        """Where `name` (bound in `module`, or first in the function `scope`) comes from:
        ("class", module, ClassDef), ("assign", module, value), ("module", dotted) or None."""
        tree = self.tree(module)
        if tree is None:
            return None
        bodies = ([scope.body] if scope is not None else []) + [tree.body]
        for body in bodies:
            for node in _walk_shallow(body):
                if isinstance(node, ast.ClassDef) and node.name == name:
                    return ("class", module, node)
                if isinstance(node, ast.ImportFrom):
                    for alias in node.names:
                        if (alias.asname or alias.name) == name:
                            source = self.absolute(module, node)
                            if self.path(f"{source}.{alias.name}"):
                                return ("module", f"{source}.{alias.name}")
                            return self.binding(source, alias.name)
                if isinstance(node, ast.Import):
                    for alias in node.names:
                        if (alias.asname or alias.name.split(".")[0]) == name:
                            return ("module", alias.name if alias.asname else name)
                if isinstance(node, (ast.Assign, ast.AnnAssign)):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                        return ("assign", module, node.value)
        return None

    def resolve(self, module, expr, scope=None):
        """A class named by `expr` (Name, Attribute such as Outer.Config or pkg.mod.Class)."""
        if isinstance(expr, ast.Name):
            return self.binding(module, expr.id, scope)
        if isinstance(expr, ast.Attribute):
            outer = self.resolve(module, expr.value, scope)
            if outer is None:
                return None
            if outer[0] == "module":
                return self.binding(outer[1], expr.attr)
            if outer[0] == "class":
                for node in outer[2].body:
                    if isinstance(node, ast.ClassDef) and node.name == expr.attr:
                        return ("class", outer[1], node)
        return None

    def find_class(self, module, dotted):
        """("class", module, ClassDef) for `Outer.Inner` in `module`."""
        expr = ast.parse(dotted, mode="eval").body
        found = self.resolve(module, expr)
        if found is None or found[0] != "class":
            raise SystemExit(f"framework_definitions: no class {dotted} in {module}")
        return found


def _walk_shallow(body):
    """Statements of a body, descending into if/try blocks (conditional imports) only."""
    for node in body:
        yield node
        if isinstance(node, ast.If):
            yield from _walk_shallow(node.body)
            yield from _walk_shallow(node.orelse)
        elif isinstance(node, ast.Try):
            yield from _walk_shallow(node.body)
            for h in node.handlers:
                yield from _walk_shallow(h.body)


# --- Types of dataclass and pydantic fields ---

PRIMITIVES = {"int": int, "float": float, "str": str, "bool": bool}
NONE = ("none",)


def field_type(modules, module, annotation):
    """A type annotation as a small tree: ("prim", int), NONE, ("union", [...]), ("list", t),
    ("literal", [values]), ("enum", [member names]), ("class", name), ("other", text)."""
    a = annotation
    if isinstance(a, ast.Constant) and isinstance(a.value, str):
        return field_type(modules, module, ast.parse(a.value, mode="eval").body)
    if isinstance(a, ast.Constant) and a.value is None:
        return NONE
    if isinstance(a, ast.BinOp) and isinstance(a.op, ast.BitOr):
        return _union([field_type(modules, module, a.left), field_type(modules, module, a.right)])
    if isinstance(a, ast.Subscript):
        head = _name(a.value)
        args = a.slice.elts if isinstance(a.slice, ast.Tuple) else [a.slice]
        if head in ("Optional",):
            return _union([field_type(modules, module, args[0]), NONE])
        if head == "Union":
            return _union([field_type(modules, module, x) for x in args])
        if head in ("list", "List"):
            return ("list", field_type(modules, module, args[0])) if len(args) == 1 \
                else ("other", ast.unparse(a))
        if head == "Literal":
            return ("literal", [ast.literal_eval(x) for x in args])
        if head == "Annotated":
            return field_type(modules, module, args[0])
        return ("other", ast.unparse(a))
    name = _name(a)
    if name in PRIMITIVES:
        return ("prim", PRIMITIVES[name])
    stdlib = stdlib_enum(modules, module, a)
    if stdlib is not None:
        return ("enum", stdlib, [])
    found = modules.resolve(module, a) if isinstance(a, (ast.Name, ast.Attribute)) else None
    if found and found[0] == "class":
        members = enum_members(modules, found[1], found[2])
        if members is not None:
            return ("enum", members, enum_values(found[2]))
        return ("class", found[2].name)
    return ("other", ast.unparse(a))


def stdlib_enum(modules, module, expr):
    """Members of an Enum of Python's standard library (signal.Signals): the one thing imported,
    and only from the standard library, never from the framework."""
    if not (isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name)):
        return None
    bound = modules.binding(module, expr.value.id)
    if not bound or bound[0] != "module" or bound[1] not in sys.stdlib_module_names:
        return None
    import enum
    import importlib
    value = getattr(importlib.import_module(bound[1]), expr.attr, None)
    if isinstance(value, type) and issubclass(value, enum.Enum):
        return [m.name for m in value]
    return None


def _name(expr):
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        return expr.attr
    return None


def _union(parts):
    """typing's Union: nested unions flattened, duplicates dropped, order kept."""
    flat = []
    for p in parts:
        for q in (p[1] if p[0] == "union" else [p]):
            if q not in flat:
                flat.append(q)
    return flat[0] if len(flat) == 1 else ("union", flat)


def enum_members(modules, module, cls, depth=0):
    """Member names of an Enum class (its bases include an Enum), else None."""
    if depth > 8:
        return None
    is_enum = False
    for base in cls.bases:
        if _name(base) in ("Enum", "IntEnum", "StrEnum"):
            is_enum = True
        else:
            found = modules.resolve(module, base)
            if found and found[0] == "class" and \
                    enum_members(modules, found[1], found[2], depth + 1) is not None:
                is_enum = True
    if not is_enum:
        return None
    names = []
    for node in cls.body:
        if isinstance(node, ast.Assign):
            names += [t.id for t in node.targets
                      if isinstance(t, ast.Name) and not t.id.startswith("_")]
    return names


class Field:
    """One dataclass or pydantic field."""

    def __init__(self, name, annotation, value, module):
        self.name, self.annotation, self.value, self.module = name, annotation, value, module
        self.init = True
        self.default = None
        self.has_default = value is not None
        self.metadata = None
        self.alias = None
        self.deprecated = False
        call = value if isinstance(value, ast.Call) and _name(value.func) in ("field", "Field") \
            else None
        if call is not None:
            if call.args:
                self.default = _literal(call.args[0])
            for k in call.keywords:
                if k.arg == "default":
                    self.default = _literal(k.value)
                elif k.arg == "default_factory":
                    self.default = ("factory", ast.unparse(k.value))
                elif k.arg == "init":
                    self.init = _literal(k.value) is not False
                elif k.arg == "metadata":
                    self.metadata = k.value
                elif k.arg == "alias":
                    self.alias = _literal(k.value)
                elif k.arg == "json_schema_extra":
                    extra = _literal(k.value, {})
                    self.deprecated = isinstance(extra, dict) and bool(extra.get("deprecated"))
        elif value is not None:
            self.default = _literal(value)


def _literal(node, otherwise=None):
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return otherwise


def enum_values(cls):
    """The literal values of an Enum class's members (None where not literal)."""
    return [_literal(n.value) for n in cls.body if isinstance(n, ast.Assign)
            and any(isinstance(t, ast.Name) and not t.id.startswith("_") for t in n.targets)]


def class_fields(modules, module, cls, depth=0):
    """The fields of a dataclass (or pydantic model), bases first, in declaration order; a
    redefined field keeps its place and takes the new declaration (as dataclasses does)."""
    fields = {}
    if depth > 8:
        return fields
    for base in cls.bases:
        found = modules.resolve(module, base)
        if found and found[0] == "class":
            fields.update(class_fields(modules, found[1], found[2], depth + 1))
    for node in cls.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if _name(node.annotation if not isinstance(node.annotation, ast.Subscript)
                     else node.annotation.value) in ("ClassVar", "InitVar"):
                continue
            fields[node.target.id] = Field(node.target.id, node.annotation, node.value, module)
    return fields


def kind_of(t):
    """A definitions-file kind and choices for a field type (JSON-like configs)."""
    nullable = t[0] == "union" and NONE in t[1]
    if nullable:
        rest = [x for x in t[1] if x != NONE]
        t = rest[0] if len(rest) == 1 else ("union", rest)
    suffix = "?" if nullable else ""
    if t[0] == "prim":
        return t[1].__name__ + suffix, []
    if t[0] == "literal":
        first = type(t[1][0]).__name__
        return first + suffix, [str(v) for v in t[1]]
    if t[0] == "enum":  # pydantic takes an Enum's values
        values = t[2]
        if values and all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            return "int" + suffix, [str(v) for v in sorted(set(values))]
        if values and all(isinstance(v, str) for v in values):
            return "str" + suffix, list(dict.fromkeys(values))
        return "any", []
    if t[0] == "list":
        inner = t[1]
        if inner == ("prim", str):
            return "list" + suffix, []
        if inner[0] == "list" and inner[1] == ("prim", str):
            return "list2" + suffix, []
        return "any", []
    return "any", []


def choices_text(choices):
    return "" if not choices else " " + ",".join(str(c) for c in choices)


# --- Rules: data of ours, each checked against the source text it was read from ---


def check_anchors(rules, text, where):
    """Each rule's anchor must still be in `text`; returns the lines to print, exits 1 if not."""
    missing = [r for r in rules if r["anchor"] not in text]
    for r in missing:
        print(f"framework_definitions: {where}: the text of rule \"{r['lines'][0]}\" is gone "
              f"(\"{r['anchor']}\"): read the code and update the rule table", file=sys.stderr)
    if missing:
        raise SystemExit(1)
    out = []
    for r in rules:
        out.append(f"# {r['why']}: \"{r['anchor']}\"")
        out += r["lines"]
    return out


def header(title, repo_name, paths, source, extra=()):
    import textwrap
    lines = ["# " + t for t in textwrap.wrap(title, 96)] + [
             "# Facts only (names, value kinds, allowed values, rules), read by",
             "# scripts/framework_definitions.py with Python's ast module; no code.",
             "#",
             f"# repository: {repo_name}",
             f"# version:    {source.version()}",
             "# paths:"]
    lines += [f"#   {p}" for p in paths]
    lines += [f"# {e}" if e else "#" for e in extra]
    return lines


# --- Megatron-LM: the options of megatron/training/arguments.py ---

MEGATRON_ARGS = "megatron.training.arguments"

MEGATRON_RULES = [
    dict(why="validate_args",
         anchor="No more than one of the following arguments can be set at the same time",
         lines=["exclusive --num-layers-per-virtual-pipeline-stage "
                "--num-virtual-stages-per-pipeline-rank --pipeline-model-parallel-layout"]),
    dict(why="validate_args",
         anchor="please use --num-virtual-stages-per-pipeline-rank to specify virtual pipeline "
                "parallel degree when enable uneven pipeline parallelism",
         lines=["exclusive --num-layers-per-virtual-pipeline-stage "
                "--decoder-first-pipeline-num-layers",
                "exclusive --num-layers-per-virtual-pipeline-stage "
                "--decoder-last-pipeline-num-layers"]),
    dict(why="validate_args (if args.fp16: / if args.bf16:)", anchor="assert not args.bf16",
         lines=["exclusive --fp16 --bf16"]),
    dict(why="validate_args",
         anchor="recompute method is not yet supported for",
         lines=["exclusive --recompute-granularity=selective --recompute-method"]),
    dict(why="validate_args",
         anchor="Megatron-FSDP requires the `fsdp_dtensor` checkpointing format.",
         lines=["requires --use-megatron-fsdp --ckpt-format=fsdp_dtensor"]),
    # Before Blackwell (get_device_arch_version() < 10) tp > 1 or cp > 1 asserts
    # CUDA_DEVICE_MAX_CONNECTIONS == "1", except with an FSDP or overlap_moe_expert_parallel_comm
    # (a warning then); "1" is accepted on every architecture, so the rule is checked as written.
    dict(why="validate_args, compute capability < 10",
         anchor="Using tensor model parallelism or context parallelism require setting the "
                "environment variable",
         lines=["requires --tensor-model-parallel-size>1,!--use-megatron-fsdp,"
                "!--use-torch-fsdp2,!--overlap-moe-expert-parallel-comm "
                "$CUDA_DEVICE_MAX_CONNECTIONS=1",
                "requires --context-parallel-size>1,!--use-megatron-fsdp,"
                "!--use-torch-fsdp2,!--overlap-moe-expert-parallel-comm "
                "$CUDA_DEVICE_MAX_CONNECTIONS=1"]),
    dict(why="validate_args", anchor="FSDP requires CUDA_DEVICE_MAX_CONNECTIONS > 1 or unset.",
         lines=["requires --use-megatron-fsdp $CUDA_DEVICE_MAX_CONNECTIONS!=1"]),
    dict(why="validate_args",
         anchor="FSDP always requires CUDA_DEVICE_MAX_CONNECTIONS value large than one",
         lines=["requires --use-torch-fsdp2 $CUDA_DEVICE_MAX_CONNECTIONS!=1"]),
]


def megatron_kind(kw, names, choices=None):
    """Kind and choices of an add_argument call's keywords (a dict of AST values); `choices`:
    the choices already resolved (an Enum's members), else those of the literal list."""
    action = kw.get("action")
    action_name = _literal(action) if isinstance(action, ast.Constant) else _name(action)
    if action_name in ("store_true", "store_false", "BooleanOptionalAction", "store_const"):
        extra = []
        if action_name == "BooleanOptionalAction":
            extra = ["--no-" + n[2:] for n in names if n.startswith("--")]
        return "flag", [], extra
    nargs = _literal(kw["nargs"]) if "nargs" in kw else None
    type_name = _name(kw.get("type")) if "type" in kw else None
    if choices is None:
        choices = megatron_choices(kw.get("choices"))
    if nargs in ("+", "*") or (isinstance(nargs, int) and nargs > 1):
        return "list", choices, []
    kind = {"int": "int", "float": "float"}.get(type_name, "str")
    return kind, choices, []


def megatron_choices(node):
    if node is None:
        return []
    value = _literal(node)
    return [str(v) for v in value] if isinstance(value, (list, tuple)) else []


def factory_options(modules, module, cls_found, exclude):
    """The options ArgumentGroupFactory builds from a dataclass (argument_utils.py): --field-name;
    bools store_true when their default is False, else store_false as --no-field-name and
    --disable-field-name; types from the annotation (Optional[X] as X, list[X] as nargs "+",
    Literal and Enum as choices); field metadata["argparse_meta"] overrides all of it."""
    _, cls_module, cls = cls_found
    out, problems = [], []
    for f in class_fields(modules, cls_module, cls).values():
        if f.name in exclude or not f.init:
            continue
        names = ["--" + f.name.replace("_", "-")]
        meta = {}
        if f.metadata is not None and isinstance(f.metadata, ast.Dict):
            for k, v in zip(f.metadata.keys, f.metadata.values):
                if _literal(k) == "argparse_meta" and isinstance(v, ast.Dict):
                    meta = {_literal(mk): mv for mk, mv in zip(v.keys, v.values)}
        t = field_type(modules, f.module, f.annotation)
        kind, choices, error = factory_kind(t)
        if kind == "flag" and not (f.default is False or f.default == 0):
            names = ["--no-" + names[0][2:], "--disable-" + names[0][2:]]
        if meta:
            if "arg_names" in meta:
                names = _literal(meta["arg_names"])
            kw = {}
            if kind != "flag":
                kw = {"nargs": ast.Constant("+")} if kind == "list" else {}
            kw.update(meta)
            if any(k in meta for k in ("action", "type", "nargs", "choices")):
                resolved = comprehension_choices(modules, f.module, meta["choices"]) \
                    if "choices" in meta else None
                mkind, mchoices, extra = megatron_kind(kw, names, resolved or None)
                if not ("action" not in meta and kind == "flag"):
                    kind, choices = mkind, mchoices or (choices if "choices" not in meta else [])
                names += extra
            error = None
        if error:
            problems.append(f"{cls.name}.{f.name}: {error}")
            continue
        for n in names:
            out.append((n, kind, choices))
    return out, problems


def factory_kind(t):
    """ArgumentGroupFactory._extract_type and its bool rule: kind, choices, error."""
    if t[0] == "enum":
        return "str", t[1], None
    if t[0] == "prim":
        return ("flag" if t[1] is bool else t[1].__name__), [], None
    if t[0] in ("class", "other"):
        if t[0] == "class":  # a class argparse calls on the string
            return "str", [], None
        return None, [], f"unsupported type {t[1]}"
    if t[0] == "union":
        if len(t[1]) >= 2 and t[1][1] == NONE:
            return factory_kind(t[1][0])
        return None, [], "Unions not supported by argparse"
    if t[0] == "list":
        kind, choices, error = factory_kind(t[1])
        return ("list" if not error else None), choices, error
    if t[0] == "literal":
        return {int: "int", float: "float"}.get(type(t[1][0]), "str"), \
            [str(v) for v in t[1]], None
    return None, [], f"unsupported type {t}"


def comprehension_choices(modules, module, node):
    """[x.name for x in Enum] or list(Enum): the member names."""
    target = None
    if isinstance(node, ast.ListComp) and isinstance(node.elt, ast.Attribute) and \
            node.elt.attr == "name":
        target = node.generators[0].iter
    elif isinstance(node, ast.Call) and _name(node.func) == "list" and node.args:
        target = node.args[0]
    if target is not None:
        found = modules.resolve(module, target)
        if found and found[0] == "class":
            return enum_members(modules, found[1], found[2]) or []
    return []


def megatron(source, args):
    modules = Modules(source)
    tree = modules.tree(MEGATRON_ARGS)
    if tree is None:
        raise SystemExit("framework_definitions: no megatron/training/arguments.py")
    functions = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef)}
    order = [c.func.id for c in ast.walk(functions["add_megatron_arguments"])
             if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
             and c.func.id in functions]
    lines = header(
        "Megatron-LM command-line options: every option string arguments.py declares, and what "
        "it takes.", "NVIDIA/Megatron-LM",
        ["megatron/training/arguments.py (add_argument calls of the functions "
         "add_megatron_arguments calls; validate_args)",
         "megatron/training/argument_utils.py rules for the ArgumentGroupFactory groups, from "
         "the dataclasses they name"], source,
        ["", "Format: one option a line: OPTION KIND [CHOICES]",
         "  KIND  flag    store_true / store_false / BooleanOptionalAction: takes no value",
         "        int     one integer value",
         "        float   one number",
         "        str     one string (type=str, no type, type=bool, a custom parser, an Enum)",
         "        list    nargs '+', '*' or N > 1: one or more values",
         "        layout  one pipeline layout string: E (embedding), t (transformer layer), m (MTP",
         "                layer), L (loss), stages split by |, repetition with * and parentheses",
         "  CHOICES comma-separated, from choices=[...], Literal[...] or an Enum's members.",
         "Rules (validate_args), over the options and the environment ($NAME):",
         "  exclusive A B ...   at most one of them may be given (OPTION=VALUE: with that value)",
         "  requires W T        when every term of W (comma-separated; !TERM: not given; NAME>N:",
         "                      given with a value above N) holds, T holds (NAME=V: given with",
         "                      value V; NAME!=V: given, by export or unset, with another value)"])
    seen, problems = set(), []
    for fname in order:
        fn = functions[fname]
        group = []
        for node in ast.walk(fn):
            if isinstance(node, ast.Call) and _name(node.func) == "add_argument":
                names = [_literal(a) for a in node.args if isinstance(a, ast.Constant)]
                kw = {k.arg: k.value for k in node.keywords if k.arg}
                resolved = comprehension_choices(modules, MEGATRON_ARGS, kw["choices"]) \
                    if kw.get("choices") is not None else None
                kind, choices, extra = megatron_kind(kw, names, resolved or None)
                if "--pipeline-model-parallel-layout" in names:
                    kind = "layout"
                group += [(node.lineno, n, kind, choices) for n in names + extra]
            if isinstance(node, ast.Call) and _name(node.func) == "build_group":
                factory = node.func.value
                if isinstance(factory, ast.Name):  # f = ArgumentGroupFactory(...); f.build_group
                    factory = next(a.value for a in ast.walk(fn) if isinstance(a, ast.Assign)
                                   and any(_name(t) == factory.id for t in a.targets))
                cls_expr = factory.args[0]
                exclude_node = next((k.value for k in factory.keywords if k.arg == "exclude"),
                                    None)
                if isinstance(exclude_node, ast.Name):
                    exclude_node = next(a.value for a in ast.walk(fn) if isinstance(a, ast.Assign)
                                        and any(_name(t) == exclude_node.id for t in a.targets))
                exclude = set(_literal(exclude_node, [])) if exclude_node is not None else set()
                found = modules.resolve(MEGATRON_ARGS, cls_expr, scope=fn)
                if not found or found[0] != "class":
                    raise SystemExit(f"framework_definitions: {fname}: cannot find class "
                                     f"{ast.unparse(cls_expr)}")
                opts, probs = factory_options(modules, MEGATRON_ARGS, found, exclude)
                problems += probs
                group += [(node.lineno, n, k, c) for n, k, c in opts]
        if not group:
            continue
        lines += ["", f"# {fname}"]
        for _, name, kind, choices in sorted(group, key=lambda g: g[0]):
            if name in seen:
                continue
            seen.add(name)
            lines.append(f"{name} {kind}{choices_text(choices)}")
    for p in problems:
        print(f"framework_definitions: ArgumentGroupFactory cannot build {p} (Megatron-LM fails "
              "at startup unless it is excluded)", file=sys.stderr)
    validate = ast.get_source_segment(modules.text(MEGATRON_ARGS), functions["validate_args"])
    lines += ["", "# Rules"] + check_anchors(MEGATRON_RULES, validate, "validate_args")
    return lines


# --- DeepSpeed: the config keys hetplan's export writes, and PipelineModule's arguments ---

# Sections read by pydantic models (extra="forbid": unknown keys are errors), by key.
DEEPSPEED_MODELS = [
    ("bf16", "deepspeed.runtime.precision_config", "DeepSpeedBF16Config"),
    ("fp16", "deepspeed.runtime.precision_config", "DeepSpeedFP16Config"),
    ("zero_optimization", "deepspeed.runtime.zero.config", "DeepSpeedZeroConfig"),
    ("tensor_parallel", "deepspeed.runtime.tensor_parallel.config", "TPTrainingConfig"),
]

DEEPSPEED_RULES = [
    dict(why="config.py DeepSpeedConfig._batch_assertion",
         anchor="assert train_batch == micro_batch * grad_acc * self.world_size",
         lines=["batch train_batch_size train_micro_batch_size_per_gpu "
                "gradient_accumulation_steps"]),
    dict(why="config.py DeepSpeedConfig.__init__: world_size with an mpu",
         anchor="self.world_size = mpu.get_data_parallel_world_size()",
         lines=["# with an mpu (a PipelineModule's grid) the data-parallel size is its topology's "
                "data axis"]),
    dict(why="config.py DeepSpeedConfig.__init__: world_size without one (AutoTP included)",
         anchor="self.world_size = dist.get_world_size()",
         lines=["# without an mpu it is the whole world (dp x tp under AutoTP)"]),
]

PIPE_RULES = [
    dict(why="pipe/module.py PipelineModule.__init__: the default topology",
         anchor="topology = PipeDataParallelTopology(num_pp=num_stages, num_dp=dp)",
         lines=["default-topology PipeDataParallelTopology num_pp=num_stages "
                "num_dp=world/num_stages"]),
    dict(why="pipe/engine.py PipelineEngine.__init__: ZeRO stages with a pipeline",
         anchor="ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism",
         lines=["pipeline-zero-max 1"]),
]


def deepspeed(source, args):
    modules = Modules(source)
    config = modules.text("deepspeed.runtime.config")
    if config is None:
        raise SystemExit("framework_definitions: no deepspeed/runtime/config.py")
    lines = header(
        "DeepSpeed config keys hetplan's DeepSpeed export writes, with value kinds, and the "
        "arguments of PipelineModule it names.", "deepspeedai/DeepSpeed",
        ["deepspeed/runtime/config.py (top-level keys, get_pipeline_config, _batch_assertion)",
         "deepspeed/runtime/constants.py (key names)",
         "deepspeed/runtime/precision_config.py, zero/config.py, tensor_parallel/config.py "
         "(pydantic sections)",
         "deepspeed/runtime/activation_checkpointing/config.py (keys read with get_scalar_param)",
         "deepspeed/runtime/pipe/module.py, topology.py, engine.py (PipelineModule, topologies, "
         "the pipeline keys the engine reads)"], source,
        ["", "Format: one key path a line: PATH KIND [CHOICES]",
         "  section open     a dict whose other keys DeepSpeed does not check",
         "  section closed   a pydantic DeepSpeedConfigModel (extra=\"forbid\"): unknown keys fail",
         "  ignored          a key DeepSpeed's config accepts but nothing reads",
         "  int, float, bool, str, any, list; a trailing ? also allows null",
         "  CHOICES comma-separated; a choice ending in * matches any value with that prefix.",
         "Python arguments (not config keys) are CLASS.ARGUMENT lines under 'arguments CLASS'.",
         "Rules: batch T M G (T = M x G x the data-parallel size DeepSpeedConfig counts);",
         "default-topology; pipeline-zero-max Z (the highest ZeRO stage with a pipeline)."])
    constants = modules.text("deepspeed.runtime.constants") or ""
    lines += ["", ". section open"]
    for key, kind in (("train_batch_size", "int"), ("train_micro_batch_size_per_gpu", "int"),
                      ("gradient_accumulation_steps", "int")):
        if f'"{key}"' not in constants and f"'{key}'" not in constants:
            raise SystemExit(f"framework_definitions: constants.py has no key {key}")
        lines.append(f"{key} {kind}")
    for key, module, cls_name in DEEPSPEED_MODELS:
        found = modules.find_class(module, cls_name)
        lines += ["", f"# {module.replace('.', '/')}.py {cls_name}", f"{key} section closed"]
        for f in class_fields(modules, found[1], found[2]).values():
            kind, choices = kind_of(field_type(modules, f.module, f.annotation))
            for name in [f.name] + ([f.alias] if f.alias else []):
                lines.append(f"{key}.{name} {kind}{choices_text(choices)}")
    lines += activation_checkpointing_keys(modules)
    lines += pipeline_keys(modules, config)
    lines += pipeline_arguments(modules)
    lines += ["", "# Rules"] + check_anchors(DEEPSPEED_RULES, config, "config.py")
    pipe = (modules.text("deepspeed.runtime.pipe.module") or "") + \
        (modules.text("deepspeed.runtime.pipe.engine") or "")
    lines += check_anchors(PIPE_RULES, pipe, "pipe/module.py, pipe/engine.py")
    return lines


def activation_checkpointing_keys(modules):
    module = "deepspeed.runtime.activation_checkpointing.config"
    tree = modules.tree(module)
    if tree is None:
        raise SystemExit("framework_definitions: no activation_checkpointing/config.py")
    values = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            values[node.targets[0].id] = _literal(node.value)
    section = values.get("ACT_CHKPT")
    lines = ["", f"# {module.replace('.', '/')}.py (get_scalar_param keys; kinds from their "
             "defaults)", f"{section} section open"]
    for name, value in values.items():
        if name.startswith("ACT_CHKPT_") and not name.endswith("_DEFAULT") and \
                isinstance(value, str):
            default = values.get(name + "_DEFAULT")
            kind = "bool" if isinstance(default, bool) else "int?" if default is None else \
                type(default).__name__
            lines.append(f"{section}.{value} {kind}")
    return lines


def pipeline_keys(modules, config):
    """get_pipeline_config's defaults, each marked read or ignored by what pipe/engine.py reads
    from self._config.pipeline."""
    tree = ast.parse(config)
    fn = next(f for f in tree.body if isinstance(f, ast.FunctionDef)
              and f.name == "get_pipeline_config")
    defaults = next(_literal(n.value) for n in ast.walk(fn) if isinstance(n, ast.Assign)
                    and _name(n.targets[0]) == "default_pipeline")
    engine = modules.tree("deepspeed.runtime.pipe.engine")
    read = set()
    for node in ast.walk(engine):
        target = None
        if isinstance(node, ast.Subscript):
            target = node.value
            key = _literal(node.slice)
        elif isinstance(node, ast.Call) and _name(node.func) == "get" and node.args:
            target = node.func.value
            key = _literal(node.args[0])
        if target is not None and isinstance(target, ast.Attribute) and \
                target.attr == "pipeline" and isinstance(key, str):
            read.add(key)
    lines = ["", "# config.py get_pipeline_config (the pipeline dict is copied as given) and the "
             "keys pipe/engine.py reads", "pipeline section open"]
    for key, value in defaults.items():
        kind = "bool" if isinstance(value, bool) else "int" if isinstance(value, int) else "any"
        lines.append(f"pipeline.{key} {kind if key in read else 'ignored'}")
    for key in sorted(read - set(defaults)):
        lines.append(f"pipeline.{key} any")
    return lines


def pipeline_arguments(modules):
    """PipelineModule's and the topologies' __init__ arguments, and _partition_layers' methods."""
    lines = []
    module = "deepspeed.runtime.pipe.module"
    found = modules.find_class(module, "PipelineModule")
    init = next(f for f in found[2].body if isinstance(f, ast.FunctionDef) and
                f.name == "__init__")
    partition = next(f for f in found[2].body if isinstance(f, ast.FunctionDef) and
                     f.name == "_partition_layers")
    methods = []
    for node in ast.walk(partition):
        if isinstance(node, ast.Compare) and _name(node.left) == "method" and \
                isinstance(node.ops[0], ast.Eq):
            value = _literal(node.comparators[0])
            if value and value != "profile":  # 'profile' raises NotImplementedError
                methods.append(value)
        if isinstance(node, ast.Call) and _name(node.func) == "startswith":
            methods.append(_literal(node.args[0]) + "*")
    lines += ["", "# pipe/module.py PipelineModule.__init__ (partition_method: _partition_layers)",
              "arguments PipelineModule"]
    defaults = dict(zip([a.arg for a in init.args.args][-len(init.args.defaults):],
                        init.args.defaults))
    for a in init.args.args[1:]:
        d = defaults.get(a.arg)
        value = _literal(d) if d is not None else None
        kind = "int?" if a.arg in ("num_stages",) else \
            "str" if a.arg == "partition_method" else \
            "int" if isinstance(value, int) and not isinstance(value, bool) else \
            "bool" if isinstance(value, bool) else "any"
        choices = methods if a.arg == "partition_method" else []
        lines.append(f"PipelineModule.{a.arg} {kind}{choices_text(choices)}")
    topo = "deepspeed.runtime.pipe.topology"
    for cls_name in ("PipeDataParallelTopology", "PipeModelDataParallelTopology"):
        found = modules.find_class(topo, cls_name)
        init = next(f for f in found[2].body if isinstance(f, ast.FunctionDef) and
                    f.name == "__init__")
        call = next(n for n in ast.walk(init) if isinstance(n, ast.Call) and
                    _name(n.func) == "__init__")
        axes = next(_literal(k.value) for k in call.keywords if k.arg == "axes")
        dims = next(ast.unparse(k.value) for k in call.keywords if k.arg == "dims")
        lines += ["", f"# pipe/topology.py {cls_name}: axes {axes}, dims {dims}",
                  f"arguments {cls_name}"]
        lines += [f"{cls_name}.{a.arg} int" for a in init.args.args[1:]]
    return lines


# --- torchtitan: Trainer.Config (Python, since the February 2026 refactor) ---

# PyTorch's torch/distributed/pipelining/schedules.py, as read at commit 00722e648b74 (the only
# version this project's store holds; PyTorch's repository is too large to mirror here): the
# names get_schedule_class knows, and what each schedule refuses. --pytorch-schedules FILE checks
# them against another version of the file.
PYTORCH_SCHEDULES_COMMIT = "00722e648b740f91d0e71494baa17891749fd291"
PYTORCH_SCHEDULE_NAMES = ["1F1B", "Interleaved1F1B", "GPipe", "LoopedBFS",
                          "InterleavedZeroBubble", "PipelineScheduleSingle",
                          "PipelineScheduleMulti", "ZBVZeroBubble", "DualPipeV"]
PYTORCH_SCHEDULE_RULES = [
    dict(why="Schedule1F1B.__init__",
         anchor="must be greater than or equal to the number of stages",
         lines=["schedule 1F1B v=1", "schedule 1F1B n>=stages"]),
    dict(why="ScheduleGPipe: a PipelineScheduleSingle (one stage per rank)",
         anchor="class ScheduleGPipe(PipelineScheduleSingle)",
         lines=["schedule GPipe v=1"]),
    dict(why="ScheduleInterleaved1F1B.__init__: rounds = max(1, n // pp)",
         anchor="Interleaved 1F1B requires the number of microbatches to be a",
         lines=["schedule Interleaved1F1B rounds"]),
    dict(why="ScheduleInterleavedZeroBubble.__init__: rounds = max(1, n // pp)",
         anchor="Zero bubble requires the number of microbatches to be a",
         lines=["schedule InterleavedZeroBubble rounds"]),
    dict(why="ScheduleZBVZeroBubble and ScheduleDualPipeV.__init__",
         anchor="ZBV requires exactly 2 stages per rank",
         lines=["schedule ZBVZeroBubble v=2", "schedule DualPipeV v=2"]),
    dict(why="ScheduleDualPipeV.__init__",
         anchor="DualPipeV requires at least as many microbatches as stages",
         lines=["schedule DualPipeV n>=stages"]),
]

TORCHTITAN_RULES = [
    dict(why="trainer.py Trainer.Config._validate_cuda_graphs",
         anchor="CUDA graphs do not support pipeline parallelism yet",
         lines=["requires ParallelismConfig.pipeline_parallel_degree>1 "
                "TrainingConfig.disable_cuda_graphs=True"]),
    # The same check refuses expert parallelism with a dispatcher that synchronises with the host
    # (the standard all-to-all, the one hetplan's export runs: its split sizes are read back by
    # .tolist(), models/common/token_dispatcher.py); MinimalAsyncEP and HybridEP with a
    # non-blocking capacity factor are allowed.
    dict(why="trainer.py Trainer.Config._validate_cuda_graphs, the standard all-to-all dispatcher",
         anchor="CUDA graphs support only expert parallel token dispatcher",
         lines=["requires ParallelismConfig.expert_parallel_degree>1 "
                "TrainingConfig.disable_cuda_graphs=True"]),
    dict(why="trainer.py Trainer.__init__: tokens per micro-batch over tp (sequence parallel)",
         anchor="The number of tokens per pipeline microbatch",
         lines=["divides ParallelismConfig.tensor_parallel_degree "
                "TrainingConfig.num_tokens_per_microbatch_per_dp_rank "
                "when ParallelismConfig.enable_sequence_parallel=True"]),
    dict(why="trainer.py Trainer.__init__: gradient accumulation",
         anchor="of tokens processed globally in one gradient accumulation",
         lines=["accumulation TrainingConfig.num_tokens_per_train_step "
                "TrainingConfig.num_tokens_per_microbatch_per_dp_rank "
                "ParallelismConfig.num_pp_microbatches"]),
]

# Rules of torchtitan/config/configs.py's dataclasses.
TORCHTITAN_CONFIG_RULES = [
    dict(why="config/configs.py CompileConfig.__post_init__",
         anchor="Async TP requires 'model' in --compile.components",
         lines=["requires CompileConfig.enable_async_tensor_parallel=True CompileConfig.enable=True"]),
]

TORCHTITAN_SECTIONS = {"training": "TrainingConfig", "parallelism": "ParallelismConfig",
                       "compile": "CompileConfig"}


def schedule_lines(args):
    lines = ["", f"# PyTorch torch/distributed/pipelining/schedules.py at "
             f"{PYTORCH_SCHEDULES_COMMIT}: get_schedule_class names (case-insensitive) and the",
             "# rules of each schedule (n micro-batches per step, v stages per rank, stages = "
             "pp x v;", "# rounds: n % max(1, n // pp) == 0)"]
    lines.append("schedules " + ",".join(PYTORCH_SCHEDULE_NAMES))
    if args.pytorch_schedules:
        with open(args.pytorch_schedules, encoding="utf-8") as f:
            text = f.read()
        names = pytorch_schedule_names(text)
        if names != PYTORCH_SCHEDULE_NAMES:
            print(f"framework_definitions: {args.pytorch_schedules}: get_schedule_class names "
                  f"{names}, the table has {PYTORCH_SCHEDULE_NAMES}: update it",
                  file=sys.stderr)
            raise SystemExit(1)
        return lines + check_anchors(PYTORCH_SCHEDULE_RULES, text, args.pytorch_schedules)
    return lines + [line for r in PYTORCH_SCHEDULE_RULES
                    for line in [f"# {r['why']}: \"{r['anchor']}\""] + r["lines"]]


def pytorch_schedule_names(text):
    tree = ast.parse(text)
    fn = next(f for f in tree.body if isinstance(f, ast.FunctionDef)
              and f.name == "get_schedule_class")
    table = next(n.value for n in ast.walk(fn) if isinstance(n, ast.Assign)
                 and _name(n.targets[0]) == "schedule_map")
    return [_literal(k) for k in table.keys]


def dataclass_lines(modules, module, cls_name, prefix):
    found = modules.find_class(module, cls_name)
    lines = []
    for f in class_fields(modules, found[1], found[2]).values():
        kind, choices = kind_of(field_type(modules, f.module, f.annotation))
        if f.name == "pipeline_parallel_schedule":  # a str that get_schedule_class looks up
            choices = PYTORCH_SCHEDULE_NAMES
        lines.append(f"{prefix}.{f.name} {kind}{choices_text(choices)}")
    return lines


def torchtitan(source, args):
    modules = Modules(source)
    trainer_module = "torchtitan.trainer"
    if modules.tree(trainer_module) is None:
        raise SystemExit("framework_definitions: no torchtitan/trainer.py (a torchtitan before "
                         "its February 2026 config refactor: use torchtitan-toml)")
    lines = header(
        "torchtitan configuration (Python, Trainer.Config) hetplan's torchtitan export writes.",
        "pytorch/torchtitan",
        ["torchtitan/trainer.py (Trainer.Config: its sections; __post_init__ and Trainer "
         "checks)", "torchtitan/config/configs.py (TrainingConfig, ParallelismConfig)",
         "torchtitan/config/__init__.py, manager.py (imports; --module/--config)",
         "torchtitan/distributed/activation_checkpoint.py (the policies)",
         "torchtitan/models/common/decoder.py (module names for module_fqns_per_model_part)"],
        source,
        ["", "Format: CLASS.FIELD KIND [CHOICES] for the dataclass fields the export sets",
         "  (KIND int, float, bool, str, list, list2 = list[list[str]]; ? also allows None);",
         "  section FIELD CLASS: a field of Trainer.Config holding that dataclass;",
         "  policy FIELD VALUE,...: the values a field takes (activation checkpointing);",
         "  import MODULE NAME ...: names the module exports; module NAME: a model FQN (layers.*",
         "  any layer); entry MODULE FLAG ...: how a run is started;",
         "Rules: requires W T (as Megatron-LM's); divides A B when C; accumulation T M P",
         "  (T divisible by M x P x dp); schedule NAME RULE (below)."])
    trainer = modules.find_class(trainer_module, "Trainer.Config")
    fields = class_fields(modules, trainer[1], trainer[2])
    lines.append("")
    for name, cls_name in TORCHTITAN_SECTIONS.items():
        if name not in fields or _name(fields[name].annotation) != cls_name:
            raise SystemExit(f"framework_definitions: Trainer.Config.{name} is not a {cls_name}")
        lines.append(f"section {name} {cls_name}")
    ac = fields.get("activation_checkpoint")
    policies = activation_policies(modules, trainer[1], ac)
    lines.append(f"policy activation_checkpoint {','.join(policies)}")
    for cls_name in TORCHTITAN_SECTIONS.values():
        lines += ["", f"# torchtitan/config/configs.py {cls_name}"]
        lines += dataclass_lines(modules, "torchtitan.config.configs", cls_name, cls_name)
    lines += ["", "# torchtitan/config/__init__.py and activation_checkpoint.py: importable names"]
    init = modules.tree("torchtitan.config")
    exported = sorted({a.asname or a.name for n in init.body if isinstance(n, ast.ImportFrom)
                       for a in n.names} & {"ParallelismConfig", "TrainingConfig"})
    lines.append("import torchtitan.config " + " ".join(exported))
    ac_tree = modules.tree("torchtitan.distributed.activation_checkpoint")
    ac_classes = [n.name for n in ac_tree.body if isinstance(n, ast.ClassDef)
                  and n.name in ("FullAC", "SelectiveAC", "MemoryBudgetAC")]
    lines.append("import torchtitan.distributed.activation_checkpoint " + " ".join(ac_classes))
    lines += decoder_modules(modules)
    manager = modules.text("torchtitan.config.manager") or ""
    if modules.path("torchtitan.train") is None or '"--module"' not in manager or \
            '"--config"' not in manager:
        raise SystemExit("framework_definitions: torchtitan.train with --module/--config is gone")
    lines += ["", "# torchtitan/train.py and config/manager.py: a run is "
              "python -m torchtitan.train --module MODULE --config FUNCTION",
              "entry torchtitan.train --module --config"]
    lines += schedule_lines(args)
    trainer_text = modules.text(trainer_module)
    lines += ["", "# Rules"] + check_anchors(TORCHTITAN_RULES, trainer_text, "trainer.py")
    lines += check_anchors(TORCHTITAN_CONFIG_RULES,
                           modules.text("torchtitan.config.configs") or "", "config/configs.py")
    return lines


def activation_policies(modules, module, field):
    """The values Trainer.Config.activation_checkpoint takes: CLASS.Config() or None."""
    found = modules.binding(module, _name(field.annotation))
    expr = found[2] if found and found[0] == "assign" else field.annotation
    out = []

    def visit(node):
        if isinstance(node, ast.BinOp):
            visit(node.left)
            visit(node.right)
        elif isinstance(node, ast.Subscript) and _name(node.value) == "Annotated":
            visit(node.slice.elts[0])
        elif isinstance(node, ast.Constant) and node.value is None:
            out.append("None")
        elif isinstance(node, ast.Attribute):
            out.append(ast.unparse(node) + "()")
    visit(expr)
    return out


def decoder_modules(modules):
    module = "torchtitan.models.common.decoder"
    found = modules.find_class(module, "Decoder")
    init = next(f for f in found[2].body if isinstance(f, ast.FunctionDef) and
                f.name == "__init__")
    names = []
    for node in ast.walk(init):
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Attribute) and \
                _name(node.targets[0].value) == "self":
            names.append(node.targets[0].attr)
    lines = ["", "# torchtitan/models/common/decoder.py Decoder: the modules a stage lists"]
    for n in ("tok_embeddings", "layers", "norm", "lm_head", "output"):
        if n in names:
            lines.append(f"module {n}.*" if n == "layers" else f"module {n}")
    return lines


# --- torchtitan before the refactor: the TOML JobConfig of torchtitan/config/job_config.py ---


def torchtitan_toml(source, args):
    modules = Modules(source)
    module = "torchtitan.config.job_config"
    if modules.tree(module) is None:
        raise SystemExit("framework_definitions: no torchtitan/config/job_config.py at this "
                         "version (the TOML config ends at 9810191bbb03^, 2026-02-23)")
    lines = header(
        "torchtitan job config (TOML) sections and fields, for torchtitan before its February "
        "2026 config refactor (hetplan export --torchtitan-toml).", "pytorch/torchtitan",
        ["torchtitan/config/job_config.py (JobConfig and its sections)",
         "torchtitan/distributed/pipeline_parallel.py (module names of the default split)"],
        source,
        ["", "Format: SECTION section; SECTION.FIELD KIND [CHOICES] (KIND int, float, bool, str,",
         "  list, list2; ? also allows None, which TOML cannot write); module NAME; schedule",
         "  rules as in torchtitan_config.txt."])
    job = modules.find_class(module, "JobConfig")
    sections = class_fields(modules, job[1], job[2])
    lines.append("")
    for name in sections:
        lines.append(f"{name} section")
    for name in ("training", "parallelism", "activation_checkpoint", "compile"):
        if name == "compile" and name not in sections:
            continue  # a release without the section: hetplan writes none of its keys
        f = sections[name]
        cls = modules.resolve(f.module, f.annotation)
        lines += ["", f"# job_config.py {cls[2].name}"]
        for field in class_fields(modules, cls[1], cls[2]).values():
            kind, choices = kind_of(field_type(modules, field.module, field.annotation))
            if name == "parallelism" and field.name == "pipeline_parallel_schedule":
                choices = PYTORCH_SCHEDULE_NAMES
            if name == "activation_checkpoint" and field.name == "selective_ac_option":
                choices = ["op", "<int>"]  # its help: 'op' or an integer string (every N layers)
            lines.append(f"{name}.{field.name} {kind}{choices_text(choices)}")
    pp_module = next((m for m in ("torchtitan.distributed.pipeline_parallel",
                                  "torchtitan.distributed.pipeline") if modules.path(m)), None)
    pp = modules.text(pp_module) if pp_module else ""
    lines += ["", f"# {pp_module.replace('.', '/')}.py: the modules of the default split"
              if pp_module else "# no pipeline module found: only layers.* is known"]
    for n in ("tok_embeddings", "norm", "output", "lm_head"):
        if f'"{n}"' in pp:
            lines.append(f"module {n}")
    lines.append("module layers.*")
    lines += schedule_lines(args)
    return lines


COMMANDS = {"megatron": megatron, "deepspeed": deepspeed, "torchtitan": torchtitan,
            "torchtitan-toml": torchtitan_toml}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("framework", choices=sorted(COMMANDS))
    parser.add_argument("--repo", required=True,
                        help="a git directory (read at --commit) or a checkout")
    parser.add_argument("--commit", help="a revision of --repo (default: HEAD of a bare repo, "
                        "else the files on disk)")
    parser.add_argument("--pytorch-schedules",
                        help="torchtitan: PyTorch's schedules.py to check the schedule table with")
    args = parser.parse_args(argv)
    if not os.path.isdir(args.repo):
        parser.error(f"--repo {args.repo}: not a directory")
    lines = COMMANDS[args.framework](Source(args.repo, args.commit), args)
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
