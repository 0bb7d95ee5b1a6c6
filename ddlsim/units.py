"""Unit conversions, applied once when a file is loaded.

Inside ddlsim every quantity is in SI base units: seconds, bytes, bytes/second, FLOP, FLOP/s.
Data files use human units in their key names (``bandwidth_GBps``, ``latency_us``,
``peak_fp32_TFLOPS``); these helpers convert them.
"""

from __future__ import annotations

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB

US_PER_S = 1e6
MS_PER_S = 1e3


def us_to_s(value_us: float) -> float:
    """Microseconds to seconds."""
    return value_us / US_PER_S


def ms_to_s(value_ms: float) -> float:
    """Milliseconds to seconds."""
    return value_ms / MS_PER_S


def gbps_to_Bps(value_Gbps: float) -> float:
    """Gigabits per second (network convention, 10^9 bit/s) to bytes per second."""
    return value_Gbps * 1e9 / 8


def GBps_to_Bps(value_GBps: float) -> float:
    """Gigabytes per second (10^9 B/s, as vendors quote memory and link bandwidth) to B/s."""
    return value_GBps * 1e9


def tflops_to_flops(value_TFLOPS: float) -> float:
    """TFLOP/s (10^12) to FLOP/s."""
    return value_TFLOPS * 1e12


def mib_to_bytes(value_MiB: float) -> int:
    """Mebibytes (Horovod's HOROVOD_FUSION_THRESHOLD is given in bytes, documented in MiB)."""
    return round(value_MiB * MiB)


BYTES_PER_ELEMENT = {"fp32": 4, "fp16": 2}
