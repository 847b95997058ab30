"""scripts/sass_loops.py on a small hand-written listing in nvdisasm's format: loops found by their
branch back, an MUFU a forward branch skips counted as under a branch, the fewest and most
instructions per trip, spills and HGMMAs counted, and a clear refusal of text that is not nvdisasm
output. scripts/disasm_cubin.py's decoding of what an old nvdisasm skips (VIADD).

Run: python3 -m unittest tests/python/test_sass_loops.py
"""

import contextlib
import io
import json
import os
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import sass_loops  # noqa: E402

LISTING = """
        .type           _Z6kernelPf,@function
_Z6kernelPf:
        /*0000*/                   S2R R0, SR_TID.X ;
.L_x_1:
        /*0010*/                   HGMMA.64x64x16.F32.BF16 R24, gdesc[UR4], RZ ;
        /*0020*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;
        /*0030*/              @P0  BRA `(.L_x_2) ;
        /*0040*/                   LDS R3, [R2] ;
        /*0050*/                   MUFU.EX2 R4, R3 ;
.L_x_2:
        /*0060*/                   MUFU.EX2 R5, R24 ;
        /*0070*/                   LDL R6, [R1] ;
        /*0080*/                   STL [R1+0x4], R6 ;
        /*0090*/              @!P1 BRA `(.L_x_1) ;
        /*00a0*/                   EXIT ;
.L_x_3:
        /*00b0*/                   BRA `(.L_x_3);
        .type           _Z5otherv,@function
_Z5otherv:
        /*0000*/                   EXIT ;
"""


def run(*args):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        sass_loops.main(list(args))
    return out.getvalue()


class DisasmCubin(unittest.TestCase):
    def test_viadd_is_decoded_from_its_words(self):
        import disasm_cubin
        # Words of 'VIADD R3, R0, 0x100' and of the uniform-register form from a CUDA 13.0 cubin
        # (sm_90a) that nvdisasm 11.8 leaves out.
        self.assertEqual(disasm_cubin.decode(0x0000010000037836, 0x002FE20000000000),
                         "VIADD R3, R0, 0x100")
        self.assertEqual(disasm_cubin.decode(0x00000021150C7C36, 0x040FE40008000000),
                         "VIADD R12, R21, UR33 /* bit 91 set */")
        self.assertIn("UNDECODED.0x999", disasm_cubin.decode(0x999, 0))
        # A guard predicate: @!P2 is bits 12-15 = 0b1010.
        self.assertEqual(disasm_cubin.decode(0x000001000003A836, 0), "@!P2 VIADD R3, R0, 0x100")


class SassLoops(unittest.TestCase):
    def setUp(self):
        fd, self.path = tempfile.mkstemp(suffix=".sass")
        with os.fdopen(fd, "w") as f:
            f.write(LISTING)

    def tearDown(self):
        os.unlink(self.path)

    def test_a_loop_is_a_branch_back_and_its_costs_are_counted(self):
        report = json.loads(run(self.path, "--min", "2", "--json", "--kernel", "kernel"))
        self.assertEqual([k["mangled"] for k in report], ["_Z6kernelPf"])
        self.assertEqual(report[0]["instructions"], 12)  # 0x00 .. 0xb0
        loops = report[0]["loops"]
        # The self-branch at 0xb0 is a loop of one instruction, under --min 2.
        self.assertEqual(len(loops), 1)
        lp = loops[0]
        self.assertEqual(lp["first_address"], 0x10)
        self.assertEqual(lp["instructions"], 9)  # 0x10 .. 0x90
        self.assertEqual(lp["branches"], 2)
        self.assertEqual(lp["mufu"], 2)
        self.assertEqual(lp["mufu_under_branch"], 1)  # the one @P0 skips, not the one after
        self.assertEqual((lp["spill_loads"], lp["spill_stores"]), (1, 1))
        self.assertEqual(lp["hgmma"], 1)
        self.assertEqual(lp["per_hgmma"], 8.0)
        self.assertEqual(lp["opcodes"]["WARPGROUP"], 1)
        # @P0 taken skips the LDS and the first MUFU: 7 of the 9 instructions; not taken, all 9.
        self.assertEqual((lp["shortest_trip"], lp["longest_trip"]), (7, 9))

    def test_opcode_drops_predicate_and_modifiers(self):
        self.assertEqual(sass_loops.opcode("@!P3 LDS.64 R2, [R3]"), "LDS")
        self.assertEqual(sass_loops.opcode("@UP0 UIADD3 UR4, UR4, 0x1, URZ"), "UIADD3")
        self.assertEqual(sass_loops.opcode("HGMMA.64x128x16.F32.BF16 R24, R200"), "HGMMA")

    def test_text_that_is_not_nvdisasm_output_is_refused_by_name(self):
        with open(self.path, "w") as f:
            f.write("not a listing\n")
        with self.assertRaises(SystemExit) as cm:
            run(self.path)
        self.assertIn("no '.type NAME,@function'", str(cm.exception))
        self.assertIn(self.path, str(cm.exception))

    def test_an_unknown_kernel_is_refused(self):
        with self.assertRaises(SystemExit) as cm:
            run(self.path, "--kernel", "nope")
        self.assertIn("no kernel matches", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
