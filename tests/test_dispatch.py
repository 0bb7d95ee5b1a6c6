"""The host's dispatch of a transformer step (ddlsim.compute.dispatch): eager PyTorch's floor
per stage, CUDA graphs, the executors that get none."""

from __future__ import annotations

import json
import math

import pytest

from ddlsim.calibration.transformer import Step, optimizer_step_s, transformer_profile
from ddlsim.compute.dispatch import dispatch_of, host_s
from ddlsim.compute.gemm import default_gemm_model
from ddlsim.compute.transformer_step import Numerics
from ddlsim.system import catalog
from ddlsim.workload.transformers.config import TransformerConfig
from ddlsim.workload.transformers.spec import transformer_spec
from ddlsim.workload.transformers.zoo import get_transformer

H100 = catalog.device("h100")
NUMERICS = Numerics("fp16", "fp16", fused_softmax=False, autocast=True)
#: a model whose kernels are all at their floors at micro-batch 1
TINY = TransformerConfig("tiny", layers=2, hidden=64, heads=2, ffn=256, vocab=512, seq_len=16)


def _profile(cfg, batch, dispatch, seq=None, device=H100, numerics=NUMERICS):
    seq = seq or cfg.seq
    spec = transformer_spec(cfg, seq)
    step = Step(batch, seq, 1, numerics, "adamw", dispatch=dispatch)
    return spec, transformer_profile(cfg, spec, device, step, "amp")


def test_a_tiny_model_at_batch_1_is_host_bound_and_its_step_is_ops_times_dispatch():
    m = default_gemm_model()
    spec, eager = _profile(TINY, 1, "eager")
    _, kernels = _profile(TINY, 1, "cuda-graphs")
    from ddlsim.calibration.transformer import _stages

    stages = _stages(TINY, Step(1, 16, 1, NUMERICS, "adamw"), H100)
    ops = extra = 0
    for layer in spec.layers:
        t = stages[layer.name.split("/")[0]]
        ops += t.fwd_ops + t.bwd_ops
        extra += t.bwd_extra_kernels
        assert t.fwd_s < host_s(t.fwd_ops) and t.bwd_s < host_s(t.bwd_ops, t.bwd_extra_kernels)
    launches = math.ceil(len(spec.tensors) / 64)  # the fused optimizer's multi-tensor launches
    want = (ops + launches) * m.event_dispatch_s + extra * m.issue_interval_s
    assert eager.step_time_s == pytest.approx(want, rel=1e-12)
    assert eager.step_time_s > 1.5 * kernels.step_time_s
    assert eager.provenance["numerics"]["host_bound_fraction"] > 0.3


def test_the_ops_a_block_dispatches_are_its_gemms_and_passes():
    from ddlsim.calibration.transformer import _stages
    from ddlsim.workload.transformers.structure import block

    blk = block(TINY, 1, 16)
    t = _stages(TINY, Step(1, 16, 1, NUMERICS, "adamw"), H100)["encoder"]
    # every GEMM and pass one op (the unfused softmax: scale, mask, softmax), a node each
    assert t.fwd_ops == len(blk.gemms) + len(blk.passes) + 2
    assert t.bwd_ops == t.fwd_ops
    # each GEMM's backward launches its weight gradient beside the data gradient; each
    # LayerNorm's its weights' gradients
    norms = sum(1 for p in blk.passes if p.name.rsplit("/", 1)[-1].startswith("norm"))
    assert t.bwd_extra_kernels == len(blk.gemms) + norms
    ckpt = Numerics("fp16", "fp16", fused_softmax=False, autocast=True, checkpointing=True)
    t2 = _stages(TINY, Step(1, 16, 1, ckpt, "adamw"), H100)["encoder"]
    assert t2.bwd_ops == 2 * t.fwd_ops  # the recompute's forward ops, from Python again


def test_a_large_step_is_gpu_bound_and_unchanged():
    cfg = get_transformer("gpt2-medium")
    _, eager = _profile(cfg, 16, "eager")
    _, kernels = _profile(cfg, 16, "cuda-graphs")
    assert eager.step_time_s == kernels.step_time_s
    assert eager.provenance["numerics"]["host_bound_fraction"] == 0.0


@pytest.mark.parametrize("name", ["bert-base", "gpt2"])
def test_step_grows_with_batch_and_the_host_bound_share_falls(name):
    cfg = get_transformer(name)
    steps, shares = [], []
    for batch in (1, 2, 4, 8, 16):
        _, p = _profile(cfg, batch, "eager", seq=128)
        steps.append(p.step_time_s)
        shares.append(p.provenance["numerics"]["host_bound_fraction"])
    assert steps == sorted(steps)
    assert shares == sorted(shares, reverse=True) and shares[0] > shares[-1]


@pytest.mark.parametrize("name", ["tiny", "bert-base", "gpt2", "bert-large"])
@pytest.mark.parametrize("batch", [1, 4, 32])
def test_cuda_graphs_are_never_slower(name, batch):
    cfg = TINY if name == "tiny" else get_transformer(name)
    _, eager = _profile(cfg, batch, "eager", seq=128)
    _, graphs = _profile(cfg, batch, "cuda-graphs", seq=128)
    assert graphs.step_time_s <= eager.step_time_s
    assert graphs.provenance["numerics"]["host_bound_fraction"] == 0.0


def test_a_per_tensor_optimizer_in_eager_pytorch_takes_its_ops_host_time():
    m = default_gemm_model()
    n, tensors = 1_000_000, 200
    gpu = optimizer_step_s(n, tensors, H100, "adamw", True, "per-tensor")
    eager = optimizer_step_s(n, tensors, H100, "adamw", True, "per-tensor", "eager")
    assert eager == pytest.approx(17 * tensors * m.event_dispatch_s) and eager > gpu
    fused = optimizer_step_s(n, tensors, H100, "adamw", True, "fused", "eager")
    assert fused == pytest.approx(4 * m.event_dispatch_s)  # 4 multi-tensor launches
    big = optimizer_step_s(100 * n, tensors, H100, "adamw", True, "fused", "eager")
    assert big == optimizer_step_s(100 * n, tensors, H100, "adamw", True, "fused")  # GPU-bound


def test_the_dispatch_follows_framework_fusion_and_cuda_graphs():
    assert dispatch_of("pytorch", None, False) == "eager"
    assert dispatch_of("pytorch", "none", True) == "cuda-graphs"
    assert dispatch_of("pytorch", "xla", False) == "xla"
    assert dispatch_of("tensorflow", None, True) == "graph-executor"
    assert dispatch_of("tensorflow", "xla", False) == "xla"
    assert dispatch_of("mxnet", None, False) == "engine"


def _tokens_per_s(cli, *flags):
    code, out, err = cli("predict", "--model", "gpt2", "--gpu", "h100", "--gpus", "1",
                         "--batch", "1", "--seq-len", "128", "--json", *flags)  # fmt: skip
    assert code == 0, err
    return json.loads(out)["inputs"]["transformer"]


def test_the_cli_shows_the_dispatch_and_cuda_graphs_lift_the_floor(cli):
    eager = _tokens_per_s(cli, "--framework", "pytorch")
    graphs = _tokens_per_s(cli, "--framework", "pytorch", "--cuda-graphs")
    tf = _tokens_per_s(cli, "--framework", "tensorflow")
    assert eager["numerics"]["dispatch"] == "eager"
    assert graphs["numerics"]["dispatch"] == "cuda-graphs"
    assert tf["numerics"]["dispatch"] == "graph-executor"
    assert graphs["tokens_per_sec"] > 1.3 * eager["tokens_per_sec"]
    code, out, _ = cli("predict", "--model", "gpt2", "--gpu", "h100", "--gpus", "1", "--batch",
                       "1", "--seq-len", "128", "--framework", "pytorch")  # fmt: skip
    assert code == 0 and "eager dispatch (GPU waits on the host" in out


def test_cuda_graphs_in_tensorflow_is_named_without_effect(cli):
    code, _, err = cli("predict", "--model", "bert-base", "--gpus", "1", "--cuda-graphs")
    assert code == 0 and "--cuda-graphs has no effect" in err
