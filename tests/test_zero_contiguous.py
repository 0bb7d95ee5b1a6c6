"""DeepSpeed's ``contiguous_gradients`` (``--no-contiguous-gradients``): the gradient copies
ZeRO-1/2's backward hooks make and the buffers each setting keeps (``stage_1_and_2.py``,
``stage3.py``)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ddlsim
from ddlsim.execution.dag import NodeKind
from ddlsim.execution.sharded import Sharding
from ddlsim.resolve.transformer import zero_buffer_bytes

KW = dict(gpu="v100-sxm2", precision="amp", batch=2, seq_len=1024, node_mtbf_hours=0)


@given(st.integers(min_value=2, max_value=4096), st.sampled_from([2, 4]))
@settings(max_examples=30, deadline=None)
def test_copy_bytes_per_parameter(n: int, e: int) -> None:
    """Contiguous: each gradient into the bucket buffer (read, write) and the rank's 1/N into
    its partition; without: flattened and copied back; FSDP and ZeRO-3 copy nothing on the
    compute stream."""
    for method in ("zero1", "zero2"):
        on = Sharding(method, n, param_bytes=e)
        off = Sharding(method, n, param_bytes=e, contiguous_gradients=False)
        assert on.grad_copy_bytes_per_param == pytest.approx(2 * e + 2 * e / n)
        assert off.grad_copy_bytes_per_param == 4 * e
        assert on.grad_copy_bytes_per_param <= off.grad_copy_bytes_per_param
    for method in ("fsdp", "zero3"):
        assert Sharding(method, n).grad_copy_bytes_per_param == 0.0


def test_buffers_follow_deepspeeds_allocations() -> None:
    bucket, psi = 500_000_000, 124_000_000
    zero2 = Sharding("zero2", 16, param_bytes=2, reduce_bucket_elements=bucket)
    assert zero_buffer_bytes(zero2, psi) == 2 * bucket * 2  # ipg_buffer x 2 (overlap_comm)
    alone = Sharding("zero2", 16, param_bytes=2, overlap_comm=False)
    assert zero_buffer_bytes(alone, psi) == bucket * 2
    flat = Sharding("zero2", 16, param_bytes=2, contiguous_gradients=False)
    assert zero_buffer_bytes(flat, psi) == psi * 2  # one flattened bucket: the whole model
    assert zero_buffer_bytes(Sharding("zero3", 16, param_bytes=2), psi) == bucket * 2
    off3 = Sharding("zero3", 16, param_bytes=2, contiguous_gradients=False)
    assert zero_buffer_bytes(off3, psi) == 0.0
    assert zero_buffer_bytes(Sharding("fsdp", 16), psi) == 0.0


def test_the_copies_are_in_the_backward() -> None:
    """ZeRO-2's step slows by the copies' bytes over the DRAM stream rate; without contiguous
    gradients it copies twice as much and keeps a smaller buffer under overlap_comm."""
    on = ddlsim.predict("gpt2-medium", 16, comm="zero2", overlap_comm="on", **KW)
    off = ddlsim.predict("gpt2-medium", 16, comm="zero2", overlap_comm="on",
                         contiguous_gradients=False, **KW)  # fmt: skip
    assert off.iteration_time_s > on.iteration_time_s
    mem_on = on.inputs["transformer"]["memory"]["buffers_GB"]
    mem_off = off.inputs["transformer"]["memory"]["buffers_GB"]
    assert mem_off < mem_on == pytest.approx(2.0, rel=1e-3)
    sh = on.setup.strategy.sharding
    assert sh.contiguous_gradients and sh.copy_Bps > 0
    nodes = on.setup.dag.nodes(data=True)
    bwd = sum(d["duration_s"] for _, d in nodes if d.get("kind") is NodeKind.BACKWARD)
    # the copies ride on the backward: every parameter's, at the DRAM stream rate
    copies = on.setup.workload.model.n_params * sh.grad_copy_bytes_per_param / sh.copy_Bps
    profiled = sum(la.bwd_time_s for la in on.setup.workload.profile.layers)
    assert bwd == pytest.approx(profiled + copies, rel=1e-9)


def test_the_flag_is_zeros_and_reported(cli) -> None:
    args = ["predict", "--model", "gpt2-medium", "--gpus", "16", "--gpu", "v100-sxm2"]
    args += ["--precision", "amp", "--batch", "2", "--seq-len", "1024", "--comm", "zero2"]
    code, out, _ = cli(*args, "--no-contiguous-gradients")
    assert code == 0 and "contiguous_gradients off" in out
    code, _, err = cli(*args[:-2], "--comm", "fsdp", "--no-contiguous-gradients")
    assert code == 0 and "--no-contiguous-gradients" in err and "ignored" in err
