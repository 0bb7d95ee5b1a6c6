"""Networks by the speed a user states (``--inter-node 32gbe``, ``roce-400``, ``ib-800``,
``efa-3200``), beside the catalogued ones of ``links.json``.

One grammar, case-insensitive, ``S`` a number of Gb/s per network adapter (its line rate;
``--nics-per-node`` adds adapters up):

* ``<S>gbe`` -- Ethernet at S Gb/s, TCP unless ``--transport rdma`` (NCCL: RoCE where the
  catalog's Ethernet of that class offers it, as for the catalogued speeds);
* ``roce-<S>`` -- the same Ethernet with RoCE stated: RDMA by default;
* ``ib-<S>`` -- InfiniBand at S Gb/s (``ib-400`` is ``ib-ndr``);
* ``efa-<S>`` -- AWS Elastic Fabric Adapter at S Gb/s per adapter (``efa-3200`` with one
  adapter is a p5's 3,200 Gb/s as one pipe; ``efa --nics-per-node 32`` the same in 32 rails).

A stated speed that is a catalogued one of its family is that entry (``100gbe``, ``ib-400``).
Any other takes the per-transport efficiencies and latencies of its family's catalogued entry
of the largest speed at or below it (the slowest one for speeds below all), only the line rate
changes: the software and protocol overheads those figures stand for do not depend on the line
rate within a family, and the floor is the entry whose overheads were characterised at a rate
nearest the stated one from below. So the effective RDMA bandwidth grows with the stated speed
(one efficiency per family); over TCP it grows within each interval between catalogued speeds,
and steps where the catalog's TCP efficiency does (100 GbE's 0.48 is measured, 200 GbE's 0.15
assumed: one TCP stream per peer tops out near 30-50 Gb/s).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace

from ddlsim.errors import ConfigError
from ddlsim.system.specs import LinkSpec

#: the grammar in one line (error messages, the --inter-node help)
GRAMMAR = "<S>gbe, roce-<S>, ib-<S> or efa-<S> (S = Gb/s per adapter)"
#: a stated speed must lie in this range (Gb/s per adapter): 1.6 Tb/s NICs are announced
SPEED_RANGE_GBPS = (1.0, 10_000.0)
_PATTERN = re.compile(r"(?:(?P<eth>[0-9.]+)gbe|(?P<family>roce|ib|efa)-(?P<speed>[0-9.]+))")
#: family -> the catalogued ids it draws on (Ethernet ids are ``<S>gbe``)
_FAMILY_IDS = {
    "ib": ("ib-fdr", "ib-edr", "ib-hdr", "ib-ndr", "ib-xdr"),
    "efa": ("efa",),
}


def _family_members(family: str, catalogued: Mapping[str, LinkSpec]) -> list[LinkSpec]:
    if family in ("gbe", "roce"):
        ids = [k for k in catalogued if re.fullmatch(r"\d+gbe", k)]
    else:
        ids = [k for k in _FAMILY_IDS[family] if k in catalogued]
    return sorted((catalogued[k] for k in ids), key=lambda link: link.nominal_bandwidth_Bps)


def _speed(text: str, key: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(f"network {key!r}: {text!r} is not a speed in Gb/s") from None
    low, high = SPEED_RANGE_GBPS
    if not low <= value <= high:
        raise ConfigError(
            f"network {key!r}: {value:g} Gb/s per adapter is outside {low:g}..{high:g}"
        )
    return value


def stated_network(key: str, catalogued: Mapping[str, LinkSpec]) -> LinkSpec | None:
    """The network ``key`` (normalised: lower case, no blanks) states by its speed (module
    docstring), None if ``key`` is not of the grammar; ConfigError for a speed out of range."""
    match = _PATTERN.fullmatch(key)
    if match is None:
        return None
    family = "gbe" if match["eth"] else match["family"]
    gbps = _speed(match["eth"] or match["speed"], key)
    members = _family_members(family, catalogued)
    if not members:
        return None
    rate_Bps = gbps * 1e9 / 8
    below = [m for m in members if m.nominal_bandwidth_Bps <= rate_Bps * (1 + 1e-12)]
    template = below[-1] if below else members[0]
    same = abs(template.nominal_bandwidth_Bps - rate_Bps) <= 1e-9 * rate_Bps
    if same and family != "roce":
        return template
    kind = {"gbe": "Ethernet", "roce": "Ethernet (RoCE)", "ib": "InfiniBand", "efa": "AWS EFA"}
    figures = f"efficiencies and latencies of {template.id} (the catalogued speed at or below)"
    if same:
        figures = f"the figures of {template.id}"
    return replace(
        template,
        id=key,
        nominal_bandwidth_Bps=rate_Bps,
        default_transport="rdma" if family == "roce" else template.default_transport,
        nccl_transport="rdma" if family == "roce" else template.nccl_transport,
        description=f"{kind} at {gbps:g} Gb/s per adapter, as stated; {figures}",
        sources={
            **template.sources,
            "bandwidth_Gbps": f"stated by the user: {gbps:g} Gb/s per adapter ({key})",
        },
    )
