"""The own-code rule (issue 28): what the samples taken outside the candidate say about who did the work.

The end-to-end cases (a pure-PyTorch forward dressed up, a profile-aware passthrough, honest idioms) are in
tests/adversarial and tests/legit, through the real judge; these pin the rule's arithmetic and the
classification of the files and functions the samples fall in."""

from __future__ import annotations

import os
import shutil
from collections import Counter

import torch

from kernelgym.evaluation.code_kinds import GLUE, OTHER, OWN, TORCH, Classifier, is_housekeeping, readable
from kernelgym.evaluation.ip_sampler import executable_mappings_at
from kernelgym.evaluation.own_code import OwnCodeEvidence, decides, judge

TORCH_LIB = os.path.join(os.path.dirname(torch.__file__), "lib")


def _evidence(**kinds: int) -> OwnCodeEvidence:
    return OwnCodeEvidence(by_kind=Counter(kinds))


def test_work_left_to_torch_is_judged_and_honest_shares_pass():
    assert judge(_evidence(own=0, torch=70, glue=30), 0.3)[0] == "torch"
    assert judge(_evidence(own=50, torch=31, glue=18), 0.3)[0] == "torch"  # a diluted partial passthrough
    assert judge(_evidence(own=1, other=89, glue=10), 0.3)[0] == "other"  # numpy doing the work
    # the honest corpus: torch within a few percent of the samples, glue up to two thirds
    assert judge(_evidence(own=32, torch=2, glue=65), 0.3) is None
    assert judge(_evidence(own=69, torch=3, glue=28), 0.3) is None


def test_a_tiny_task_is_judged_only_when_its_few_samples_rule_out_honesty():
    # 14 samples of work, all of them PyTorch's: an honest solution's torch share (a few %) cannot give that
    assert judge(_evidence(own=0, torch=14, glue=24), 0.3)[0] == "torch"
    # a handful of samples that could be an honest solution's noise decide nothing
    assert judge(_evidence(own=3, torch=2, glue=20), 0.3) is None
    assert judge(_evidence(own=0, torch=2, glue=20), 0.3) is None


def _timed(batches: list[tuple[int, int]], glue: int = 0) -> OwnCodeEvidence:
    """Evidence of timed batches, each (own, torch) samples."""
    evidence = _evidence(own=sum(o for o, _ in batches), torch=sum(t for _, t in batches), glue=glue)
    evidence.timed_work = list(batches)
    return evidence


def test_own_code_in_a_few_batches_does_not_stand_for_the_rest():
    """The timing pays the median batch: PyTorch doing the work in two of three batches, own code burnt in
    the third, is 10% PyTorch pooled and two thirds PyTorch in the average batch."""
    cheat = _timed([(0, 5), (0, 5), (100, 0)] * 7)
    assert cheat.share(TORCH) < 0.1
    rule, message = judge(cheat, 0.3)
    assert rule == "torch" and "average timed batch" in message
    # honest batches of a few samples each, PyTorch now and then: within the limit either way
    assert judge(_timed([(3, 0), (2, 1), (4, 0), (3, 0), (2, 0), (5, 1)] * 3, glue=40), 0.3) is None
    # too few timed batches to weigh them one by one: the pooled share alone decides
    assert judge(_timed([(0, 5), (0, 5), (100, 0)]), 0.3) is None


def test_too_few_samples_hand_the_verdict_to_the_in_process_profile():
    """A passthrough whose few samples fell in glue (seen once in CI: judged ok) is not passed for want of
    evidence: the samples decide only with enough work, or when few already rule out honesty."""
    assert not decides(_evidence(own=0, torch=2, glue=20), 0.3)
    assert not decides(_evidence(own=0, torch=0, glue=20), 0.3)
    assert not decides(_evidence(own=3, torch=2, glue=20), 0.3)
    assert decides(_evidence(own=0, torch=14, glue=24), 0.3)
    assert decides(_evidence(own=32, torch=2, glue=65), 0.3)


def test_unavailable_sampling_decides_nothing():
    evidence = _evidence(own=0, torch=100)
    evidence.available = False
    assert judge(evidence, 0.3) is None


def test_files_are_classified_by_what_they_hold(tmp_path):
    built = tmp_path / "ext"
    built.mkdir()
    (built / "solution_ext.so").write_bytes(b"")
    classifier = Classifier()
    classifier.add_built(str(built))
    assert classifier.classify(str(built / "solution_ext.so")) == OWN
    assert classifier.classify(os.path.join(TORCH_LIB, "libtorch_cpu.so")) == TORCH
    assert classifier.classify(os.path.join(TORCH_LIB, "libc10.so")) == GLUE
    assert classifier.classify("/usr/lib/x86_64-linux-gnu/libc.so.6") == GLUE
    # what -ffast-math and -fopenmp make of a solution's own loops: glibc's vector math, the OpenMP runtime
    # (a helper's honest fast-math tanh was judged untracked_compute with 44-62% in libmvec)
    assert classifier.classify("/usr/lib/x86_64-linux-gnu/libmvec.so.1") == GLUE
    assert classifier.classify("/usr/lib/x86_64-linux-gnu/libgomp.so.1") == GLUE
    assert classifier.classify("[anon exec]") == OTHER
    numpy_core = "/opt/venv/lib/python3.11/site-packages/numpy/core/_multiarray_umath.so"
    assert classifier.classify(numpy_core) == OTHER


def test_a_runtime_library_name_is_not_enough(tmp_path):
    """A red team copied OpenBLAS into the candidate's folder as "libm.so.6-blas" and was judged ok: the
    name made it glue. A runtime library's name counts only for the system's files or the judge's own."""
    libm = next(p for p in ("/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib/x86_64-linux-gnu/libm.so.6",
                            "/lib64/libm.so.6", "/usr/lib64/libm.so.6") if os.path.exists(p))
    for name in ("libm.so.6-blas", "libgomp.so.1", "libstdc++.so.6", "libpython3.so"):
        copy = tmp_path / name
        shutil.copy(libm, copy)
        assert Classifier().classify(str(copy)) == OTHER, name
    assert Classifier().classify(libm) == GLUE
    mapped_here = [path for _, _, path, _ in executable_mappings_at(os.getpid())
                   if os.path.basename(path).startswith(("libstdc++", "libpython", "libgomp"))]
    for path in mapped_here:  # what the trusted process runs itself, wherever it was installed
        assert Classifier().classify(path) == GLUE, path


def test_torch_housekeeping_is_told_from_its_compute():
    # SLEEF: the vector math of a solution's own at::vec loop (an honest Sigmoid spent 42% there)
    assert is_housekeeping("Sleef_expf8_u10avx2") and is_housekeeping("Sleef_tanhf16_u10avx512f")
    # a row's view, for a kernel called per row; never index_select's compute
    assert is_housekeeping("_ZN2at6native13select_symintERKNS_6TensorElN3c106SymIntE")
    assert is_housekeeping("_ZN2at6native21as_strided_tensorimplERKNS_6TensorEN3c108ArrayRefIlEES6_")
    assert not is_housekeeping("_ZN2at6native16index_select_cpuERKNS_6TensorElS3_")
    assert is_housekeeping("_ZN2at6native12_GLOBAL__N_111fill_kernelERNS_14TensorIteratorERKN3c106ScalarE")
    assert is_housekeeping("_ZN3c1015CPUAllocatorImpl8allocateEm")
    assert is_housekeeping("_ZN5torch8autograd16validate_outputsERKSt6vectorINS0_4EdgeESaIS2_EE")  # engine
    assert not is_housekeeping("_ZN2at6nativeL15addmm_impl_cpu_ERNS_6TensorERKS1_S1_S1_RKN3c106ScalarES8_")
    assert not is_housekeeping("")  # a function without a name counts as compute
    assert not is_housekeeping("mkl_blas_avx512_sgemm_kernel_0")
    assert not is_housekeeping("mkl_blas_avx512_sgemm_scopy_right48_ea")  # packing is the GEMM's own work
    assert is_housekeeping("_ZN3c1012function_refIFvPPcPKlllEE11callback_fnIN2at6native4AVX216VectorizedLoop"
                           "2dIZZZNSA_18direct_copy_kernelERNS8_18TensorIteratorBaseEENKUlvE1_clEvE")
    assert not is_housekeeping("_ZN3c1012function_refIFvPPcPKlllEE11callback_fnIN2at6native4AVX216"
                               "VectorizedLoop2dIZZZNS9_12_GLOBAL__N_128clamp_min_scalar_kernel_implE")


def test_torch_samples_are_attributed_to_functions_of_its_library():
    from kernelgym.evaluation.symbols import symbols

    table = symbols(os.path.join(TORCH_LIB, "libtorch_cpu.so"))
    assert table is not None and len(table.starts) > 1000
    # the first function in the table, found again at its own file offset
    offset, _, vaddr = next(load for load in table.loads if load[2] <= table.starts[0] < load[2] + load[1])
    assert table.name_at(table.starts[0] - vaddr + offset)


def test_torch_functions_are_named_readably_in_feedback():
    mangled = ("_ZN3c1012function_refIFvPPcPKlllEE11callback_fnIN2at6native4AVX216VectorizedLoop2dIZZZNS9_"
               "12_GLOBAL__N_128clamp_min_scalar_kernel_implERNS8_18TensorIteratorBaseE")
    assert readable(mangled) == "clamp_min_scalar_kernel_impl"
    assert readable("mkl_blas_avx512_sgemm_kernel_0") == "mkl_blas_avx512_sgemm_kernel_0"
