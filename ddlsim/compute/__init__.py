"""One GPU's compute: the per-layer kernel model (convolution and GEMM routes, tensor cores),
element-wise passes by operator fusion, the software stack, the roofline and re-timing."""
