"""TensorFlow's graph executor's host floor (ddlsim.compute.dispatch): the measured per-op
figure, its closed form per stage, where it binds and where it does not."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from ddlsim.calibration.transformer import Step, _stages, optimizer_step_s, transformer_profile
from ddlsim.compute.dispatch import EXECUTOR_OP_S, executor_host_s, host_s
from ddlsim.compute.gemm import default_gemm_model
from ddlsim.compute.transformer_step import FP32_UNDER_AUTOCAST, Numerics, _pass_op
from ddlsim.system import catalog
from ddlsim.workload.transformers.config import TransformerConfig
from ddlsim.workload.transformers.spec import transformer_spec
from ddlsim.workload.transformers.structure import block
from ddlsim.workload.transformers.zoo import get_transformer

HOST = Path(__file__).resolve().parents[1] / "traces" / "host"
H100 = catalog.device("h100")
AMP = Numerics("fp16", "fp16", fused_softmax=False, autocast=True)
FP32 = Numerics("tf32", "fp32", fused_softmax=False)
TINY = TransformerConfig("tiny", layers=2, hidden=64, heads=2, ffn=256, vocab=512, seq_len=16)


def _profile(cfg, batch, dispatch, numerics=AMP, seq=None, device=H100):
    seq = seq or cfg.seq
    spec = transformer_spec(cfg, seq)
    step = Step(batch, seq, 1, numerics, "adamw", dispatch=dispatch)
    return transformer_profile(cfg, spec, device, step, "amp")


def test_the_per_op_figure_is_the_median_of_the_shipped_measurements():
    figures = []
    for name in ("tf_executor-a.json", "tf_executor-b.json"):
        data = json.loads((HOST / name).read_text())
        assert data["tensorflow"] and data["cpu"]
        for run in data["runs"]:
            if run["intra_op"] == 1:  # a GPU op never runs on the intra-op pool
                figures.append(run["cases"]["layer_fwd_bwd"]["per_fwd_op_us"])
    assert len(figures) == 4
    # forward + backward per counted forward op, over its two directions
    per_op_us = statistics.median(figures) / 2
    assert abs(EXECUTOR_OP_S * 1e6 - per_op_us) <= 0.05
    # PyTorch's eager op from Python costs more on the same machine (traces/host/README.md)
    torch = json.loads((HOST / "torch_dispatch.json").read_text())
    assert torch["fwd_grad_add_us"] > EXECUTOR_OP_S * 1e6


def test_executor_host_time_is_ops_times_op_and_launch_plus_extra_launches():
    m = default_gemm_model()
    assert executor_host_s(0) == 0.0
    want = 10 * (EXECUTOR_OP_S + m.issue_interval_s) + 3 * m.issue_interval_s
    assert executor_host_s(10, 3) == pytest.approx(want, rel=1e-12)
    # a C++ executor is cheaper per op than PyTorch's Python dispatch
    assert executor_host_s(10, 3) < host_s(10, 3)


def test_amp_casts_are_two_per_fp32_list_op_and_none_in_fp32():
    blk = block(TINY, 1, 16)
    fp32_list = [p for p in blk.passes if _pass_op(p, False, "layernorm") in FP32_UNDER_AUTOCAST]
    assert fp32_list  # the norms and the softmax
    amp = _stages(TINY, Step(1, 16, 1, AMP, "adamw"), H100)["encoder"]
    fp32 = _stages(TINY, Step(1, 16, 1, FP32, "adamw"), H100)["encoder"]
    assert amp.casts == 2 * len(fp32_list)
    assert fp32.casts == 0
    assert amp.fwd_ops == fp32.fwd_ops


def _floored_step_s(cfg, batch, numerics=AMP):
    """The step by the docstring's closed form: each stage's direction at least its ops' and
    casts' executor time and launches."""
    stages = _stages(cfg, Step(batch, cfg.seq, 1, numerics, "adamw"), H100)
    total = 0.0
    for layer in transformer_spec(cfg, cfg.seq).layers:
        t = stages[layer.name.split("/")[0]]
        fwd = executor_host_s(t.fwd_ops + t.casts)
        bwd = executor_host_s(t.bwd_ops + t.casts, t.bwd_extra_kernels)
        total += max(t.fwd_s, fwd) + max(t.bwd_s, bwd)
    return total


def test_the_floor_stays_under_the_gpu_floor_per_kernel_at_the_measured_figure():
    # each op launches at least one kernel of at least stream_launch_s on the GPU: at 1.6 us
    # an op plus its launch the executor never holds the GPU back, even on a tiny model
    m = default_gemm_model()
    assert EXECUTOR_OP_S + m.issue_interval_s < m.stream_launch_s
    prof = _profile(TINY, 1, "graph-executor")
    assert prof.step_time_s == pytest.approx(
        _floored_step_s(TINY, 1) + prof.unattributed_time_s, rel=1e-12
    )
    assert prof.step_time_s == _profile(TINY, 1, "engine").step_time_s
    assert prof.provenance["numerics"]["host_bound_fraction"] == 0.0


def test_a_slower_host_core_makes_a_tiny_model_host_bound(monkeypatch):
    # the floor scales with the host's seconds per op (a core 5x slower than this machine's)
    monkeypatch.setattr("ddlsim.compute.dispatch.EXECUTOR_OP_S", 5 * EXECUTOR_OP_S)
    prof = _profile(TINY, 1, "graph-executor")
    free = _profile(TINY, 1, "engine")
    assert prof.step_time_s == pytest.approx(
        _floored_step_s(TINY, 1) + prof.unattributed_time_s, rel=1e-12
    )
    assert prof.step_time_s > 1.2 * free.step_time_s
    assert prof.provenance["numerics"]["host_bound_fraction"] > 0.1
    big = get_transformer("gpt2-medium")
    assert (
        _profile(big, 16, "graph-executor").step_time_s == _profile(big, 16, "engine").step_time_s
    )


@pytest.mark.parametrize("name", ["tiny", "bert-base", "gpt2"])
@pytest.mark.parametrize("batch", [1, 4, 32])
def test_the_executor_floor_lies_between_no_floor_and_pytorch_eager(name, batch):
    cfg = TINY if name == "tiny" else get_transformer(name)
    none = _profile(cfg, batch, "engine", seq=128 if name != "tiny" else None)
    tf = _profile(cfg, batch, "graph-executor", seq=128 if name != "tiny" else None)
    eager = _profile(cfg, batch, "eager", seq=128 if name != "tiny" else None)
    assert none.step_time_s <= tf.step_time_s <= eager.step_time_s


def test_transformer_xl_in_tensorflow_is_gpu_bound_at_the_measured_batches():
    """The NVDLE TensorFlow Transformer-XL rows run 16-64 x 192 tokens: the executor's floor
    is a tenth of the GPU's time there (docs/design.md, "TensorFlow's graph executor")."""
    cfg = get_transformer("transformer-xl-base")
    a100 = catalog.device("a100")
    for numerics in (AMP, FP32):
        st = _stages(cfg, Step(16, 192, 1, numerics, "adam"), a100)["encoder"]
        host = executor_host_s(st.fwd_ops + st.casts) + executor_host_s(
            st.bwd_ops + st.casts, st.bwd_extra_kernels
        )
        assert host < 0.2 * (st.fwd_s + st.bwd_s)
        eng = _profile(cfg, 16, "engine", numerics, seq=192, device=a100)
        tf = _profile(cfg, 16, "graph-executor", numerics, seq=192, device=a100)
        assert tf.step_time_s == eng.step_time_s


def test_a_per_tensor_optimizer_under_the_executor_stays_gpu_bound():
    m = default_gemm_model()
    n, tensors = 1_000_000, 200
    gpu = optimizer_step_s(n, tensors, H100, "adamw", True, "per-tensor", "engine")
    tf = optimizer_step_s(n, tensors, H100, "adamw", True, "per-tensor", "graph-executor")
    # each launch's GPU floor (stream_launch_s) exceeds its executor time
    assert m.stream_launch_s > EXECUTOR_OP_S + m.issue_interval_s
    assert tf == gpu
