"""The engine against its reference semantics: every worker, channel and the coordinator as a
SimPy process (:mod:`ddlsim.engine.simpy_reference`, the engine ddlsim ran before it was made
fast). Same plans, same costs: the same iteration end times, to rounding."""

from __future__ import annotations

import numpy as np
import pytest

from ddlsim.api import job, prepare, sim_options
from ddlsim.engine.simpy_reference import reference_run

CASES = [
    dict(model="resnet50", gpus=16, inter_node="25gbe"),
    dict(model="resnet50", gpus=16, inter_node="10gbe", horovod_version="0.12"),
    dict(model="vgg16", gpus=32, gpus_per_node=4, inter_node="10gbe", schedule="bytescheduler"),
    dict(model="resnet50", gpus=16, inter_node="25gbe", schedule="mg-wfbp"),
    dict(model="resnet50", gpus=16, inter_node="25gbe", schedule="wfbp", cycle_time_ms=5),
    dict(model="googlenet", gpus=16, inter_node="25gbe", schedule="bsp"),
    dict(model="resnet50", gpus=16, inter_node="25gbe", comm="ddp"),
    dict(model="inception3", gpus=16, comm="ps", gpus_per_node=4, ps_colocated=False),
    dict(model="vgg16", gpus=8, comm="ps", gpus_per_node=4, schedule="bytescheduler"),
    dict(model="alexnet", gpus=16, gpus_per_node=4, data="real", batch=256),
    dict(model="resnet50", gpus=8, comm="replicated-nccl"),
]
ENGINES = [
    dict(),
    dict(engine="detailed", rank_sigma=0.0),
    dict(engine="detailed", rank_sigma=0.0, stragglers={3: 1.3}),
]


@pytest.mark.parametrize("engine", ENGINES, ids=["fast", "detailed", "straggler"])
@pytest.mark.parametrize("config", CASES, ids=lambda c: "-".join(map(str, c.values())))
def test_the_engine_moves_time_as_the_simpy_reference_does(config, engine):
    j = job(**config, **engine)
    setup = prepare(j)
    options = sim_options(j.simulation)
    reference = reference_run(
        setup.dag, setup.cluster, setup.comm, options=options, coordination=setup.coordination()
    )
    result = setup.simulate(options)
    ends = reference.iteration_end_s
    starts = np.vstack([np.zeros((1, ends.shape[1])), ends[:-1]])
    per_iteration = (ends - starts).mean(axis=1)
    assert result.iteration_times_s == pytest.approx(tuple(per_iteration), rel=1e-12, abs=1e-15)
