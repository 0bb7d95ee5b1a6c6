"""The question ddlsim answers: a job = workload x system x execution (+ simulation settings).

- :mod:`ddlsim.config.groups`: the four groups and :class:`JobConfig`;
- :mod:`ddlsim.config.record`: the record every result carries, to re-run it;
- :mod:`ddlsim.config.track_record`: ddlsim's measured error, quoted beside a prediction.

``from ddlsim.config import JobConfig`` (and the other names below) keeps working as before
the groups moved into their own module.
"""

from ddlsim.config.groups import (
    GROUP_OF,
    GROUPS,
    ExecutionConfig,
    JobConfig,
    SimulationConfig,
    SystemConfig,
    WorkloadConfig,
    defaults,
    job,
)

__all__ = [
    "GROUPS",
    "GROUP_OF",
    "ExecutionConfig",
    "JobConfig",
    "SimulationConfig",
    "SystemConfig",
    "WorkloadConfig",
    "defaults",
    "job",
]
