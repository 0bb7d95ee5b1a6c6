"""Collective benchmark output -> :class:`Measurement` (sizes, times and what the log says).

Formats, recognised by their content:

- **nccl-tests** (``all_reduce_perf``, ``all_gather_perf``, ``reduce_scatter_perf``) as they
  print: the ``# nccl-tests version ... nccl-library=NNNNN`` header, ``# Collective test
  starting: X_perf``, one ``#  Rank  N Group  G Pid  P on HOST device  D [BUS] NAME`` line per
  rank, NCCL's own ``NCCL version X.Y.Z`` and ``NCCL INFO`` lines where ``NCCL_DEBUG`` printed
  them (environment echo: ``NCCL_ALGO``, ``NCCL_PROTO``, ``NCCL_TREE_THRESHOLD``,
  ``NCCL_IB_DISABLE``, the socket settings; ``NET/IB`` or ``NET/Socket``), then the size table
  (``size count type [redop root] time algbw busbw #wrong`` out of place, the same in place)
  and the ``# Avg bus bandwidth`` footer. The out-of-place time is used.
- **OSU** ``osu_allreduce`` / ``osu_allgather`` / ``osu_reduce_scatter``: ``# OSU MPI[-CUDA]
  Allreduce Latency Test vX`` and ``# Size  Avg Latency(us) ...`` rows. OSU prints no rank
  count: the caller supplies it.
- **ddlsim host sweeps** (JSON): ``{"ranks": N, "method": "...", "sizes": [{"nbytes": S,
  "allreduce_s" | "gloo_allreduce_s": [seconds, ...]}, ...]}``, as ``python -m
  ddlsim.tools.hvdlocal`` (Horovod + Gloo, ``traces/horovod/allreduce_sweep.json``) and
  ``scripts/measure_gloo_allreduce.py`` (torch.distributed + Gloo) write it; the median of each
  size is used.

A log with no size rows, with two collectives, or whose table stops short (a row with fewer
fields than the header, or no footer after the rows: the run did not finish) is refused with
one :class:`~ddlsim.errors.ConfigError` naming the file and line.
"""

from __future__ import annotations

import json
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ddlsim.errors import ConfigError
from ddlsim.inputs import BENCHMARK_LOG_MAX_BYTES, read_text

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter")
#: OSU's benchmark names -> collectives
_OSU = {"allreduce": "all_reduce", "allgather": "all_gather", "reduce_scatter": "reduce_scatter"}
#: NCCL's transport names in ``NCCL INFO`` lines -> ddlsim's transports
_NET = {"ib": "rdma", "socket": "tcp", "aws libfabric": "rdma", "ofi": "rdma", "libfabric": "rdma"}

_RANK = re.compile(
    r"^#\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\s+(\d+)\s+"
    r"\[[^\]]*\]\s+(.+?)\s*$"
)
_TESTS_VERSION = re.compile(r"^#\s*nccl-tests version\s+(\S+)(?:.*nccl-library=(\d+))?")
_NCCL_VERSION = re.compile(r"NCCL version\s+(\d+\.\d+\.\d+)")
_STARTING = re.compile(r"Collective test starting:\s*(\w+?)_perf")
_ENV = re.compile(
    r"\b(NCCL_[A-Z_]+)\b\s*(?:=|set by environment to)\s*([\w.,:/+-]+)", re.IGNORECASE
)
_NET_LINE = re.compile(r"(?:NET/|Using network\s+)(IB|Socket|AWS Libfabric|OFI|Libfabric)\b", re.I)
_OSU_TITLE = re.compile(r"^#\s*OSU MPI(?:-\w+)?\s+(\w+)\s+Latency Test\s*(v\S+)?", re.I)


@dataclass(frozen=True)
class Measurement:
    """One log's measured sizes and times (seconds) and what it states about the run."""

    path: str
    format: str  # nccl-tests | osu | sweep-json
    library: str  # nccl | mpi | gloo
    collective: str
    sizes_bytes: tuple[float, ...]
    times_s: tuple[float, ...]
    n_ranks: int | None = None
    hosts: tuple[str, ...] = ()  # host of each rank, rank order (nccl-tests)
    devices: tuple[str, ...] = ()  # device name of each rank (nccl-tests)
    nccl_version: str | None = None
    algorithm: str = "auto"  # NCCL_ALGO, lower case, or "auto"
    protocol: str = "auto"  # NCCL_PROTO as NCCL spells it, or "auto"
    transport: str | None = None  # what the log says NCCL used (NET/IB: rdma, NET/Socket: tcp)
    env: dict[str, str] = field(default_factory=dict)
    header: str = ""  # the benchmark's own version line

    @property
    def nodes(self) -> int | None:
        """Distinct hosts among the ranks (None where the log lists no ranks)."""
        return len(set(self.hosts)) or None

    @property
    def gpus_per_node(self) -> int | None:
        """Ranks per host, where every host runs the same number."""
        if not self.hosts:
            return None
        counts = {self.hosts.count(h) for h in set(self.hosts)}
        return counts.pop() if len(counts) == 1 else None


def read_log(path: str | Path, collective: str | None = None) -> Measurement:
    """The measurement in ``path`` (format recognised by content; module docstring).
    ``collective`` names it where the log does not (old nccl-tests, which print no test name)."""
    p = Path(path)
    text = read_text(p, "collective benchmark log", BENCHMARK_LOG_MAX_BYTES)
    if text.lstrip().startswith("{"):
        return _sweep_json(p, text)
    if any(_OSU_TITLE.match(line) for line in text.splitlines()[:20]):
        return _osu(p, text)
    return _nccl_tests(p, text, collective)


def _collective_name(p: Path, found: set[str], given: str | None) -> str:
    if len(found) > 1:
        raise ConfigError(
            f"{p}: mixed collectives ({', '.join(sorted(found))}): one collective per log"
        )
    name = next(iter(found), None) or given
    if name is None:
        for c in COLLECTIVES:
            if c in p.name:
                name = c
    if name is None:
        raise ConfigError(
            f"{p}: the log does not say which collective it measured; name it with "
            f"--collective ({', '.join(COLLECTIVES)})"
        )
    if name not in COLLECTIVES:
        raise ConfigError(f"{p}: collective {name!r} is not one of {', '.join(COLLECTIVES)}")
    if given is not None and given != name:
        raise ConfigError(f"{p}: the log measured {name}, --collective says {given}")
    return name


def _version_from_code(code: str) -> str:
    """``nccl-library=21805`` -> 2.18.5; ``2408`` -> 2.4.8 (NCCL's version code)."""
    n = int(code)
    if n >= 10000:
        return f"{n // 10000}.{n % 10000 // 100}.{n % 100}"
    return f"{n // 1000}.{n % 1000 // 100}.{n % 100}"


@dataclass
class _Scan:
    """What one pass over an nccl-tests log found: its header and NCCL lines, the ranks, the
    environment, the size table's columns and rows, and whether its footer came after them."""

    found: set[str] = field(default_factory=set)
    ranks: dict[int, tuple[str, str]] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    version: str | None = None
    header: str | None = None
    transport: str | None = None
    columns: list[str] | None = None
    rows: list[tuple[int, list[str]]] = field(default_factory=list)
    footer_after_rows: bool = False


def _scan_line(p: Path, number: int, s: str, scan: _Scan) -> None:
    """Take one stripped line of an nccl-tests log into ``scan``."""
    if m := _TESTS_VERSION.match(s):
        scan.header = s
        if m[2]:
            scan.version = scan.version or _version_from_code(m[2])
    if m := _NCCL_VERSION.search(s):
        scan.version = m[1]
    if m := _STARTING.search(s):
        scan.found.add(m[1])
    if m := _RANK.match(s):
        scan.ranks[int(m[1])] = (m[2], m[4])
    for key, value in _ENV.findall(s):
        scan.env[key.upper()] = value
    if m := _NET_LINE.search(s):
        scan.transport = _NET.get(m[1].lower(), scan.transport)
    if s.startswith("#"):
        names = s.lstrip("#").split()
        if {"time", "algbw", "busbw"} <= set(names) and names[0] in ("size", "bytes"):
            if scan.rows:
                scan.found.add("a second table")
            scan.columns = names
        elif s.lstrip("#").strip().lower().startswith("avg bus bandwidth") and scan.rows:
            scan.footer_after_rows = True
        return
    fields = s.split()
    if scan.columns is None or not fields or not fields[0].isdigit():
        return
    if scan.footer_after_rows:
        raise ConfigError(f"{p}:{number}: size rows after the table's footer (two runs?)")
    if len(fields) < len(scan.columns):
        raise ConfigError(
            f"{p}:{number}: truncated table: {len(fields)} field(s), the header has "
            f"{len(scan.columns)}"
        )
    scan.rows.append((number, fields))


def _check_table(p: Path, scan: _Scan) -> None:
    """One finished size table, or a ConfigError saying what is wrong with it."""
    if "a second table" in scan.found:
        raise ConfigError(f"{p}: two size tables in one log (one run per log)")
    if scan.columns is None or not scan.rows:
        raise ConfigError(
            f"{p}: no size rows (expected an nccl-tests table: size, count, type, ..., time, "
            "algbw, busbw)"
        )
    if not scan.footer_after_rows:
        raise ConfigError(
            f"{p}:{scan.rows[-1][0]}: truncated table: no '# Avg bus bandwidth' line after the "
            "last size row (the run did not finish?)"
        )


def _sizes_and_times(p: Path, scan: _Scan) -> tuple[list[float], list[float]]:
    """Bytes and seconds of the table's rows that move bytes."""
    assert scan.columns is not None
    size_at, time_at = 0, scan.columns.index("time")
    sizes, times = [], []
    for number, fields in scan.rows:
        try:
            size, time_us = float(fields[size_at]), float(fields[time_at])
        except ValueError:
            raise ConfigError(f"{p}:{number}: size or time is not a number") from None
        if size <= 0:
            continue  # nccl-tests prints 0-byte rows; nothing moves
        if not time_us > 0:
            raise ConfigError(f"{p}:{number}: time {fields[time_at]!r} is not positive")
        sizes.append(size)
        times.append(time_us * 1e-6)
    if not sizes:
        raise ConfigError(f"{p}: no size rows with bytes to move")
    return sizes, times


def _nccl_tests(p: Path, text: str, collective: str | None) -> Measurement:
    scan = _Scan()
    for number, line in enumerate(text.splitlines(), 1):
        _scan_line(p, number, line.strip(), scan)
    _check_table(p, scan)
    name = _collective_name(p, scan.found, collective)
    sizes, times = _sizes_and_times(p, scan)
    ranks = scan.ranks
    order = sorted(ranks)
    if order and order != list(range(len(order))):
        raise ConfigError(f"{p}: rank lines {order} are not 0..N-1 (a truncated rank list?)")
    algo, proto = _forced(scan.env)
    transport = "tcp" if scan.env.get("NCCL_IB_DISABLE") == "1" else scan.transport
    return Measurement(
        path=str(p),
        format="nccl-tests",
        library="nccl",
        collective=name,
        sizes_bytes=tuple(sizes),
        times_s=tuple(times),
        n_ranks=len(order) or None,
        hosts=tuple(ranks[r][0] for r in order),
        devices=tuple(ranks[r][1] for r in order),
        nccl_version=scan.version,
        algorithm=algo,
        protocol=proto,
        transport=transport,
        env=scan.env,
        header=scan.header or "",
    )


def _forced(env: dict[str, str]) -> tuple[str, str]:
    """(algorithm, protocol) the environment forces; ``auto`` where it does not. A list
    (``NCCL_ALGO=Ring,Tree``) restricts NCCL's choice to several: kept as ``auto``."""
    algo = env.get("NCCL_ALGO", "").lower()
    proto = env.get("NCCL_PROTO", "")
    if env.get("NCCL_TREE_THRESHOLD") == "0" and not algo:
        algo = "ring"  # NCCL 2.4's way of turning trees off
    algo = algo if algo in ("ring", "tree") else "auto"
    protos = {"ll": "LL", "ll128": "LL128", "simple": "Simple"}
    return algo, protos.get(proto.lower(), "auto")


def _osu(p: Path, text: str) -> Measurement:
    title = name = None
    sizes, times = [], []
    columns = 0
    for number, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if m := _OSU_TITLE.match(s):
            title = s
            name = _OSU.get(m[1].lower())
            if name is None:
                raise ConfigError(f"{p}:{number}: OSU {m[1]} is not a collective ddlsim fits")
            continue
        if s.startswith("#"):
            if s.lstrip("#").strip().lower().startswith("size"):
                columns = len(re.findall(r"Size|\w+ Latency\(us\)|Iterations|[A-Z]\w+", s)) or 2
            continue
        fields = s.split()
        if not fields or not fields[0].isdigit():
            continue
        if columns and len(fields) < min(columns, 2):
            raise ConfigError(f"{p}:{number}: truncated table: {len(fields)} field(s)")
        try:
            size, latency_us = float(fields[0]), float(fields[1])
        except (IndexError, ValueError):
            raise ConfigError(f"{p}:{number}: truncated table: no latency in {s!r}") from None
        if size > 0 and latency_us > 0:
            sizes.append(size)
            times.append(latency_us * 1e-6)
    if not sizes:
        raise ConfigError(f"{p}: no size rows (expected OSU rows: size, avg latency in us)")
    assert name is not None
    return Measurement(
        path=str(p), format="osu", library="mpi", collective=name,
        sizes_bytes=tuple(sizes), times_s=tuple(times), header=title or "",
    )  # fmt: skip


def _sweep_json(p: Path, text: str) -> Measurement:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        raise ConfigError(f"{p}: not JSON") from None
    entries = doc.get("sizes") if isinstance(doc, dict) else None
    if not isinstance(entries, list) or not entries:
        raise ConfigError(f"{p}: no size rows (expected a sweep: {{'ranks', 'sizes': [...]}})")
    method = str(doc.get("method", ""))
    library = "gloo" if "gloo" in method.lower() else "mpi" if "mpi" in method.lower() else None
    if library is None:
        raise ConfigError(f"{p}: the sweep's 'method' names neither Gloo nor MPI: {method!r}")
    sizes, times = [], []
    for i, entry in enumerate(entries):
        samples = _samples(entry)
        if samples is None:
            raise ConfigError(f"{p}: sizes[{i}] has no nbytes or no allreduce_s samples")
        sizes.append(float(entry["nbytes"]))
        times.append(statistics.median(samples))
    ranks = doc.get("ranks")
    if not isinstance(ranks, int) or ranks < 2:
        raise ConfigError(f"{p}: 'ranks' must be an integer >= 2, got {ranks!r}")
    return Measurement(
        path=str(p), format="sweep-json", library=library, collective="all_reduce",
        sizes_bytes=tuple(sizes), times_s=tuple(times), n_ranks=ranks,
        hosts=tuple(str(h) for h in doc.get("hosts", ["localhost"] * ranks)), header=method,
    )  # fmt: skip


def _samples(entry: Any) -> list[float] | None:
    if not isinstance(entry, dict) or not isinstance(entry.get("nbytes"), (int, float)):
        return None
    for key in ("allreduce_s", "gloo_allreduce_s"):
        values = entry.get(key)
        numbers = isinstance(values, list) and all(isinstance(v, (int, float)) for v in values)
        if numbers and values and all(v > 0 for v in values) and entry["nbytes"] > 0:
            return [float(v) for v in values]
    return None
