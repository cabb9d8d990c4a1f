"""Everything that compiles native code for a candidate, run in the trusted worker (never in the candidate).

One entry per kind of request (`serve.serve` dispatches a candidate's build request to it):

- lean C++ / CUDA (`kernelgym.kernels.load_cpp` / `load_cuda`): `kernelgym.kernels.compile_request`; the
  module that solutions import stays `kernelgym.kernels`.
- KernelBench-style `torch.utils.cpp_extension.load_inline` / `load`: `torch_ext.build`, which runs the split
  build (`torch_ext_split`, with `cuda_split` cutting a CUDA source into device and host units, its bindings
  in `split_binders` and its compilers and flags in `split_toolchain`) and falls back to torch's own build;
  torch's full header is precompiled by `torch_pch`.
- Triton's launcher and helper modules: `triton_build.build`.

Imports run one way: serve -> torch_ext -> torch_ext_split -> split_binders -> split_toolchain, cuda_split,
torch_pch -> kernels.
"""
