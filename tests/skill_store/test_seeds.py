"""The seed library: size, backend coverage, the techniques the spec asks for, well-formed records."""

from collections import Counter

from kernelgym.skill_store import seed_skills


def test_at_least_thirty_skills_across_backends():
    skills = seed_skills()
    assert len(skills) >= 30
    per_backend = Counter(b for s in skills for b in s.applies_when.backends)
    assert all(per_backend[b] >= 10 for b in ("cuda", "triton", "cpp")), per_backend
    assert all(s.status == "admitted" and s.provenance.source == "seed" for s in skills)
    assert {s.applies_when.bound for s in skills} == {"memory", "compute", "any"}


def test_required_techniques_are_present():
    text = {s.id: f"{s.title} {s.technique} {s.code_pattern}".lower() for s in seed_skills()}
    wanted = {
        "coalesced": "coalesc",
        "vectorized loads": "float4",
        "shared-memory tiling": "shared-memory tiling",
        "register blocking": "register",
        "warp shuffle": "__shfl",
        "online softmax": "running max",
        "welford": "welford",
        "epilogue fusion": "epilogue",
        "tl.dot": "tl.dot",
        "wmma": "wmma",
        "persistent kernels": "persistent",
        "autotuning": "autotune",
        "openmp simd": "omp parallel for simd",
        "cache blocking": "cache-blocked",
        "im2col": "im2col",
        "split-k": "split k",
        "unrolling": "unroll",
        "bank conflicts": "bank",
        "grid-stride": "grid-stride",
        "flash attention": "flash",
    }
    missing = [name for name, needle in wanted.items() if not any(needle in t for t in text.values())]
    assert not missing


def test_cpp_skills_teach_the_lean_form():
    cpp_only = [s for s in seed_skills() if s.applies_when.backends == ["cpp"]]
    assert cpp_only
    assert any("load_cpp" in s.code_pattern and 'extern "C"' in s.code_pattern for s in cpp_only)
    assert all(
        'extern "C"' in s.code_pattern or "#pragma" in s.code_pattern or "for (" in s.code_pattern
        for s in cpp_only
    )


def test_records_are_short_enough_for_a_prompt():
    for s in seed_skills():
        assert len(s.technique) < 800, s.id
        assert len(s.code_pattern.splitlines()) <= 16, s.id
        assert s.applies_when.patterns, s.id
