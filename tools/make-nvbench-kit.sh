#!/usr/bin/env bash
# Assembles an offline kit of an older NVIDIA NVBench, the way
# ../shared/nvbench-kit keeps today's: NVBench at one commit with the sources
# its CMake would download (rapids-cmake, CPM.cmake, fmt, nlohmann/json),
# taken from stored GitHub snapshots (the `fetch` tool puts them under
# /work/.mirror), and a build.sh that points CMake at them. The kits are what
# tools/nvbench-versions.sh runs kernelwatch against on the GPU machine.
#
#   tools/make-nvbench-kit.sh 2023 .device-carry/nvbench-2023
#   tools/make-nvbench-kit.sh 2025 .device-carry/nvbench-2025
#
# 2023: NVBench 7521229 (2023-11-20): before --stopping-criterion, --no-batch,
#       throttle detection and the SM-clock sidecar; rapids-cmake 23.12.
# 2025: NVBench a36e15f (2025-05-07): --stopping-criterion and throttle
#       detection, still state.set_max_noise()/set_min_time(), no --no-batch;
#       rapids-cmake 25.04.
#
# CUDA 13 removed cudaDeviceProp's clock fields, which the 2023 NVBench reads:
# the patches in tools/nvbench-kit-patches/<version>/ are the smallest change
# that builds it with CUDA 13 (a project pinning it carries the same), listed
# in the kit's SOURCES.txt.
set -euo pipefail

version="${1:?usage: make-nvbench-kit.sh 2023|2025 DIR}"
kit="${2:?usage: make-nvbench-kit.sh 2023|2025 DIR}"
mirror="${MIRROR:-/work/.mirror}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

case "$version" in
  2023) nvbench=7521229 rapids=v23.12.00 cpm=0.38.5 fmt=9.1.0 json=v3.9.1 ;;
  2025) nvbench=a36e15f rapids=v25.04.00 cpm=0.40.0 fmt=11.1.4 json=v3.11.3 ;;
  *) echo "make-nvbench-kit: unknown version '$version' (2023 or 2025)" >&2; exit 2 ;;
esac

for repo in NVIDIA+nvbench rapidsai+rapids-cmake cpm-cmake+CPM.cmake fmtlib+fmt nlohmann+json; do
  [ -d "$mirror/$repo/repo" ] || { echo "make-nvbench-kit: $mirror/$repo/repo is missing (fetch github:${repo/+//})" >&2; exit 1; }
done

# export <repo> <rev> <dest> <paths...>: those of the paths one revision has
export_tree() {
  local repo="$1" rev="$2" dest="$3"; shift 3
  local present=() path
  for path in "$@"; do
    git -C "$mirror/$repo/repo" cat-file -e "$rev:$path" 2>/dev/null && present+=("$path")
  done
  mkdir -p "$dest"
  git -C "$mirror/$repo/repo" archive --format=tar "$rev" -- "${present[@]}" | tar -x -C "$dest"
}

rm -rf "$kit"
mkdir -p "$kit/deps/cpm-cache/cpm"
export_tree NVIDIA+nvbench "$nvbench" "$kit/nvbench" CMakeLists.txt LICENSE README.md cmake docs exec examples nvbench
export_tree rapidsai+rapids-cmake "$rapids" "$kit/deps/rapids-cmake" CMakeLists.txt LICENSE README.md RAPIDS.cmake init.cmake VERSION rapids-cmake
export_tree fmtlib+fmt "$fmt" "$kit/deps/fmt" CMakeLists.txt LICENSE.rst LICENSE README.rst README.md ChangeLog.rst ChangeLog.md include src support/cmake
export_tree nlohmann+json "$json" "$kit/deps/nlohmann_json" include LICENSE.MIT
# CPM's release workflow stamps the version into the file it publishes.
git -C "$mirror/cpm-cmake+CPM.cmake/repo" show "v$cpm:cmake/CPM.cmake" |
  sed "s/1\.0\.0-development-version/$cpm/" > "$kit/deps/cpm-cache/cpm/CPM_$cpm.cmake"

if [ -d "$here/nvbench-kit-patches/$version" ]; then
  for patch in "$here/nvbench-kit-patches/$version"/*.patch; do
    patch -d "$kit/nvbench" -p1 --quiet < "$patch"
  done
fi

cat > "$kit/SOURCES.txt" <<EOF
Made by kernelwatch's tools/make-nvbench-kit.sh $version from stored GitHub snapshots:
nvbench/               NVIDIA/nvbench $(git -C "$mirror/NVIDIA+nvbench/repo" rev-parse "$nvbench") ($(git -C "$mirror/NVIDIA+nvbench/repo" log -1 --format=%ad --date=short "$nvbench"))
deps/rapids-cmake/     rapidsai/rapids-cmake $rapids
deps/cpm-cache/        cpm-cmake/CPM.cmake v$cpm (version stamped)
deps/fmt/              fmtlib/fmt $fmt
deps/nlohmann_json/    nlohmann/json $json (include/)
Patches for CUDA 13: $(ls "$here/nvbench-kit-patches/$version" 2>/dev/null | tr '\n' ' ')
Licenses: NVBench and rapids-cmake Apache-2.0, fmt MIT-style, nlohmann/json MIT, CPM.cmake MIT.
EOF

cat > "$kit/build.sh" <<'EOF'
#!/usr/bin/env bash
# Offline build of this NVBench and its examples (SOURCES.txt): CMake is
# pointed at ./deps through the override variables rapids-cmake and CPM honour.
set -euo pipefail
KIT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BUILD_DIR="${BUILD_DIR:-$KIT/build}"
NVCC="${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
GENERATOR=(); command -v ninja >/dev/null && GENERATOR=(-G Ninja)
mkdir -p "$BUILD_DIR"
# NVBench downloads RAPIDS.cmake into the build tree unless it is there.
cp "$KIT/deps/rapids-cmake/RAPIDS.cmake" "$BUILD_DIR/NVBENCH_RAPIDS.cmake"
export GIT_CEILING_DIRECTORIES="$(dirname "$KIT")"
cmake -S "$KIT/nvbench" -B "$BUILD_DIR" "${GENERATOR[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90}" -DCMAKE_CUDA_COMPILER="$NVCC" \
  -DNVBench_ENABLE_EXAMPLES=ON -DNVBench_ENABLE_TESTING=OFF -DNVBench_ENABLE_INSTALL_RULES=OFF \
  -DNVBench_ENABLE_WERROR=OFF -DNVBench_ENABLE_NVML="${NVBENCH_NVML:-OFF}" -DNVBench_ENABLE_CUPTI=OFF \
  -DCMAKE_POLICY_VERSION_MINIMUM=3.5 \
  "-DFETCHCONTENT_SOURCE_DIR_RAPIDS-CMAKE=$KIT/deps/rapids-cmake" -DFETCHCONTENT_FULLY_DISCONNECTED=ON \
  -DCPM_SOURCE_CACHE="$KIT/deps/cpm-cache" -DCPM_USE_LOCAL_PACKAGES=OFF \
  -DCPM_fmt_SOURCE="$KIT/deps/fmt" -DCPM_nlohmann_json_SOURCE="$KIT/deps/nlohmann_json"
cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}"
ls "$BUILD_DIR"/bin/nvbench.example.*
EOF
chmod +x "$kit/build.sh"
du -sh "$kit"
