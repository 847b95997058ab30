"""scripts/reference/clocks.py: the harness's SM clock readings (NVML through ctypes), against the
stand-in library tests/fake_nvml (HETPLAN_FAKE_NVML, set by ctest), and its reason names against
costmodel/clocks.cpp's.

Run: HETPLAN_FAKE_NVML=build/tests/libhetplan_fake_nvml.so python3 -m unittest tests/python/test_clocks.py
"""

import ctypes
import os
import re
import sys
import time
import types
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

from reference import clocks  # noqa: E402

FAKE = os.environ.get("HETPLAN_FAKE_NVML", "")
BUS = {"pci_bus_id": "0000:00:06.0"}  # the stand-in's one device


class ReasonsTest(unittest.TestCase):
    def test_names_and_bits_are_costmodels(self):
        with open(os.path.join(ROOT, "costmodel", "clocks.h")) as f:
            header = f.read()
        with open(os.path.join(ROOT, "costmodel", "clocks.cpp")) as f:
            source = f.read()
        bits = {name: int(v, 16) for name, v in
                re.findall(r"constexpr uint64_t (kClockReason\w+) = (0x[0-9a-f]+);", header)}
        names = dict(re.findall(r"\{(kClockReason\w+), \"(\w+)\"\}", source))
        self.assertEqual(len(names), 9)
        self.assertEqual(sorted((bits[k], n) for k, n in names.items()), sorted(clocks.REASONS))
        self.assertEqual(clocks.reason_names(0x4 | 0x40 | 0x200),
                         ["sw_power_cap", "hw_thermal", "0x200"])

    def test_summary_has_the_calibrations_form(self):
        record = clocks.summarize([(1980.0, 600.0, 0, 40e-6), (1755.0, None, 0x4, 60e-6),
                                   (1620.0, 700.0, 0x4 | 0x8, 50e-6)])
        self.assertEqual(record, {"samples": 3, "sm_mhz_median": 1755.0, "sm_mhz_min": 1620.0,
                                  "sm_mhz_max": 1980.0, "reasons": ["sw_power_cap", "hw_slowdown"],
                                  "power_thermal_samples": 2, "read_us_median": 50.0,
                                  "power_w_median": 650.0})
        self.assertIsNone(clocks.summarize([]))


@unittest.skipUnless(FAKE and os.path.exists(FAKE), "HETPLAN_FAKE_NVML not built")
class SamplerTest(unittest.TestCase):
    def setUp(self):
        self.fake = ctypes.CDLL(FAKE)
        self.fake.fake_nvml_set.argtypes = [ctypes.c_uint, ctypes.c_uint, ctypes.c_ulonglong,
                                            ctypes.c_int]

    def tearDown(self):
        self.fake.fake_nvml_set(1980, 0, 0, -1)

    def test_reads_while_started(self):
        self.fake.fake_nvml_set(1755, 650500, 0x4, -1)
        s = clocks.ClockSampler(BUS, interval_s=0.005, library=FAKE)
        self.assertTrue(s.available, s.reason)
        s.start()
        time.sleep(0.05)
        record = s.stop()
        s.close()
        self.assertGreaterEqual(record["samples"], 3)  # one at each end, more in between
        self.assertEqual(record["sm_mhz_median"], 1755.0)
        self.assertEqual(record["power_w_median"], 650.5)
        self.assertEqual(record["reasons"], ["sw_power_cap"])
        self.assertEqual(record["power_thermal_samples"], record["samples"])

    def test_no_device_and_a_lost_gpu_say_why(self):
        s = clocks.ClockSampler({"pci_bus_id": "0000:3b:00.0"}, library=FAKE)
        self.assertFalse(s.available)
        self.assertEqual(s.reason,
                         "no NVML device {'pci_bus_id': '0000:3b:00.0'}: Not Found (NVML error 6)")
        s.start()
        self.assertIsNone(s.stop())
        self.fake.fake_nvml_set(1980, 0, 0, 2)  # two readings, then the GPU is lost
        s = clocks.ClockSampler(BUS, interval_s=0.002, library=FAKE)
        s.start()
        time.sleep(0.03)
        record = s.stop()
        self.assertEqual(record["samples"], 2)
        self.assertNotIn("power_w_median", record)  # the stand-in reports no power by default
        self.assertEqual(s.reason, "nvmlDeviceGetClockInfo(SM): GPU is lost (NVML error 15)")
        missing = clocks.ClockSampler(BUS, library="/nonexistent/libnvidia-ml.so.1")
        self.assertTrue(missing.reason.startswith("NVML not loaded ("), missing.reason)

    def test_timed_steps_get_a_record_or_say_why_not(self):
        self.fake.fake_nvml_set(1755, 0, 0x4, -1)
        cuda = types.SimpleNamespace(type="cuda", index=0)
        with clocks.StepClocks(FakeTorch(bus=0), cuda, library=FAKE) as c:
            time.sleep(0.03)
        self.assertEqual(c.record["sm_mhz_median"], 1755.0)
        self.assertEqual(c.note, "")
        # An exception in the block (an out-of-memory step) still ends the sampler.
        with self.assertRaises(MemoryError):
            with clocks.StepClocks(FakeTorch(bus=0), cuda, library=FAKE) as c:
                raise MemoryError
        self.assertEqual(c.record["sm_mhz_median"], 1755.0)
        with clocks.StepClocks(FakeTorch(bus=0x3b), cuda, library=FAKE) as c:  # no such device
            pass
        self.assertIsNone(c.record)
        self.assertEqual(c.note, "clocks not read: no NVML device {'pci_bus_id': "
                                 "'00000000:3b:06.0'}: Not Found (NVML error 6)")
        with clocks.StepClocks(FakeTorch(bus=0), types.SimpleNamespace(type="cpu"),
                               library=FAKE) as c:  # the CPU: nothing read, nothing to say
            pass
        self.assertEqual((c.record, c.note), (None, ""))


    def test_one_sampler_reads_the_clock_of_each_measure(self):
        cuda = types.SimpleNamespace(type="cuda", index=0)

        def measure():
            time.sleep(0.03)
            return 0.0042

        sampler, note = clocks.device_sampler(FakeTorch(bus=0), cuda, library=FAKE)
        self.assertEqual(note, "")
        self.fake.fake_nvml_set(1755, 0, 0x4, -1)
        value, record = clocks.clocked(sampler, measure)
        self.assertEqual(value, 0.0042)
        self.assertEqual(record["sm_mhz_median"], 1755.0)
        self.assertEqual(record["reasons"], ["sw_power_cap"])
        self.fake.fake_nvml_set(1980, 0, 0, -1)  # the same sampler, the next measure
        self.assertEqual(clocks.clocked(sampler, measure)[1]["sm_mhz_median"], 1980.0)
        sampler.close()
        # No such device: the value still, no record, and the sampler says why.
        sampler, note = clocks.device_sampler(FakeTorch(bus=0x3b), cuda, library=FAKE)
        value, record = clocks.clocked(sampler, measure)
        self.assertEqual(value, 0.0042)
        self.assertIsNone(record)
        self.assertTrue(sampler.reason.startswith("no NVML device"), sampler.reason)
        # The CPU: no sampler, nothing to say.
        self.assertEqual(clocks.device_sampler(FakeTorch(bus=0), types.SimpleNamespace(type="cpu"),
                                               library=FAKE), (None, ""))
        self.assertEqual(clocks.clocked(None, measure), (0.0042, None))


class FakeTorch:
    """What StepClocks asks of torch: a device's PCI address."""

    def __init__(self, bus):
        props = types.SimpleNamespace(pci_domain_id=0, pci_bus_id=bus, pci_device_id=6)
        self.cuda = types.SimpleNamespace(get_device_properties=lambda device: props)


def import_attention_bench():
    """scripts/bench_attention_torch.py as a module, or None where torch is missing."""
    try:
        import bench_attention_torch
    except ImportError:
        return None
    return bench_attention_torch


class AttentionBenchClocksTest(unittest.TestCase):
    def test_the_after_gemm_factor_is_set_against_the_clock_change(self):
        bench = import_attention_bench()
        if bench is None:
            self.skipTest("torch not importable")
        alone = {"sm_mhz_median": 1980.0, "power_thermal_samples": 0}
        after = {"sm_mhz_median": 1755.0, "power_thermal_samples": 3}
        t = {"clocks_fwd_bwd_s": alone, "clocks_fwd_bwd_s_after_gemm": after}
        self.assertEqual(bench.clock_change(t, "fwd_bwd_s"),
                         "; SM clock 1980 -> 1755* MHz (x1.128 if time follows 1/clock)")
        self.assertEqual(bench.clock_change({"clocks_fwd_bwd_s": alone}, "fwd_bwd_s"), "")


class RanksTest(unittest.TestCase):
    def test_the_slowest_clocked_rank_is_the_record(self):
        fast = {"sm_mhz_median": 1980.0, "power_thermal_samples": 0}
        slow = {"sm_mhz_median": 1755.0, "power_thermal_samples": 4}
        record, note = clocks.slowest_rank([fast, None, slow])
        self.assertIs(record, slow)
        self.assertEqual(note, "SM clock median by rank 1980, -, 1755* MHz; the record is the "
                               "lowest's")
        self.assertEqual(clocks.slowest_rank([None, None]), (None, ""))


if __name__ == "__main__":
    unittest.main()
