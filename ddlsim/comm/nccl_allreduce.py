"""Horovod's allreduce through NCCL (``horovod-nccl``): flat ring or double binary tree.

The closed form is NCCL's own cost model (:mod:`ddlsim.comm.nccl`): every fused buffer runs
with the (algorithm, protocol) the configured NCCL version picks for its size (``auto``), or
with the algorithm / protocol the user forces (``NCCL_ALGO`` / ``NCCL_PROTO``).

The detailed engine executes the same choice over the cluster's links:

- ring: ranks packed node by node, one step of N flows (every rank to its successor; intra
  fabric inside a node, the NICs between nodes) repeated 2(N-1) times (NVLS: twice, its
  reduce and its multicast, every GPU's link loaded alike);
- tree (and NVLS-tree): the steady-state tick of :mod:`ddlsim.comm.tree` (chain inside each
  node, both binary trees across nodes) repeated once per level of the pipeline,
  2(g-1) + 2 floor(log2 n);

each step rescaled (:func:`~ddlsim.comm.fabric.timed_step`) so that, all ranks starting
together, the schedule takes NCCL's latency plus NCCL's bandwidth term exactly; a late rank
delays its ring or tree neighbours step by step.
"""

from __future__ import annotations

import numpy as np

from ddlsim.comm.executor import Step
from ddlsim.comm.fabric import ScheduledModel, timed_step
from ddlsim.comm.nccl import (
    DEFAULT_NCCL_VERSION,
    Choice,
    NcclVersion,
    Topology,
    candidates,
    choose_half_ring,
)
from ddlsim.comm.nccl import choose as nccl_choose
from ddlsim.comm.ring import ring_flows
from ddlsim.comm.tree import pipeline_depth, tick_flows
from ddlsim.errors import ConfigError
from ddlsim.system.specs import Cluster


class NcclAllreduceModel(ScheduledModel):
    """NCCL allreduce over all N GPUs, as the configured NCCL version runs it."""

    name = "horovod-nccl"

    def __init__(
        self,
        cluster: Cluster,
        *,
        version: str | NcclVersion = DEFAULT_NCCL_VERSION,
        algorithm: str = "auto",
        protocol: str = "auto",
    ) -> None:
        super().__init__(cluster)
        self.version = NcclVersion.parse(version)
        self.algorithm, self.protocol = algorithm, protocol
        self.topology = Topology.of(cluster, self.version)
        candidates(self.version, self.topology, algorithm, protocol)  # refuse early

    def choice(self, nbytes: float) -> Choice:
        """The (algorithm, protocol) NCCL runs ``nbytes`` with, and its predicted time."""
        return nccl_choose(
            self.topology, self.version, float(nbytes), self.algorithm, self.protocol
        )

    def collective_choice(self, collective: str, nbytes: float) -> Choice:
        """A single NCCL call as nccl-tests times it: ``all_reduce`` of ``nbytes`` per rank
        (:meth:`choice`), or a ring ``all_gather`` / ``reduce_scatter`` of ``nbytes`` in all
        (:func:`~ddlsim.comm.nccl.choose_half_ring`: ring, or NVLS where it has it)."""
        if collective == "all_reduce":
            return self.choice(nbytes)
        if collective not in ("all_gather", "reduce_scatter"):
            raise ConfigError(f"NCCL collective {collective!r} is not modelled")
        return choose_half_ring(
            self.topology, self.version, float(nbytes), self.protocol, self.algorithm
        )

    def sm_blocks(self) -> int:
        """One NCCL thread block (an SM) per channel while a call runs."""
        return self.topology.channels

    def label(self, nbytes: float, op: str = "allreduce") -> dict[str, str]:
        """``{"algorithm", "protocol"}`` of the call (empty for one GPU or no bytes)."""
        if nbytes <= 0 or self.cluster.n_gpus == 1:
            return {}
        return self.choice(nbytes).label()

    def _time_s(self, nbytes: float, op: str, channel: int) -> float:
        return self.choice(nbytes).time_s

    def _schedule(self, nbytes: float, op: str, channel: int) -> list[Step]:
        f = self.fabric
        ch = self.choice(nbytes)
        if ch.algorithm in ("ring", "nvls"):  # NVLS: one reduce and one multicast
            unit = ring_flows(f, np.arange(f.n_ranks)[None, :], 1.0)
            repeat = 2 * (f.n_ranks - 1) if ch.algorithm == "ring" else 2
        else:
            unit = tick_flows(f, 1.0)
            repeat = pipeline_depth(f.g, f.n_nodes)
        return [timed_step(f, unit, repeat, ch.bandwidth_s, ch.latency_s)]
