#!/usr/bin/env python3
"""Disassembles a cubin written by CUDA 12.8+ (here 13.0) with an older nvdisasm (Debian's, CUDA
11.8), which is all the build machine has. scripts/sass.sh calls it.

    python3 scripts/disasm_cubin.py CUBIN NVDISASM > out.sass

Two things stand between the two:

1. The ELF header. CUDA 12.8+ writes OS/ABI 0x41, ABI version 8 and the SM in bits 8-15 of
   e_flags; the old nvdisasm reads only OS/ABI 0x33, version 7 and e_flags sm | 0x500 | sm << 16.
   The header of a copy is rewritten; no code byte changes for this.
2. Instructions the old nvdisasm does not know. It leaves them out of its listing without a word
   (and with them any label that pointed at them, so a branch's target disappears). For sm_90
   code from CUDA 13.0 that is VIADD (an integer add: opcode bits 0-8 0x036; 0x836 with an
   immediate, 0xc36 with a uniform register), about 4% of kernels/'s instructions. So: a first
   pass finds the 16-byte slots the listing skips, those slots of the copy become NOPs (their
   control bits, which `nvdisasm -c` does not print, are lost), a second pass lists everything
   with its labels, and each such NOP is printed as the instruction decoded here (VIADD) or as
   `UNDECODED` with its raw words. Operands of VIADD: Rd bits 16-23, Ra 24-31, then a 32-bit
   immediate (bits 32-63) or a uniform register (bits 32-39); predicate bits 12-15. A set bit 91
   of the 0xc36 form is printed as a raw mark, its meaning (negation, most likely) unconfirmed.
"""
import os
import re
import struct
import subprocess
import sys
import tempfile

_INSTR = re.compile(r"^(\s+/\*)([0-9a-f]{4,})(\*/\s+)(.*?)(\s*;.*)$")
_SECTION = re.compile(r"^\s*\.section\s+([^,\s]+)")
_NOP = (0x7918, 0x000FC00000000000)  # NOP as ptxas writes it (sm_90)


def sections(elf):
    """{name: (file offset, size)} of the cubin's sections."""
    shoff = struct.unpack_from("<Q", elf, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    heads = [struct.unpack_from("<IIQQQQ", elf, shoff + i * shentsize) for i in range(shnum)]
    strtab = heads[shstrndx][4]
    out = {}
    for name, _, _, _, off, size in heads:
        end = elf.index(b"\0", strtab + name)
        out[elf[strtab + name:end].decode()] = (off, size)
    return out


def old_header(elf):
    if elf[:4] != b"\x7fELF" or elf[4] != 2:
        sys.exit("disasm_cubin.py: not a 64-bit ELF cubin")
    if elf[7] == 0x41 and elf[8] == 8:
        sm = (struct.unpack_from("<I", elf, 0x30)[0] >> 8) & 0xFF
        elf[7], elf[8] = 0x33, 7
        struct.pack_into("<I", elf, 0x30, sm | 0x500 | (sm << 16))


def listed(text):
    """{section name: set of addresses the listing shows}."""
    out, current = {}, None
    for line in text.splitlines():
        m = _SECTION.match(line)
        if m:
            current = out.setdefault(m.group(1), set())
            continue
        m = _INSTR.match(line)
        if m and current is not None:
            current.add(int(m.group(2), 16))
    return out


def decode(lo, hi):
    """Text for an instruction the old nvdisasm does not know."""
    pred = (lo >> 12) & 0xF
    guard = "" if pred & 7 == 7 and not pred & 8 else f"@{'!' if pred & 8 else ''}P{pred & 7} "
    reg = lambda r: "RZ" if r == 255 else f"R{r}"  # noqa: E731
    op = lo & 0x1FF
    form = (lo >> 9) & 0x7
    d, a = (lo >> 16) & 0xFF, (lo >> 24) & 0xFF
    if op == 0x036 and form == 0x4:
        imm = (lo >> 32) & 0xFFFFFFFF
        return f"{guard}VIADD {reg(d)}, {reg(a)}, {imm:#x}"
    if op == 0x036 and form == 0x6:
        ur = (lo >> 32) & 0xFF
        mark = f" /* bit 91 set */" if hi >> 27 & 1 else ""
        return f"{guard}VIADD {reg(d)}, {reg(a)}, {'URZ' if ur == 63 else f'UR{ur}'}{mark}"
    return f"{guard}UNDECODED.{lo & 0xFFF:#05x} /* {lo:#018x} {hi:#018x} */"


def run(nvdisasm, elf):
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(elf)
        path = f.name
    try:
        r = subprocess.run([nvdisasm, "-c", path], capture_output=True, text=True)
    finally:
        os.unlink(path)
    if r.returncode != 0:
        sys.exit(f"disasm_cubin.py: {nvdisasm} failed: {r.stderr.strip()}")
    return r.stdout


def main(argv):
    if len(argv) != 3:
        sys.exit(__doc__.strip().splitlines()[3].strip())
    elf = bytearray(open(argv[1], "rb").read())
    old_header(elf)
    secs = sections(elf)
    first = listed(run(argv[2], elf))
    patched = {}  # section -> {address: text}
    for name, shown in first.items():
        if name not in secs or not name.startswith(".text"):
            continue
        off, size = secs[name]
        for addr in range(0, size, 16):
            if addr in shown:
                continue
            lo, hi = struct.unpack_from("<QQ", elf, off + addr)
            patched.setdefault(name, {})[addr] = decode(lo, hi)
            struct.pack_into("<QQ", elf, off + addr, *_NOP)
    current = None
    out = []
    for line in run(argv[2], elf).splitlines():
        m = _SECTION.match(line)
        if m:
            current = patched.get(m.group(1), {})
        m = _INSTR.match(line)
        if m and current and int(m.group(2), 16) in current:
            line = m.group(1) + m.group(2) + m.group(3) + current[int(m.group(2), 16)] + " ;"
        out.append(line)
    sys.stdout.write("\n".join(out) + "\n")
    n = sum(len(v) for v in patched.values())
    undecoded = sum(1 for v in patched.values() for t in v.values() if "UNDECODED" in t)
    print(f"disasm_cubin.py: {n} instructions the disassembler skipped were decoded here "
          f"({undecoded} left UNDECODED)", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv)
