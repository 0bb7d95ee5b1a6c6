"""The system wing: a job's system settings resolved into a :class:`~ddlsim.system.specs.Cluster`.

The catalog's cluster for the names (:func:`ddlsim.system.catalog.build_cluster`), with the
links a network calibration fitted in place of the catalog's
(:func:`ddlsim.calibration.network.apply`). ``prepare``, the 1-GPU baseline, the validation of
measured collectives, the network fit and the track record all resolve clusters here.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ddlsim.calibration import network as netcal_file
from ddlsim.config.groups import SystemConfig
from ddlsim.system import catalog
from ddlsim.system.instances import with_instance, with_sockets
from ddlsim.system.specs import Cluster


def resolve_system(
    s: SystemConfig, gpu: str, *, nccl: bool = False, network: dict[str, Any] | None = None
) -> Cluster:
    """The cluster of ``s`` on GPUs of type ``gpu`` (the resolved name: ``s.gpu`` or the
    calibration's). ``nccl``: NCCL picks the transport (RDMA wherever the NICs offer it);
    ``network``: a loaded network calibration, else the file ``s.network_calibration`` names."""
    cluster = catalog.build_cluster(
        gpu, s.gpus, s.gpus_per_node, s.intra_node, s.inter_node, s.transport, s.nics_per_node,
        nccl=nccl,
    )  # fmt: skip
    if cluster.n_nodes > 1:
        named = s.instance or catalog.network_instance(cluster.inter_link, gpu)
        cluster = with_sockets(cluster, named)
    if network is None and s.network_calibration is not None:
        network = netcal_file.load(s.network_calibration)
    return cluster if network is None else netcal_file.apply(network, cluster)


def instance_system(s: SystemConfig) -> SystemConfig:
    """``s`` with its ``instance``'s GPU, GPUs per node, fabric, network and adapters where
    ``s`` leaves them unset (:func:`ddlsim.system.instances.with_instance`)."""
    if s.instance is None:
        return s
    keys = ("gpu", "gpus_per_node", "intra_node", "inter_node", "nics_per_node", "transport")
    filled = with_instance({k: getattr(s, k) for k in keys}, s.instance)
    return replace(s, **filled)
