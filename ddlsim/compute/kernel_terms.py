"""The terms the convolution kernel model is stated in: the three passes, a convolution's
shape (:class:`ConvShape`) and the model's fitted coefficients (:class:`KernelModel`).

Shared by the routes (:mod:`ddlsim.compute.kernel_routes`) and the model that picks among them
(:mod:`ddlsim.compute.kernels`), so that neither imports the other for its types.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from ddlsim.errors import ConfigError

#: the passes of a convolution: forward, data gradient, filter (weight) gradient
PASSES = ("fwd", "bwd_data", "bwd_filter")


@dataclass(frozen=True)
class ConvShape:
    """One convolution: NCHW input ``batch x in_c x in_h x in_w``, ``out_k`` filters of
    ``filter_h x filter_w``, zero padding and stride per side (cuDNN's description)."""

    batch: int
    in_h: int
    in_w: int
    in_c: int
    out_k: int
    filter_h: int
    filter_w: int
    pad_h: int = 0
    pad_w: int = 0
    stride_h: int = 1
    stride_w: int = 1

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            low = 0 if f.name.startswith("pad") else 1
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ConfigError(f"{f.name} must be an integer >= {low}, got {value!r}")
        if self.out_h < 1 or self.out_w < 1:
            raise ConfigError(
                f"a {self.filter_h}x{self.filter_w} filter does not fit a padded "
                f"{self.in_h}x{self.in_w} input"
            )

    @property
    def out_h(self) -> int:
        """Output rows ``P``."""
        return (self.in_h + 2 * self.pad_h - self.filter_h) // self.stride_h + 1

    @property
    def out_w(self) -> int:
        """Output columns ``Q``."""
        return (self.in_w + 2 * self.pad_w - self.filter_w) // self.stride_w + 1

    @property
    def flops(self) -> float:
        """Useful FLOPs of one pass (a multiply-add counts 2; the three passes are equal)."""
        n, c, k = self.batch, self.in_c, self.out_k
        return 2.0 * n * k * self.out_h * self.out_w * c * self.filter_h * self.filter_w


@dataclass(frozen=True)
class KernelModel:
    """The model's coefficients (``data/kernel_model.json`` says what each stands for). The
    unprefixed ones are the CUDA-core kernels' (cuDNN 6.0, fitted on a P100 in fp32;
    ``call_overhead_s`` is cuDNN 6's fixed cost per call), the ``tc_`` ones the tensor-core
    kernels' (cuDNN 7.6, fitted on a V100 in fp16), ``cudnn7_call_overhead_s`` cuDNN 7.6's
    fixed cost per call, ``memory_efficiency`` the GPU's DRAM, shared by all. The
    ``winograd_``, ``fft_`` and ``transform_`` ones belong to the CUDA-core algorithms that are
    not an implicit GEMM (fused Winograd, FFT tiling, the extra kernels of multi-kernel
    algorithms), fitted on the P100 fp32 file and assumed for every library."""

    fwd_efficiency: float
    bwd_data_efficiency: float
    bwd_filter_efficiency: float
    tile_overhead_steps: float
    call_overhead_s: float
    col2im_efficiency: float
    tc_fwd_efficiency: float
    tc_bwd_data_efficiency: float
    tc_bwd_filter_efficiency: float
    tc_tile_overhead_steps: float
    tc_col2im_efficiency: float
    cudnn7_call_overhead_s: float
    memory_efficiency: float
    winograd_efficiency: float
    winograd_call_overhead_s: float
    fft_efficiency: float
    transform_kernel_s: float

    def efficiency(self, pass_: str, tensor_cores: bool = False) -> float:
        """Main-loop fraction of peak of the kernels of ``pass_`` (CUDA-core or tensor-core)."""
        prefix = "tc_" if tensor_cores else ""
        if pass_ not in PASSES:
            raise ConfigError(f"unknown pass {pass_!r}; valid: {', '.join(PASSES)}")
        return getattr(self, f"{prefix}{pass_}_efficiency")

    def tile_overhead(self, tensor_cores: bool) -> float:
        """Fixed reduction steps of one output tile of the CUDA-core or tensor-core kernels."""
        return self.tc_tile_overhead_steps if tensor_cores else self.tile_overhead_steps

    def col2im(self, tensor_cores: bool) -> float:
        """Efficiency of the strided data gradient over output pixels, relative to the GEMM's."""
        return self.tc_col2im_efficiency if tensor_cores else self.col2im_efficiency

    def with_values(self, **values: float) -> KernelModel:
        """A copy with some coefficients replaced (the fitting script's trial models)."""
        return KernelModel(**{**self.as_dict(), **values})

    def as_dict(self) -> dict[str, float]:
        """Coefficient name -> value."""
        return {f.name: getattr(self, f.name) for f in fields(self)}
