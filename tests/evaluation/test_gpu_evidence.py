"""The GPU own-code verdict from evidence taken outside the candidate (evaluation/gpu_evidence.py), on
synthetic evidence: what the worker's watch would see of honest solutions and of the GPU cheats of
tests/adversarial."""

from __future__ import annotations

import pytest

from kernelgym.evaluation import rules
from kernelgym.evaluation.gpu_evidence import (
    FOREIGN,
    OWN,
    PROFILED,
    RUNTIME,
    TIMED,
    TORCH,
    TORCH_COMPUTE,
    TORCH_HEAVY,
    TORCH_HOUSEKEEPING,
    UNKNOWN,
    UNTIMED,
    VENDOR,
    BatchLaunches,
    GpuLaunchEvidence,
    code_kind,
    judge,
    kernel_kind,
    launch_key,
    torch_kernel_kind,
)

TORCH_FOLDERS = ("/site/torch/", "/site/torch.libs/")
VENDOR_FOLDERS = ("/site/nvidia/", "/usr/local/cuda/", "/usr/lib/x86_64-linux-gnu/")  # installed there
OWN_FILES = {"/eval/build/ext.so", "/eval/triton/__triton_launcher.so"}
HINT = (rules.TORCH_COMPUTE, "the in-process profile says so")

# kernels as the runtime's `func` argument names them (host stubs' mangled names)
FILL = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_"
RMS = "_ZN2at6native12_GLOBAL__N_124vectorized_rms_norm_kernelIffEEviT_PKS3_PS3_"
FLASH = "_ZN13pytorch_flash15flash_fwd_kernelI23Flash_fwd_kernel_traitsEEvNS_16Flash_fwd_paramsE"


def _batch(number: int, phase: str = TIMED, calls: int = 16, **launches) -> BatchLaunches:
    """launches: name -> (LaunchKey, launches per call, threads per launch or None)."""
    batch = BatchLaunches(number, phase, calls)
    for key, per_call, threads in launches.values():
        batch.add(key, per_call * calls, None if threads is None else threads * per_call * calls)
    return batch


def _evidence(*batches: BatchLaunches) -> GpuLaunchEvidence:
    return GpuLaunchEvidence(True, batches=list(batches))


def _timed(count: int = 5, profiled: bool = True, **launches) -> list[BatchLaunches]:
    batches = [_batch(i + 1, TIMED, **launches) for i in range(count)]
    return batches + ([_batch(count + 1, PROFILED, **launches)] if profiled else [])


OWN_TRITON = (launch_key(OWN, UNKNOWN), 1, None)  # Triton's launcher, cuLaunchKernelEx: size not read
OWN_CUDA = (launch_key(OWN, OWN), 1, 2_000_000)  # an extension's runtime launch: its dim3s are registers
ZEROS = (launch_key(TORCH, TORCH_HOUSEKEEPING), 1, 2_000_000)
TORCH_RMS = (launch_key(TORCH, TORCH_COMPUTE), 1, 2_097_152)
TOKEN = (launch_key(OWN, OWN), 1, 1)
CUBLAS = (launch_key(VENDOR, UNKNOWN), 1, None)


# classifying ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("path", "kind"), [
    ("/eval/build/ext.so", OWN),
    ("/eval/triton/__triton_launcher.so", OWN),
    ("/site/torch/lib/libtorch_cuda.so", TORCH),
    ("/site/nvidia/cublas/lib/libcublasLt.so.13", VENDOR),
    ("/site/nvidia/cuda_runtime/lib/libcudart.so.13", RUNTIME),
    ("/usr/lib/x86_64-linux-gnu/libcuda.so.1", RUNTIME),
    ("/eval/work/libcuda.so.1", FOREIGN),  # a runtime of its own: launches through it are not attributable
    ("/eval/work/libcublasLt.so.13", FOREIGN),  # a copy of cuBLAS the solution made: not the vendor's
    ("/eval/work/libmyblasLt.so.13", FOREIGN),
    ("/usr/lib/python3.12/lib-dynload/_ctypes.so", FOREIGN),  # a launch made through ctypes
    ("[anon exec]", FOREIGN),
])
def test_code_is_classified_by_where_it_is_installed(path, kind):
    assert code_kind(path, OWN_FILES, TORCH_FOLDERS, VENDOR_FOLDERS) == kind


def test_without_vendor_folders_names_decide_as_before():
    assert code_kind("/anywhere/libcublasLt.so.13", set(), TORCH_FOLDERS) == VENDOR
    assert code_kind("/usr/lib/x86_64-linux-gnu/libcuda.so.1", set(), TORCH_FOLDERS) == RUNTIME


@pytest.mark.parametrize(("symbol", "kind"), [
    (FILL, TORCH_HOUSEKEEPING),
    ("_ZN2at6native18elementwise_kernelILi128ELi4EZNS0_22gpu_kernel_impl_nocastIZZZNS0_23direct_copy_kernel_cuda",
     TORCH_HOUSEKEEPING),
    ("_ZN2at6native12_GLOBAL__N_119CatArrayBatchedCopyIfjLi2ELi128ELi1EEEvPT_", TORCH_HOUSEKEEPING),
    (RMS, TORCH_COMPUTE),
    ("_ZN2at6native12_GLOBAL__N_119cunn_SoftMaxForwardILi4EfffNS1_22SoftMaxForwardEpilogueEEEvPT2_PKT0_l",
     TORCH_COMPUTE),
    (FLASH, TORCH_HEAVY),
    ("_ZN7cutlass7Kernel2I31cutlass_80_simt_sgemm_128x128_8x4EEvNT_6ParamsE", TORCH_HEAVY),
    ("", TORCH_COMPUTE),  # a stub without a name: compute
])
def test_pytorch_kernels_by_their_stub(symbol, kind):
    assert torch_kernel_kind(symbol) == kind


def test_a_runtime_launch_is_judged_by_the_kernel_it_launched():
    lib = "/site/torch/lib/libtorch_cuda.so"
    assert kernel_kind(lib, RMS, OWN_FILES, TORCH_FOLDERS) == TORCH_COMPUTE
    assert kernel_kind("/eval/build/ext.so", "_Z6relu_kPKfPfl", OWN_FILES, TORCH_FOLDERS) == OWN
    assert kernel_kind(None, "", OWN_FILES, TORCH_FOLDERS) == UNKNOWN  # a driver launch: opaque handle
    assert kernel_kind("/site/nvidia/cuda_runtime/lib/libcudart.so.13", "cudaLaunchKernel", OWN_FILES,
                       TORCH_FOLDERS) == FOREIGN


def test_a_driver_launch_takes_its_callers_kind():
    assert launch_key(OWN, UNKNOWN).kernel == OWN  # Triton's launcher, an extension's static runtime
    assert launch_key(TORCH, UNKNOWN).kernel == TORCH_COMPUTE  # PyTorch's jiterator
    assert launch_key(VENDOR, UNKNOWN).kernel == VENDOR
    assert launch_key(TORCH, UNKNOWN, graph=True).kernel == UNKNOWN  # a graph: judged by what it holds


# honest solutions ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("own", [OWN_TRITON, OWN_CUDA], ids=["triton", "cuda"])
def test_honest_solutions_are_decided_ok(own):
    verdict = judge(_evidence(_batch(0, UNTIMED, calls=1, own=own), *_timed(own=own, zeros=ZEROS)))
    assert verdict.finding is None and verdict.decided


def test_an_honest_graph_of_own_kernels_is_ok():
    construct = _batch(0, UNTIMED, calls=1, own=OWN_TRITON, zeros=ZEROS)  # captured at construction
    graph = (launch_key(TORCH, UNKNOWN, graph=True), 1, None)  # torch.cuda.CUDAGraph.replay
    verdict = judge(_evidence(construct, *_timed(graph=graph)))
    assert verdict.finding is None and verdict.decided


def test_a_minor_pytorch_part_is_left_to_the_hint():
    """Own GEMM plus PyTorch's bias add over as many threads: half the compute threads; the outside evidence
    allows it, the in-process profile (time share) may still condemn it."""
    batches = _timed(own=OWN_CUDA, add=(launch_key(TORCH, TORCH_COMPUTE), 1, 2_000_000))
    assert judge(_evidence(*batches)).finding is None
    verdict = judge(_evidence(*batches), hint=HINT)
    assert verdict.finding == HINT and verdict.decided


# the cheats of tests/adversarial ---------------------------------------------------------------------------

def test_forged_profile_with_a_token_kernel_is_torch_compute():
    """triton_forge_gpu_profile_summary, cuda_forge_torch_profiler_names: PyTorch's rms_norm beside a
    <<<1, 1>>> token; the profile (the hint) says nothing is wrong."""
    verdict = judge(_evidence(*_timed(token=TOKEN, rms=TORCH_RMS)), hint=None)
    assert verdict.finding[0] is rules.TORCH_COMPUTE and verdict.decided


def test_a_token_of_unknown_size_is_judged_by_launches():
    """The same through Triton's launcher, whose launch size is not read: one PyTorch compute launch per own
    launch is not above the outside limit (the residual risk the docs name); two are."""
    assert judge(_evidence(*_timed(token=OWN_TRITON, rms=TORCH_RMS))).finding is None
    two = (launch_key(TORCH, TORCH_COMPUTE), 2, 2_097_152)
    assert judge(_evidence(*_timed(token=OWN_TRITON, rms=two))).finding[0] is rules.TORCH_COMPUTE


def test_pytorch_alone_is_torch_compute_in_any_timed_batch():
    batches = _timed(own=OWN_CUDA)
    batches[2] = _batch(3, TIMED, rms=TORCH_RMS, zeros=ZEROS)  # one batch of five left to PyTorch
    assert judge(_evidence(*batches)).finding[0] is rules.TORCH_COMPUTE


def test_cublas_through_ctypes_is_a_vendor_launch():
    """triton_cublas_via_ctypes_named_decoy (and its thread-per-call twin, where the watch follows new
    threads): cuBLAS's launches come from its library whoever called it."""
    verdict = judge(_evidence(*_timed(own=OWN_TRITON, gemm=CUBLAS)))
    assert verdict.finding[0] is rules.TORCH_COMPUTE and "vendor" in verdict.finding[1]


def test_pytorchs_heavy_kernels_are_never_allowed():
    flash = (launch_key(TORCH, TORCH_HEAVY), 1, 1_000_000)
    assert judge(_evidence(*_timed(own=OWN_CUDA, attention=flash))).finding[0] is rules.TORCH_COMPUTE


def test_launches_of_threads_born_in_a_batch_are_untracked():
    """triton_cublas_in_thread_born_per_call: the new threads' launches are counted (inherited counts) but
    cannot be attributed: honest code launches from the threads it is called on."""
    batches = _timed(own=OWN_TRITON)
    batches[3].unfollowed_launches = batches[3].calls
    finding = judge(_evidence(*batches)).finding
    assert finding[0] is rules.UNTRACKED_COMPUTE and "born" in finding[1]


def test_threads_the_watch_could_not_follow_leave_it_unverifiable():
    """Where no inherited count exists (uprobes made through the PMU), threads found new at a take may have
    launched unseen: nothing is found, but the evidence cannot stand behind an `ok`."""
    batches = _timed(own=OWN_TRITON)
    for batch in batches:
        batch.threads_born_unwatched = 1
    verdict = judge(_evidence(*batches))
    assert verdict.finding is None and not verdict.decided
    assert judge(_evidence(*batches), hint=HINT).finding == HINT


def test_a_graph_over_captured_cublas_is_torch_compute():
    """triton_graph_replay_hides_cublas: cuBLAS was launched once, at the first call (an untimed phase),
    inside the capture; the timed batches show a graph launch, a copy and the own epilogue only."""
    first_call = _batch(0, UNTIMED, calls=1, gemm=CUBLAS, own=OWN_TRITON)
    graph = (launch_key(TORCH, UNKNOWN, graph=True), 1, None)
    copy = (launch_key(TORCH, TORCH_HOUSEKEEPING), 1, 1_000_000)
    verdict = judge(_evidence(first_call, *_timed(graph=graph, copy=copy, own=OWN_TRITON)))
    assert verdict.finding[0] is rules.TORCH_COMPUTE and "graph" in verdict.finding[1]


def test_a_helper_process_is_untracked_compute():
    """triton_gemm_in_helper_process: its helper holds a CUDA context (and, watched system-wide, its
    launches are seen as a helper's)."""
    batches = _timed(own=OWN_TRITON)
    batches[0].cuda_helpers = (4242,)
    assert judge(_evidence(*batches)).finding[0] is rules.UNTRACKED_COMPUTE
    helper = (launch_key(TORCH, TORCH_HEAVY, helper=True), 1, None)
    assert judge(_evidence(*_timed(own=OWN_TRITON, gemm=helper))).finding[0] is rules.UNTRACKED_COMPUTE


def test_pytorchs_kernels_launched_through_the_solutions_library_are_torch_compute():
    """cuda_launches_laundered_through_got: the caller is the solution's library, the kernel PyTorch's."""
    laundered = (launch_key(OWN, TORCH_COMPUTE), 1, 2_097_152)
    verdict = judge(_evidence(*_timed(token=TOKEN, rms=laundered)))
    assert verdict.finding[0] is rules.TORCH_COMPUTE and "through" in verdict.finding[1]


def test_launches_from_code_the_judge_did_not_build_are_untracked():
    """A launch made through ctypes, or by a copy of cuBLAS renamed in the candidate's folder."""
    for key in (launch_key(FOREIGN, UNKNOWN), launch_key(FOREIGN, FOREIGN)):
        verdict = judge(_evidence(*_timed(own=OWN_TRITON, other=(key, 1, None))))
        assert verdict.finding[0] is rules.UNTRACKED_COMPUTE


def test_a_batch_without_own_launches():
    batches = _timed(own=OWN_TRITON)
    batches[1] = _batch(2, TIMED, zeros=ZEROS)
    assert judge(_evidence(*batches)).finding[0] is rules.KERNEL_NOT_CALLED
    batches[1] = _batch(2, TIMED)
    batches[1].batch_ms = 20.0  # GPU time with nothing launched: done elsewhere
    assert judge(_evidence(*batches), round_trip_ms=0.2).finding[0] is rules.UNTRACKED_COMPUTE


def test_missing_or_incomplete_evidence_decides_nothing():
    unavailable = judge(GpuLaunchEvidence(False, "uprobes refused"), hint=None)
    assert unavailable.finding is None and not unavailable.decided
    assert "not verifiable" in unavailable.notes[0]
    assert judge(GpuLaunchEvidence(False, "refused"), hint=HINT).finding == HINT  # the hint still condemns
    batches = _timed(own=OWN_TRITON)
    batches[0].lost = 3
    assert not judge(_evidence(*batches)).decided
    assert not judge(_evidence(_batch(0, UNTIMED, own=OWN_TRITON))).decided  # no timed batch watched


def test_the_hint_never_clears_an_outside_finding():
    verdict = judge(_evidence(*_timed(own=OWN_TRITON, gemm=CUBLAS)), hint=None)
    assert verdict.finding is not None


def test_the_summary_for_the_result():
    evidence = _evidence(_batch(0, UNTIMED, calls=1, gemm=CUBLAS), *_timed(count=2, own=OWN_TRITON))
    summary = evidence.summary()
    assert summary["batches"] == 4 and summary["available"]
    assert summary["launches"] == {UNTIMED: {"vendor/vendor": 1}, TIMED: {"own/own": 32},
                                   PROFILED: {"own/own": 16}}
    assert summary["lost"] == 0 and summary["unfollowed_launches"] == 0
