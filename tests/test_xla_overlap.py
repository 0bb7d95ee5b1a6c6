"""TensorFlow's XLA auto-clustering and the exchange: Horovod's allreduce is not an XLA op
(unless ``HOROVOD_ENABLE_XLA_OPS``), so the backward compiles into clusters whose gradients
leave together at the end; no exchange overlaps the backward."""

from __future__ import annotations

import ddlsim
from ddlsim.execution.dag import NodeKind

KW = dict(gpu="v100-sxm2", precision="amp", batch=4, seq_len=384, task="span", node_mtbf_hours=0)


def _allreduces_after_backprop(p: ddlsim.Prediction) -> tuple[int, int]:
    g = p.setup.dag
    bwd = [n for n, d in g.nodes(data=True) if d["kind"] is NodeKind.BACKWARD]
    last = bwd[-1]
    ars = [n for n, d in g.nodes(data=True) if d["kind"] is NodeKind.ALLREDUCE]
    gated = [n for n in ars if last in set(g.predecessors(n))]
    return len(gated), len(ars)


def test_a_tensorflow_xla_backward_exchanges_after_it() -> None:
    xla = ddlsim.predict("bert-large", 8, framework="tensorflow", fusion="xla", **KW)
    plain = ddlsim.predict("bert-large", 8, framework="tensorflow", **KW)
    assert xla.setup.strategy.compiled_backward and not plain.setup.strategy.compiled_backward
    gated, total = _allreduces_after_backprop(xla)
    assert total > 0 and gated == total
    gated, total = _allreduces_after_backprop(plain)
    assert gated < total  # only the exchange of the first layer's gradients follows backprop
    # the exchange no longer hides behind the backward: all of it is exposed
    x, o = xla.breakdown, plain.breakdown
    assert x["comm_hidden_s"] == 0.0 < o["comm_hidden_s"]
    assert x["comm_exposed_s"] > o["comm_exposed_s"]
    assert xla.iteration_time_s > plain.iteration_time_s - (o["compute_s"] - x["compute_s"])


def test_pytorch_keeps_its_overlap_under_a_fusing_compiler() -> None:
    p = ddlsim.predict("bert-large", 8, framework="pytorch", fusion="xla", **KW)
    assert not p.setup.strategy.compiled_backward
    gated, total = _allreduces_after_backprop(p)
    assert gated < total
