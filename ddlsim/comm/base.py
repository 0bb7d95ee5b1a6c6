"""The interface every communication method implements.

A :class:`CommModel` costs one *operation* that every worker performs at the same moment on the
same number of bytes (an allreduce of a fusion buffer, a push or pull of one parameter-server
shard's slice). It has two fidelities that must agree on homogeneous inputs:

- :meth:`CommModel.time_s` — a closed form used by the fast engine;
- :meth:`CommModel.schedule` — the same operation as steps of point-to-point flows over the
  cluster's links, executed by :func:`ddlsim.comm.executor.execute` in the detailed engine, where
  workers may start at different times and links are shared by the flows that cross them.

Operation kinds (:data:`OPS`): ``allreduce`` (Horovod, NCCL, MPI, replicated) or, for
parameter-server methods, ``push`` (gradients to the shard, summed there) and ``pull``
(updated parameters back). :attr:`CommModel.ops` says which a method uses.

An operation runs on a *channel*: operations on one channel are serialised (Horovod's single
collective stream is channel 0); different channels proceed in parallel (one per PS shard).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

from ddlsim.system.specs import Cluster

if TYPE_CHECKING:
    from ddlsim.comm.executor import Schedule

OPS = ("allreduce", "push", "pull")


class CommModel(ABC):
    """One gradient-exchange method on one cluster."""

    #: method name as the CLI spells it (``horovod-nccl``, ``ps``, ...)
    name: str = ""
    #: operation kinds this method performs each iteration
    ops: tuple[str, ...] = ("allreduce",)

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def n_channels(self) -> int:
        """Number of independent channels (streams) operations are spread over."""
        return 1

    def channel_of(self, op_index: int) -> int:
        """Channel of the ``op_index``-th operation of an iteration (shard placement)."""
        return 0

    def sm_blocks(self) -> int:
        """Thread blocks the method's communication kernels keep resident on each GPU while
        an operation runs (NCCL: one per channel); 0 where copies and sums run elsewhere."""
        return 0

    def label(self, nbytes: float, op: str = "allreduce") -> dict[str, str]:
        """How one ``op`` of ``nbytes`` runs (NCCL: ``algorithm``, ``protocol``); ``{}`` where
        the method has nothing to choose."""
        return {}

    @abstractmethod
    def time_s(self, nbytes: float, op: str = "allreduce", channel: int = 0) -> float:
        """Closed-form duration of one ``op`` on ``nbytes`` per worker, all workers starting
        together. Zero for ``nbytes == 0`` and for a single GPU."""

    @abstractmethod
    def schedule(self, nbytes: float, op: str = "allreduce", channel: int = 0) -> Schedule:
        """The same operation as steps of flows for the detailed engine."""
