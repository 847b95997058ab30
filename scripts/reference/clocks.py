"""The GPU's SM clock while the harness times its steps: NVML through ctypes, read every 10 ms in
a thread, summarised in the form hetplan's calibration records (costmodel/clocks.h, `clocks` of a
measurement: docs/formats.md). A training step runs attention among its GEMMs; whether the board
held its clock down while it did is what the clock says (docs/benchmarks.md, item 15).

No NVML (no driver, a CPU run), no such device, or a failed reading: no record, and `reason`
says why.
"""

import ctypes
import statistics
import threading
import time

# NVML's clocks-event reason bits (nvml.h) and the names costmodel/clocks.cpp gives them
# (tests/python/test_clocks.py checks that the two lists agree).
REASONS = [(0x1, "gpu_idle"), (0x2, "applications_clocks"), (0x4, "sw_power_cap"),
           (0x8, "hw_slowdown"), (0x10, "sync_boost"), (0x20, "sw_thermal"),
           (0x40, "hw_thermal"), (0x80, "hw_power_brake"), (0x100, "display_clocks")]
POWER_THERMAL = 0x4 | 0x8 | 0x20 | 0x40 | 0x80
_NOT_SUPPORTED = 3  # NVML_ERROR_NOT_SUPPORTED
_CLOCK_SM = 1       # NVML_CLOCK_SM


def reason_names(bits):
    names = []
    for b in range(64):
        bit = 1 << b
        if bits & bit:
            names.append(next((n for v, n in REASONS if v == bit), f"{bit:#x}"))
    return names


def label(record):
    """A clock record as a table shows it: the median MHz, "*" where NVML named a power or
    thermal limit; "-" for none."""
    if not record:
        return "-"
    return f"{record['sm_mhz_median']:.0f}" + ("*" if record.get("power_thermal_samples") else "")


def summarize(readings):
    """readings: (sm_mhz, power_w or None, reason bits, read seconds) tuples -> the record."""
    if not readings:
        return None
    mhz = [r[0] for r in readings]
    power = [r[1] for r in readings if r[1] is not None]
    bits = 0
    for r in readings:
        bits |= r[2]
    out = {"samples": len(readings), "sm_mhz_median": statistics.median(mhz),
           "sm_mhz_min": min(mhz), "sm_mhz_max": max(mhz), "reasons": reason_names(bits),
           "power_thermal_samples": sum(1 for r in readings if r[2] & POWER_THERMAL),
           "read_us_median": statistics.median(r[3] for r in readings) * 1e6}
    if power:
        out["power_w_median"] = statistics.median(power)
    return out


class ClockSampler:
    """start() ... stop(): NVML readings of one device every `interval_s` in between, and one at
    each end. `device` is how NVML finds it: {"pci_bus_id": "0000:00:06.0"}, {"uuid":
    "GPU-..."} or {"index": 0}. stop() returns the record, or None with `reason` set."""

    def __init__(self, device, interval_s=0.01, library="libnvidia-ml.so.1"):
        self.interval_s = interval_s
        self.reason = ""
        self._readings = []
        self._thread = None
        self._stop = threading.Event()
        self._nvml = None
        self._handle = None
        try:
            self._nvml = ctypes.CDLL(library)
        except OSError as e:
            self.reason = f"NVML not loaded ({e})"
            return
        n = self._nvml
        n.nvmlErrorString.restype = ctypes.c_char_p
        if n.nvmlInit_v2() != 0:
            self.reason = "nvmlInit_v2 failed"
            self._nvml = None
            return
        handle = ctypes.c_void_p()
        if "pci_bus_id" in device:
            status = n.nvmlDeviceGetHandleByPciBusId_v2(device["pci_bus_id"].encode(),
                                                        ctypes.byref(handle))
        elif "uuid" in device:
            status = n.nvmlDeviceGetHandleByUUID(device["uuid"].encode(), ctypes.byref(handle))
        else:
            status = n.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(device["index"]),
                                                     ctypes.byref(handle))
        if status != 0:
            self.reason = f"no NVML device {device}: {self._error(status)}"
            self._close()
            return
        self._handle = handle
        self._reasons = getattr(n, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
            getattr(n, "nvmlDeviceGetCurrentClocksThrottleReasons", None)

    def _error(self, status):
        text = self._nvml.nvmlErrorString(status)
        return f"{text.decode() if text else 'unknown'} (NVML error {status})"

    def _close(self):
        if self._nvml is not None:
            self._nvml.nvmlShutdown()
            self._nvml = None

    @property
    def available(self):
        return self._handle is not None

    def read(self):
        """One reading, or None (and the sampler off) where the clock cannot be read."""
        if not self.available:
            return None
        t0 = time.perf_counter()
        mhz = ctypes.c_uint()
        status = self._nvml.nvmlDeviceGetClockInfo(self._handle, _CLOCK_SM, ctypes.byref(mhz))
        if status != 0:
            self.reason = f"nvmlDeviceGetClockInfo(SM): {self._error(status)}"
            self._handle = None
            return None
        bits = ctypes.c_ulonglong()
        if self._reasons is None or self._reasons(self._handle, ctypes.byref(bits)) != 0:
            bits.value = 0
        mw = ctypes.c_uint()
        status = self._nvml.nvmlDeviceGetPowerUsage(self._handle, ctypes.byref(mw))
        power = mw.value * 1e-3 if status == 0 else None
        return (float(mhz.value), power, int(bits.value), time.perf_counter() - t0)

    def _record(self):
        r = self.read()
        if r is not None:
            self._readings.append(r)

    def _loop(self):
        while not self._stop.wait(self.interval_s) and self.available:
            self._record()

    def start(self):
        self._readings = []
        if not self.available:
            return
        self._record()
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def stop(self):
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
            self._record()
        return summarize(self._readings)

    def close(self):
        self._handle = None
        self._close()


class StepClocks:
    """The SM clock of a block of timed steps on `device` (a torch device), as a context:
    `with StepClocks(torch, device) as c: ...`; then `c.record` is the record, or None with
    `c.note` saying why (empty off CUDA, where no clock is read). The sampler ends with the block,
    an exception too (an out-of-memory step)."""

    def __init__(self, torch, device, library="libnvidia-ml.so.1"):
        self.record = None
        self._sampler, self.note = device_sampler(torch, device, library)

    def __enter__(self):
        if self._sampler is not None:
            self._sampler.start()
        return self

    def __exit__(self, *exc):
        if self._sampler is not None:
            self.record = self._sampler.stop()
            self._sampler.close()
            if not self.record:
                self.note = "clocks not read: " + self._sampler.reason
        return False


def device_sampler(torch, device, library="libnvidia-ml.so.1"):
    """A ClockSampler of a torch device and "", or None and why not ("" off CUDA, where no clock
    is read). The sampler may still be unavailable: its `reason` says why."""
    if device.type != "cuda":
        return None, ""
    where = torch_device(torch, device)
    if where is None:
        return None, "clocks not read: NVML cannot tell this device from torch's"
    return ClockSampler(where, library=library), ""


def clocked(sampler, measure):
    """measure() with `sampler` (a ClockSampler of device_sampler, or None) reading the clock
    meanwhile: its value and the record, None where none was read. One sampler serves any number
    of measures (NVML is loaded once); close it after the last."""
    if sampler is None:
        return measure(), None
    sampler.start()
    try:
        value = measure()
    finally:
        record = sampler.stop()
    return value, record


def slowest_rank(records):
    """One record for a step several GPUs ran, from each rank's (None where a rank read none):
    the lowest median's, as the slowest-clocked GPU sets the step; and a note with every rank's
    median. (None, note) when no rank read one."""
    medians = ", ".join(label(r) for r in records)
    read = [r for r in records if r]
    if not read:
        return None, ""
    note = f"SM clock median by rank {medians} MHz; the record is the lowest's"
    return min(read, key=lambda r: r["sm_mhz_median"]), note


def torch_device(torch, device):
    """How NVML finds a torch CUDA device: its PCI address where torch gives it, else its UUID,
    else its index when CUDA_VISIBLE_DEVICES does not renumber devices."""
    import os
    props = torch.cuda.get_device_properties(device)
    if all(hasattr(props, a) for a in ("pci_domain_id", "pci_bus_id", "pci_device_id")):
        return {"pci_bus_id": f"{props.pci_domain_id:08x}:{props.pci_bus_id:02x}:"
                              f"{props.pci_device_id:02x}.0"}
    if getattr(props, "uuid", None) is not None:
        return {"uuid": f"GPU-{props.uuid}"}
    if "CUDA_VISIBLE_DEVICES" not in os.environ:
        return {"index": device.index if device.index is not None else 0}
    return None
