"""hetplan's own fused RMSNorm, SwiGLU and rotary kernels (kernels/), for the harness's LLaMA-style
blocks.

Megatron-LM runs RMSNorm, SwiGLU and rotary embedding as one fused kernel each way (Transformer
Engine, its bias-SwiGLU and RoPE fusions), and hetplan's cost model counts those kernels' bytes.
Eager PyTorch runs them as many operators each: 3.6x the bytes forward and 8.5x backward for a
LLaMA block
(docs/benchmarks.md, "Reference harness against the cost model"), so that the harness measured
LLaMA-style blocks far slower than the frameworks run them. On a GPU the harness therefore calls
the kernels hetplan calibrates, through the C interface of libhetplan_kernels_c.so
(kernels/c_api/hetplan_kernels_c.h), on PyTorch's current stream and with its caching allocator.

Where the library is found: $HETPLAN_KERNELS_LIB (a path; "off" turns the kernels off), else
kernels/libhetplan_kernels_c.so in $HETPLAN_BUILD_DIR, build/ or build-h100/, else
out/gpu-session/bundle/bin/ (where scripts/gpu_session.sh unpacks the GPU bundle). Without it, or on the CPU, the eager operators run, and
`implementation()` says which ran (the harness writes it into its measurement's notes).
"""

import ctypes
import os
from pathlib import Path

import torch

ABI_VERSION = 2
HK_DTYPES = {torch.float32: 0, torch.bfloat16: 1}
_ROOT = Path(__file__).resolve().parents[2]
_NAME = "libhetplan_kernels_c.so"

_state = {"loaded": False, "lib": None, "why": ""}


def candidates():
    """Where the library is looked for, in order."""
    env = os.environ.get("HETPLAN_KERNELS_LIB")
    if env:
        return [Path(env)]
    dirs = [os.environ.get("HETPLAN_BUILD_DIR"), "build", "build-h100"]
    paths = [_ROOT / d / "kernels" / _NAME for d in dirs if d]
    return paths + [_ROOT / "out" / "gpu-session" / "bundle" / "bin" / _NAME]


def _bind(lib):
    c_int, c_i64, c_void, c_float = ctypes.c_int, ctypes.c_int64, ctypes.c_void_p, ctypes.c_float
    f32p = ctypes.POINTER(ctypes.c_float)
    lib.hk_abi_version.restype = c_int
    lib.hk_last_error.restype = ctypes.c_char_p
    lib.hk_norm_weight_workspace_bytes.restype = ctypes.c_size_t
    lib.hk_norm_weight_workspace_bytes.argtypes = [c_i64, c_int]
    sigs = {
        "hk_rmsnorm_forward": [c_int, c_void, c_void, c_void, f32p, c_i64, c_int, c_float, c_void],
        "hk_rmsnorm_backward_input": [c_int, c_void, c_void, f32p, c_void, c_void, c_i64, c_int,
                                      c_void],
        "hk_rmsnorm_backward_weight": [c_int, c_void, f32p, c_void, f32p, c_i64, c_int, c_void,
                                       c_void],
        "hk_swiglu_forward": [c_int, c_void, c_void, c_i64, c_int, c_void],
        "hk_swiglu_backward": [c_int, c_void, c_void, c_void, c_i64, c_int, c_void],
        "hk_rotary_forward": [c_int, c_void, c_i64, c_void, f32p, f32p, c_i64, c_int, c_int, c_int,
                              c_void],
        "hk_rotary_backward": [c_int, c_void, c_void, f32p, f32p, c_i64, c_int, c_int, c_int,
                               c_void],
    }
    for name, args in sigs.items():
        fn = getattr(lib, name)
        fn.restype = c_int
        fn.argtypes = args


def library():
    """The loaded library, or None (then `why()` says why)."""
    if _state["loaded"]:
        return _state["lib"]
    if os.environ.get("HETPLAN_KERNELS_LIB", "").lower() == "off":
        _state.update(loaded=True, why="HETPLAN_KERNELS_LIB=off")
        return None
    tried = candidates()
    path = next((p for p in tried if p.is_file()), None)
    if path is None:
        # A library named but missing fails every call, never falls back to the eager operators.
        if os.environ.get("HETPLAN_KERNELS_LIB"):
            raise FileNotFoundError(f"HETPLAN_KERNELS_LIB: {tried[0]} does not exist")
        _state.update(loaded=True,
                      why=f"{_NAME} not found (looked in {', '.join(str(p) for p in tried)})")
        return None
    lib = ctypes.CDLL(str(path))
    _bind(lib)
    version = lib.hk_abi_version()
    if version != ABI_VERSION:
        raise RuntimeError(f"{path}: C interface version {version}, this harness expects "
                           f"{ABI_VERSION}: rebuild hetplan (bash scripts/build.sh)")
    _state.update(loaded=True, lib=lib, path=path)
    return lib


def why():
    return _state["why"]


def reset():
    """Forget the loaded library (tests change HETPLAN_KERNELS_LIB)."""
    _state.update(loaded=False, lib=None, why="")


def active(t):
    """True when `t`'s operations run hetplan's kernels: a CUDA fp32/bf16 tensor and the library."""
    return t.is_cuda and t.dtype in HK_DTYPES and library() is not None


def implementation(device):
    """What the harness's RMSNorm, SwiGLU and rotary run on `device`, in words for the notes."""
    if torch.device(device).type != "cuda":
        return "RMSNorm, SwiGLU and rotary as eager PyTorch operators (not a GPU)"
    if library() is None:
        return f"RMSNorm, SwiGLU and rotary as eager PyTorch operators ({why()})"
    return f"RMSNorm, SwiGLU and rotary by hetplan's fused kernels ({_state['path']})"


# Told of every kernel launched, with the bytes it moves (scripts/reference/optrace.py listens).
observers = []


def traffic(kernel, rows, cols, itemsize):
    """Bytes `kernel` reads and writes over [rows, cols] (cols: the hidden width for the norms, f
    for SwiGLU, heads x head_dim for rotary) of elements of `itemsize` bytes; fp32 statistics,
    weights of x's type."""
    elems = rows * cols * itemsize
    return {"hk_rmsnorm_forward": 2 * elems + 4 * rows + cols * itemsize,  # x, gamma -> y, rstd
            "hk_rmsnorm_backward_input": 3 * elems + 4 * rows + cols * itemsize,  # x, dy -> dx
            "hk_rmsnorm_backward_weight": 2 * elems + 4 * rows,  # x, dy -> column sums
            "hk_swiglu_forward": 3 * elems,  # gate, up -> out
            "hk_swiglu_backward": 5 * elems,  # gate, up, dout -> dgate, dup
            "hk_rotary_forward": 2 * elems,  # x -> y (the tables stay in cache)
            "hk_rotary_backward": 2 * elems}[kernel]  # dy -> dx


def announce(kernel, rows, cols, t):
    """Tells the observers that `kernel` ran over [rows, cols] elements of t's type."""
    for observe in observers:
        observe(kernel, traffic(kernel, rows, cols, t.element_size()))


def _check(status, lib):
    if status != 0:
        raise RuntimeError(lib.hk_last_error().decode(errors="replace"))


def _stream(t):
    return ctypes.c_void_p(torch.cuda.current_stream(t.device).cuda_stream)


def _f32(t):
    return ctypes.cast(t.data_ptr(), ctypes.POINTER(ctypes.c_float))


def rmsnorm_forward(x, weight, eps):
    """y, rstd ([rows] fp32) of RMSNorm over the last dimension; weight of x's dtype."""
    lib = library()
    x = x.contiguous()
    rows, cols = x.numel() // x.shape[-1], x.shape[-1]
    y = torch.empty_like(x)
    rstd = torch.empty(rows, dtype=torch.float32, device=x.device)
    _check(lib.hk_rmsnorm_forward(HK_DTYPES[x.dtype], x.data_ptr(), weight.contiguous().data_ptr(),
                                  y.data_ptr(), _f32(rstd), rows, cols, eps, _stream(x)), lib)
    announce("hk_rmsnorm_forward", rows, cols, x)
    return y, rstd


def rmsnorm_backward(dy, x, weight, rstd):
    """dx (x's dtype) and dweight (weight's dtype) from the saved x and rstd."""
    lib = library()
    dy, x = dy.contiguous(), x.contiguous()
    rows, cols = x.numel() // x.shape[-1], x.shape[-1]
    code, stream = HK_DTYPES[x.dtype], _stream(x)
    dx = torch.empty_like(x)
    _check(lib.hk_rmsnorm_backward_input(code, x.data_ptr(), weight.contiguous().data_ptr(),
                                         _f32(rstd), dy.data_ptr(), dx.data_ptr(), rows, cols,
                                         stream), lib)
    announce("hk_rmsnorm_backward_input", rows, cols, x)
    dweight = torch.empty(cols, dtype=torch.float32, device=x.device)
    workspace = torch.empty(lib.hk_norm_weight_workspace_bytes(rows, cols), dtype=torch.uint8,
                            device=x.device)
    _check(lib.hk_rmsnorm_backward_weight(code, x.data_ptr(), _f32(rstd), dy.data_ptr(),
                                          _f32(dweight), rows, cols, workspace.data_ptr(), stream),
           lib)
    announce("hk_rmsnorm_backward_weight", rows, cols, x)
    return dx, dweight.to(weight.dtype)


def swiglu_forward(x):
    """silu(gate) * up over x = [..., 2 f] (gate, then up)."""
    lib = library()
    x = x.contiguous()
    f = x.shape[-1] // 2
    rows = x.numel() // (2 * f)
    y = torch.empty(*x.shape[:-1], f, dtype=x.dtype, device=x.device)
    _check(lib.hk_swiglu_forward(HK_DTYPES[x.dtype], x.data_ptr(), y.data_ptr(), rows, f,
                                 _stream(x)), lib)
    announce("hk_swiglu_forward", rows, f, x)
    return y


def swiglu_backward(dy, x):
    """dx ([..., 2 f]) from dy ([..., f]) and the saved input."""
    lib = library()
    dy, x = dy.contiguous(), x.contiguous()
    f = x.shape[-1] // 2
    rows = x.numel() // (2 * f)
    dx = torch.empty_like(x)
    _check(lib.hk_swiglu_backward(HK_DTYPES[x.dtype], x.data_ptr(), dy.data_ptr(), dx.data_ptr(),
                                  rows, f, _stream(x)), lib)
    announce("hk_swiglu_backward", rows, f, x)
    return dx


def rotary_forward(x, cos, sin):
    """x ([batch, seq, heads, head_dim]) rotated (rotate-half) by the fp32 [seq, head_dim / 2]
    tables into a new contiguous tensor. x may be Q or K inside a fused QKV output (heads and
    dims contiguous, tokens evenly spaced): it is read in place."""
    lib = library()
    b, s, heads, d = x.shape
    in_place = x.stride(3) == 1 and x.stride(2) == d and x.stride(0) == s * x.stride(1)
    if not in_place:
        x = x.contiguous()
    y = torch.empty(b, s, heads, d, dtype=x.dtype, device=x.device)
    _check(lib.hk_rotary_forward(HK_DTYPES[x.dtype], x.data_ptr(), x.stride(1), y.data_ptr(),
                                 _f32(cos), _f32(sin), b * s, heads, d, s, _stream(x)), lib)
    announce("hk_rotary_forward", b * s, heads * d, x)
    return y


def rotary_backward(dy, cos, sin):
    """dx (contiguous) from dy: the rotation by the opposite angle."""
    lib = library()
    dy = dy.contiguous()
    b, s, heads, d = dy.shape
    dx = torch.empty_like(dy)
    _check(lib.hk_rotary_backward(HK_DTYPES[dy.dtype], dy.data_ptr(), dx.data_ptr(), _f32(cos),
                                  _f32(sin), b * s, heads, d, s, _stream(dy)), lib)
    announce("hk_rotary_backward", b * s, heads * d, dy)
    return dx
