"""Timing without a shared CPU: contention measurement, best-of passes, latency.

Standard library only, so that every interpreter of `encode_peers.py` (ours
and the peers' venvs) times its variant with the same code. Nothing here is
hand-written that a library gives: `/proc/stat` busy time of the machine
against `getrusage` of this process is what tells "other processes used the
CPU meanwhile"; no benchmarking package reads both.
"""

import os
import resource
import statistics
import time

CONTENDED_CORES = 0.1
# `encode_peers.py --emulate-avx2` sets `EMULATE_AVX2_ENV` and the caps that
# oneDNN (TensorFlow's, torch's), torch's own kernels, MKL and OpenBLAS honor
# in its variants' environment; `cpu_flags` then reports what an AVX2-only
# CPU would (no AVX-512, AMX or AVX-VNNI), so the library picks its paths
# as it would there. Eigen's kernels in TensorFlow are not capped, nor are
# XNNPACK's (it reads the CPU itself), so the library's XNNPACK routes are
# turned off: the emulation times TensorFlow's graphs capped at AVX2.
EMULATE_AVX2_ENV = "ENCODE_PEERS_EMULATE_AVX2"
AVX2_CAPS = {
    EMULATE_AVX2_ENV: "1",
    "SBERT_KERAS_NO_XNNPACK": "1",
    "ONEDNN_MAX_CPU_ISA": "AVX2",
    "ATEN_CPU_CAPABILITY": "avx2",
    "MKL_ENABLE_INSTRUCTIONS": "AVX2",
    "OPENBLAS_CORETYPE": "Haswell",
}


def _cpu_ticks():
    """`(busy, steal)` clock ticks of all CPUs since boot, from `/proc/stat`, or `None`.

    Busy is user + nice + system + irq + softirq (guest time is inside user);
    idle, iowait and steal are left out.
    """
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    user, nice, system, _idle, _iowait, irq, softirq = fields[:7]
    steal = fields[7] if len(fields) > 7 else 0
    return user + nice + system + irq + softirq, steal


def _own_cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def cpu_flags():
    """The `flags` of the first CPU in `/proc/cpuinfo` (`avx512_vnni`, `amx_bf16`, ...), or an empty set.

    Under `EMULATE_AVX2_ENV`, without the flags an AVX2-only CPU lacks.
    """
    flags = set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        pass
    if os.environ.get(EMULATE_AVX2_ENV):
        flags = {f for f in flags if not f.startswith(("avx512", "amx")) and f != "avx_vnni"}
    return flags


def loadavg():
    """The 1-minute load average, or `None` where `/proc/loadavg` is absent."""
    try:
        with open("/proc/loadavg", encoding="ascii") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError):
        return None


class CpuMonitor:
    """How much CPU *other* processes used while this one was being timed.

    Each `with monitor:` block adds the machine's busy CPU time (`/proc/stat`)
    and this process's own CPU time (`getrusage`, all its threads) to
    running totals; `report()` gives the difference as an average number of
    cores that other processes kept busy over the measured wall time. A
    timing taken while that is above `threshold` cores is `contended`: the
    machine was shared and the figure is not a clean one.

    Example:
    ```python
    monitor = CpuMonitor()
    with monitor:
        run()
    monitor.report()  # {"other_cpu_cores": 0.01, "contended": False, ...}
    ```
    """

    def __init__(self, threshold=CONTENDED_CORES):
        self.threshold = threshold
        self.tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self.wall = self.busy = self.steal = self.own = 0.0
        self.loadavg_before = self.loadavg_after = None
        self.available = _cpu_ticks() is not None

    def __enter__(self):
        if self.loadavg_before is None:
            self.loadavg_before = loadavg()
        self._start = (time.perf_counter(), _cpu_ticks(), _own_cpu_seconds())
        return self

    def __exit__(self, *exc):
        wall, ticks, own = time.perf_counter(), _cpu_ticks(), _own_cpu_seconds()
        start_wall, start_ticks, start_own = self._start
        self.wall += wall - start_wall
        self.own += own - start_own
        if ticks is not None and start_ticks is not None:
            self.busy += (ticks[0] - start_ticks[0]) / self.tick
            self.steal += (ticks[1] - start_ticks[1]) / self.tick
        self.loadavg_after = loadavg()
        return False

    def report(self):
        """`{"other_cpu_cores", "steal_cores", "own_cpu_cores", "contended", ...}`."""
        if not self.available or self.wall <= 0:
            return {
                "other_cpu_cores": None,
                "contended": None,
                "contention_note": "no /proc/stat: contention not measured",
            }
        other = max(self.busy - self.own, 0.0) / self.wall
        steal = self.steal / self.wall
        return {
            "other_cpu_cores": round(other, 3),
            "steal_cores": round(steal, 3),
            "own_cpu_cores": round(self.own / self.wall, 3),
            "measured_seconds": round(self.wall, 3),
            "loadavg_before": self.loadavg_before,
            "loadavg_after": self.loadavg_after,
            "contended": bool(other > self.threshold or steal > self.threshold),
        }


def idle_check(seconds=2.0, threshold=CONTENDED_CORES):
    """`CpuMonitor.report()` of `seconds` of sleep: what the machine does without us."""
    monitor = CpuMonitor(threshold)
    with monitor:
        time.sleep(seconds)
    return monitor.report()


def timed_passes(run, texts, passes, monitor, warmup_texts=64, slow_seconds=60.0):
    """Best-of-`passes` timing of `run(texts)`, after a warm-up on `warmup_texts` texts.

    Every timed pass runs inside `monitor` (a `CpuMonitor`). A pass longer
    than `slow_seconds` ends the timing there (a slow variant keeps the whole
    benchmark within its time budget); `passes_run` says how many were taken.

    Returns:
        `(embeddings of the last pass, {"seconds", "pass_seconds", "passes_run", "texts_per_second"})`.
    """
    run(texts[:warmup_texts])
    seconds, out = [], None
    for _ in range(max(passes, 1)):
        with monitor:
            start = time.perf_counter()
            out = run(texts)
            seconds.append(time.perf_counter() - start)
        if seconds[-1] > slow_seconds:
            break
    best = min(seconds)
    return out, {
        "seconds": best,
        "pass_seconds": [round(s, 4) for s in seconds],
        "passes_run": len(seconds),
        "texts_per_second": len(texts) / best,
    }


def latency_ms(run_one, queries, monitor, warmup=10):
    """Median and p90 milliseconds of `run_one(query)`, one query at a time, after `warmup` calls."""
    for query in queries[:warmup]:
        run_one(query)
    times = []
    with monitor:
        for query in queries:
            start = time.perf_counter()
            run_one(query)
            times.append((time.perf_counter() - start) * 1e3)
    times.sort()
    return {
        "queries": len(times),
        "median_ms": statistics.median(times),
        "p90_ms": statistics.quantiles(times, n=10)[-1] if len(times) > 1 else times[0],
        "min_ms": times[0],
    }


def request_batches(texts, size):
    """`texts` cut in request order (no sorting across requests) into lists of `size`."""
    return [texts[start : start + size] for start in range(0, len(texts), size)]
