"""Model and strategy descriptions for the reference harness, in plain Python (no torch).

The model comes from `hetplan model-info --json` (cli/cmd_model_info.cpp): every layer with all
its fields, so the harness builds exactly the layers hetplan's cost model decomposes
(costmodel/layer_ops.cpp). The strategy is hetplan's strategy object (docs/formats.md).
This module also lists every parameter tensor the harness will create, so that a test can check
the parameter count against hetplan's without a GPU or torch.
"""

import json

MODEL_INFO_FORMAT = "hetplan-model-info"
STRATEGY_KEYS = {
    "dp", "tp", "pp", "micro_batch", "global_batch", "schedule", "recompute", "zero",
    "sequence_parallel", "chunks", "flash_attention", "stages", "predicted", "model", "cluster",
    "grad_accumulation_fusion", "overlap_grad_reduce", "tp_comm_overlap", "fp32_grad_reduce",
    "host_mode", "framework", "cp", "cp_comm", "cp_a2a", "ep", "etp", "moe_dispatcher",
    "moe_imbalance", "precision", "low_precision_params", "ep_comm_overlap",
}

# Strategy keys the harness reads but runs at one value only: context and expert parallelism and
# the low-precision recipes are hetplan's to predict, not the harness's to run.
SINGLE_VALUE_KEYS = {"cp": 1, "ep": 1, "precision": "bf16"}


class SpecError(ValueError):
    """Bad input: the message names the file and the key."""


def padded_vocab(vocab, tp, multiple):
    """Megatron-LM pads the vocabulary to a multiple of `multiple` x tp; hetplan's costs use it."""
    m = multiple * tp
    return (vocab + m - 1) // m * m


def load_model_info(path):
    with open(path) as f:
        info = json.load(f)
    if info.get("format") != MODEL_INFO_FORMAT:
        raise SpecError(f"{path}: format: expected \"{MODEL_INFO_FORMAT}\" (hetplan model-info "
                        f"--json), found {info.get('format')!r}")
    if info.get("schema_version") != 1:
        raise SpecError(f"{path}: schema_version: expected 1, found {info.get('schema_version')!r}")
    kinds = [layer["kind"] for layer in info["layers"]]
    if not kinds or kinds[0] != "embedding" or kinds[-1] != "lm_head" or \
            any(k != "transformer" for k in kinds[1:-1]):
        raise SpecError(f"{path}: layers: expected embedding, transformer blocks, lm_head")
    for layer in info["layers"]:
        missing = unbuilt_features(layer)
        if missing:
            raise SpecError(f"{path}: layers[{layer['index']}] ({layer['name']}).{missing[0]}: "
                            "the harness does not build this (hetplan models it: "
                            "docs/costmodel.md)")
    return info


def unbuilt_features(layer):
    """The model-info keys of `layer` (hetplan's families of 2026-12) that the harness does not
    build: MLA, sliding windows, q/k norms, post-norms, soft-capping, sinks, GeGLU, q/k/v biases
    without the output's, shared experts, MTP modules, a hybrid model's Mamba-2 layers and its
    layers of one mixer (no attention, or no MLP). Empty: the harness builds the layer."""
    out = []
    if layer.get("kind") == "lm_head" and layer.get("logit_softcap", 0):
        out.append("logit_softcap")
    if layer.get("kind") != "transformer":
        return out
    for key in ("mla", "qk_norm", "post_norms", "attention_sinks", "mtp", "mamba"):
        if layer.get(key):
            out.append(key)
    for key in ("window", "attn_softcap", "shared_experts"):
        if layer.get(key, 0):
            out.append(key)
    if "mamba" not in layer and (layer.get("heads") == 0 or layer.get("ffn_hidden") == 0):
        out.append("heads" if layer.get("heads") == 0 else "ffn_hidden")
    if layer.get("activation") == "geglu":
        out.append("activation")
    if layer.get("qkv_bias") and not layer.get("bias"):
        out.append("qkv_bias")
    return out


def load_strategy(path):
    """A strategy object, or the first of {"strategies": [...]} (as hetplan reads it)."""
    with open(path) as f:
        doc = json.load(f)
    if isinstance(doc, dict) and "strategies" in doc:
        if not doc["strategies"]:
            raise SpecError(f"{path}: strategies: expected at least one strategy")
        doc = doc["strategies"][0]
    return check_strategy(doc, path)


def check_strategy(s, origin="strategy"):
    if not isinstance(s, dict):
        raise SpecError(f"{origin}: expected a strategy object")
    unknown = set(s) - STRATEGY_KEYS
    if unknown:
        raise SpecError(f"{origin}: {sorted(unknown)[0]}: unknown key")
    for key, only in SINGLE_VALUE_KEYS.items():
        if key in s and s[key] != only:
            raise SpecError(f"{origin}: {key}: the harness runs {only!r} only, found {s[key]!r}")
    if "etp" in s and s["etp"] != s.get("tp"):
        raise SpecError(f"{origin}: etp: the harness runs the experts at the tensor width "
                        f"({s.get('tp')!r}), found {s['etp']!r}")
    out = dict(s)
    out.pop("predicted", None)
    out.pop("model", None)
    out.pop("cluster", None)
    for key in ("dp", "tp", "pp", "micro_batch", "global_batch"):
        v = out.get(key)
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            raise SpecError(f"{origin}: {key}: expected a whole number > 0, found {v!r}")
    out.setdefault("schedule", "1f1b")
    out.setdefault("recompute", "none")
    out.setdefault("zero", 0)
    out.setdefault("sequence_parallel", False)
    out.setdefault("chunks", 1)
    out.setdefault("flash_attention", True)
    if out["recompute"] not in ("none", "selective", "full"):
        raise SpecError(f"{origin}: recompute: expected none, selective or full, "
                        f"found {out['recompute']!r}")
    if out["zero"] not in (0, 1, 2, 3):
        raise SpecError(f"{origin}: zero: expected 0-3, found {out['zero']!r}")
    if out["global_batch"] % (out["dp"] * out["micro_batch"]) != 0:
        raise SpecError(f"{origin}: global_batch: {out['global_batch']} is not a multiple of "
                        f"dp x micro_batch = {out['dp']} x {out['micro_batch']}")
    return out


def microbatches(strategy):
    return strategy["global_batch"] // (strategy["dp"] * strategy["micro_batch"])


def norm_params(kind, hidden):
    return {"none": [], "layernorm": [("weight", (hidden,)), ("bias", (hidden,))],
            "rmsnorm": [("weight", (hidden,))]}[kind]


def layer_parameters(layer, vocab_rows=None):
    """The parameter tensors (name, shape) the harness creates for one layer.

    `vocab_rows` replaces the vocabulary size (the padded size the harness uses); None keeps the
    real one. A tied head lists no output weight (it uses the embedding's)."""
    h = layer["hidden"]
    kind = layer["kind"]
    out = []
    if kind == "embedding":
        v = vocab_rows or layer["vocab"]
        out.append(("word", (v, h)))
        if layer["max_positions"] > 0:
            out.append(("position", (layer["max_positions"], h)))
        if layer["token_types"] > 0:
            out.append(("token_type", (layer["token_types"], h)))
        out += [("norm." + n, s) for n, s in norm_params(layer["norm"], h)]
    elif kind == "transformer":
        q = layer["heads"] * layer["head_dim"]
        kv = layer["kv_heads"] * layer["head_dim"]
        bias = layer["bias"]
        out += [("norm1." + n, s) for n, s in norm_params(layer["norm"], h)]
        out.append(("qkv.weight", (q + 2 * kv, h)))
        if bias:
            out.append(("qkv.bias", (q + 2 * kv,)))
        out.append(("out.weight", (h, q)))
        if bias:
            out.append(("out.bias", (h,)))
        out += [("norm2." + n, s) for n, s in norm_params(layer["norm"], h)]
        f = layer["ffn_hidden"]
        up = 2 * f if layer["activation"] == "swiglu" else f
        experts = layer["experts"]
        prefix = [f"expert{e}." for e in range(experts)] if experts > 1 else [""]
        if experts > 1:
            out.append(("router.weight", (experts, h)))
        for p in prefix:
            out.append((p + "fc1.weight", (up, h)))
            if bias:
                out.append((p + "fc1.bias", (up,)))
            out.append((p + "fc2.weight", (h, f)))
            if bias:
                out.append((p + "fc2.bias", (h,)))
    elif kind == "lm_head":
        v = vocab_rows or layer["vocab"]
        out += [("final_norm." + n, s) for n, s in norm_params(layer["final_norm"], h)]
        if layer["transform"]:
            out += [("transform.weight", (h, h)), ("transform.bias", (h,)),
                    ("transform_norm.weight", (h,)), ("transform_norm.bias", (h,))]
        if not layer["tied"]:
            out.append(("output.weight", (v, h)))
        if layer["output_bias"]:
            out.append(("output.bias", (v,)))
    else:
        raise SpecError(f"unknown layer kind {kind!r}")
    return out


def count(shapes):
    total = 0
    for _, shape in shapes:
        n = 1
        for d in shape:
            n *= d
        total += n
    return total


def summary(info, strategy):
    """What the harness will run, without torch (--dry-run)."""
    layers = []
    for layer in info["layers"]:
        layers.append({"index": layer["index"], "kind": layer["kind"],
                       "parameters": count(layer_parameters(layer)),
                       "hetplan_parameters": layer["parameters"]})
    pad = info.get("vocab_pad_multiple", 128)
    vocab = info["layers"][0]["vocab"]
    return {
        "model": info["name"],
        "parameters": sum(entry["parameters"] for entry in layers),
        "hetplan_parameters": info["parameters"],
        "padded_vocab": padded_vocab(vocab, strategy["tp"], pad),
        "microbatches": microbatches(strategy),
        "strategy": strategy,
        "layers": layers,
    }
