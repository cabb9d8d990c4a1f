#!/usr/bin/env bash
# Makes .whl/: Ray and its dependencies for the H200 host (CPython 3.12, x86_64, no internet), small enough
# to travel with the working tree (64 MiB in all). Ray's wheel is 75.6 MiB; 30.7 MiB of it is ray/jars/ray_dist.jar,
# used only by Java workers, so it is left out here (the rest of the wheel is unchanged; RECORD drops its line).
#   bash benchmarks/gpu/ray_wheels.sh   then carry .whl in the device call and
#   pip install -q --no-index --find-links .whl ray
set -euo pipefail
cd "$(dirname "$0")/../.."
RAY=${RAY_VERSION:-2.60.0}
rm -rf .whl && mkdir -p .whl
python -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
  "ray==$RAY" -d .whl
python - "$RAY" <<'PY'
import sys, zipfile
from pathlib import Path

src = next(Path(".whl").glob(f"ray-{sys.argv[1]}-cp312-*.whl"))
tmp = src.with_suffix(".slim")
with zipfile.ZipFile(src) as zin, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zout:
    for item in zin.infolist():
        if item.filename.startswith("ray/jars/"):
            continue
        data = zin.read(item)
        if item.filename.endswith(".dist-info/RECORD"):
            data = b"".join(l for l in data.splitlines(keepends=True) if not l.startswith(b"ray/jars/"))
        zout.writestr(item, data)
tmp.replace(src)
PY
du -ch .whl/* | tail -1
