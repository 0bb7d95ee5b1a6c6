"""Gradient-exchange methods: one module per method behind :class:`~ddlsim.comm.base.CommModel`.

Every method has a closed form (:meth:`CommModel.time_s`, fast engine) and an event-level
schedule (:meth:`CommModel.schedule`, executed by :func:`ddlsim.comm.executor.execute` in the
detailed engine) that agree when all workers start together. :func:`make_comm_model` picks the
module from the method name the CLI uses.
"""

from __future__ import annotations

from collections.abc import Sequence

from ddlsim.comm.base import CommModel
from ddlsim.comm.byteps import BytePSModel
from ddlsim.comm.distributed_replicated import DistributedReplicatedModel
from ddlsim.comm.gloo import GlooModel
from ddlsim.comm.hierarchical import HierarchicalModel
from ddlsim.comm.mpi import DEFAULT_MPI, MPIModel
from ddlsim.comm.nccl import ALGORITHM_CHOICES as ALGORITHMS
from ddlsim.comm.nccl import DEFAULT_NCCL_VERSION
from ddlsim.comm.nccl import PROTOCOL_CHOICES as NCCL_PROTOCOLS
from ddlsim.comm.nccl_allreduce import NcclAllreduceModel
from ddlsim.comm.ps import PSModel, default_n_ps
from ddlsim.comm.replicated import ReplicatedCpuModel, ReplicatedNcclModel
from ddlsim.comm.sharded import ShardedModel
from ddlsim.errors import ConfigError, UnknownNameError
from ddlsim.system.specs import Cluster

#: every gradient-exchange method ddlsim models: the one list (``--comm``'s vocabulary, the
#: knob table's check, the validation plots' colour order)
METHODS = (
    "horovod-nccl",
    "horovod-mpi",
    "ps",
    "replicated-nccl",
    "replicated-cpu",
    "distributed-replicated",
    "byteps",
    "horovod-gloo",
    "ddp",
    "fsdp",
    "zero1",
    "zero2",
    "zero3",
)
#: methods run by Horovod's coordinator (cycle, negotiation, tensor fusion)
HOROVOD_METHODS = ("horovod-nccl", "horovod-mpi", "horovod-gloo")
#: methods that push gradients to and pull parameters from servers
PS_METHODS = ("ps", "distributed-replicated", "byteps")
#: sharded data parallelism: PyTorch FSDP and DeepSpeed ZeRO stages 1-3 (parameters, gradients
#: and optimizer state split over the GPUs; all-gathers and reduce-scatters)
SHARDED_METHODS = ("fsdp", "zero1", "zero2", "zero3")
#: methods that exist only in PyTorch (DDP, FSDP, DeepSpeed): a job of one runs PyTorch's stack
PYTORCH_METHODS = ("ddp", *SHARDED_METHODS)
#: methods whose collectives are NCCL 2's (NcclAllreduceModel, ShardedModel): its release, its
#: (algorithm, protocol) choice per call
NCCL2_METHODS = ("horovod-nccl", *PYTORCH_METHODS)
#: methods whose collectives are NCCL's (GPU workers only): NCCL 2's and TensorFlow's NCCL 1
NCCL_METHODS = (*NCCL2_METHODS, "replicated-nccl")

__all__ = [
    "ALGORITHMS",
    "HOROVOD_METHODS",
    "METHODS",
    "NCCL2_METHODS",
    "NCCL_PROTOCOLS",
    "PS_METHODS",
    "PYTORCH_METHODS",
    "SHARDED_METHODS",
    "CommModel",
    "default_n_ps",
    "make_comm_model",
]


def make_comm_model(
    method: str,
    cluster: Cluster,
    *,
    hierarchical: bool = False,
    algorithm: str = "auto",
    nccl_version: str = DEFAULT_NCCL_VERSION,
    nccl_protocol: str = "auto",
    mpi: str = DEFAULT_MPI,
    n_ps: int | None = None,
    ps_colocated: bool = True,
    ps_placement: str = "cpu",
    tensor_bytes: Sequence[int] = (),
) -> CommModel:
    """The communication model of ``method`` on ``cluster``.

    ``horovod-nccl`` is NCCL's allreduce as ``nccl_version`` runs it: ``algorithm`` ``auto``
    (what that NCCL picks per call), ``ring`` or ``tree`` (``NCCL_ALGO``), ``nccl_protocol``
    ``auto``, ``LL``, ``LL128`` or ``Simple`` (``NCCL_PROTO``); ``hierarchical=True`` is
    Horovod's hierarchical allreduce (NCCL calls per level), which takes precedence;
    ``horovod-gloo`` is Gloo's ring over TCP (loopback inside a node), summed on the CPU;
    ``ddp`` (PyTorch DistributedDataParallel) runs NCCL's allreduce as ``horovod-nccl`` does;
    the sharded methods (``fsdp``, ``zero1``-``zero3``) NCCL's all-gather, reduce-scatter and
    all-reduce (:class:`~ddlsim.comm.sharded.ShardedModel`).
    ``horovod-mpi`` sums on the host with ``mpi``'s loops (``openmpi-4.1``: vectorised).
    ``n_ps`` (``ps``, ``distributed-replicated``, ``byteps``) defaults to one per worker node
    (1 on a single node), the tf_cnn_benchmarks convention; ``ps_colocated`` puts PS shards /
    BytePS servers on the worker nodes (``distributed-replicated`` always co-locates them);
    ``ps_placement`` (``ps``, ``replicated-cpu``) is the parameter device, ``cpu`` or ``gpu``;
    ``tensor_bytes`` (per variable, creation order) feeds the round-robin shard placement.
    Unknown method or algorithm: :class:`UnknownNameError`.
    """
    if method not in METHODS:
        raise UnknownNameError("comm method", method, METHODS)
    if algorithm not in ALGORITHMS:
        raise UnknownNameError("allreduce algorithm", algorithm, ALGORITHMS)
    if nccl_protocol not in NCCL_PROTOCOLS:
        raise UnknownNameError("NCCL protocol", nccl_protocol, NCCL_PROTOCOLS)
    if method in NCCL_METHODS and cluster.device.kind == "cpu" and cluster.n_gpus > 1:
        raise ConfigError(
            f"{method} runs NCCL, which needs GPUs; CPU workers ({cluster.device.id}) exchange "
            "gradients with horovod-gloo (or horovod-mpi)"
        )
    if method == "horovod-nccl" and hierarchical:
        return HierarchicalModel(cluster, version=nccl_version)
    if method in SHARDED_METHODS:
        sharded = ShardedModel(
            cluster, version=nccl_version, algorithm=algorithm, protocol=nccl_protocol
        )
        sharded.name = method
        return sharded
    if method in ("horovod-nccl", "ddp"):
        model = NcclAllreduceModel(
            cluster, version=nccl_version, algorithm=algorithm, protocol=nccl_protocol
        )
        model.name = method
        return model
    if method == "horovod-mpi":
        return MPIModel(cluster, mpi)
    if method == "horovod-gloo":
        return GlooModel(cluster)
    if method == "ps":
        return PSModel(cluster, n_ps, ps_colocated, ps_placement, tensor_bytes)
    if method == "byteps":
        return BytePSModel(cluster, n_ps, ps_colocated)
    if method == "replicated-nccl":
        return ReplicatedNcclModel(cluster)
    if method == "replicated-cpu":
        return ReplicatedCpuModel(cluster, ps_placement)
    return DistributedReplicatedModel(cluster, n_ps, tensor_bytes)
