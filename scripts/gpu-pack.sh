#!/usr/bin/env bash
# Packs what a lent GPU machine lacks to run dtlab's GPU check (scripts/gpu-check.sh),
# into one git-ignored folder that travels with a call of the device tool (`carry`).
#
#     bash scripts/gpu-pack.sh            # then carry gpu-pack/ and, there, from the
#     bash scripts/gpu-check.sh           # root of the tree: bash scripts/gpu-check.sh
#
# The GPU machine (x86-64, CUDA 13, no MPI, no apt, no network; see GPU.md in the
# project's notes) gets:
#   debs/           Debian's MPICH and the libraries it and the tests link that such a
#                   machine may lack, as .deb files (gpu-check.sh unpacks them into a
#                   temporary folder, never into /)
#   bins.tar.xz     the programs the check runs, built here for sm_90 (BUILD=build-gpu,
#                   CUDA=1 CUDA_ARCH=90): the unit and multi-rank suites, stress, every
#                   lesson, train, collbench, gpubw and dttrace; and beside them
#                   bench/gloo_bench.py and bench/torch_step.py (the machine's own
#                   python3 and torch run them)
#   MANIFEST        what was packed, from which sources (gpu-check.sh warns when the
#                   tree there differs from them)
# and nothing else: the viewer (SDL) is not part of the GPU check. The build's own
# libraries (libc, libstdc++, libgcc_s) are on every machine that runs CUDA, and cuBLAS
# comes from the machine's CUDA or PyTorch: anything else a binary links that is not in
# debs/ stops the pack. Prints the pack's size; fails above 60 MiB (a call carries 64).
#
# Knobs (environment): PACK (default gpu-pack), BUILD (build-gpu), CUDA_ARCH (90).
set -u

cd "$(dirname "$0")/.." || exit 1
PACK=${PACK:-gpu-pack}
BUILD=${BUILD:-build-gpu}
CUDA_ARCH=${CUDA_ARCH:-90}
LIMIT_MIB=60
# MPICH and what it links (GPU.md), Check's libsubunit; zlib1g only in case the image
# lacks it (gpu-check.sh puts zlib, libudev and libnuma after the machine's own)
DEBS="mpich libmpich12 libhwloc15 libucx0 libnuma1 libslurm38 libsubunit0 libudev1 zlib1g
      libopenblas0-pthread libgfortran5 libquadmath0"
# packages every CUDA machine has: their libraries are not carried
BASE_PKGS="libc6 libstdc++6 libgcc-s1"

die() { echo "gpu-pack: $*" >&2; exit 1; }

for tool in make apt-get dpkg tar xz; do
    command -v "$tool" >/dev/null || die "needs $tool"
done

# ==== build: only what the check runs ====
bins=(train bench/collbench bench/gpubw dttrace tests/stress)
scripts=(bench/gloo_bench.py bench/torch_step.py)     # not built: packed as they are
for src in lessons/[0-9]*.c tests/unit_*.c tests/mpi_*.c; do
    case $src in
        lessons/*) bins+=("lessons/$(basename "$src" .c)") ;;
        tests/*) bins+=("tests/$(basename "$src" .c)") ;;
    esac
done
echo "gpu-pack: building ${#bins[@]} programs for sm_$CUDA_ARCH in $BUILD/"
mkdir -p "$BUILD" || die "cannot make $BUILD/"
make --no-print-directory CUDA=1 CUDA_ARCH="$CUDA_ARCH" BUILD="$BUILD" \
    -j"$(nproc 2>/dev/null || echo 2)" "${bins[@]/#/$BUILD/}" >"$BUILD/pack-make.log" 2>&1 ||
    { tail -n 30 "$BUILD/pack-make.log" >&2; die "the build failed (log: $BUILD/pack-make.log)"; }
grep -q "CUDA=1 CUDA_ARCH=$CUDA_ARCH " "$BUILD/config" ||
    die "$BUILD/config is not a CUDA=1 CUDA_ARCH=$CUDA_ARCH build: $(cat "$BUILD/config")"

# ==== the .debs ====
rm -rf "$PACK"
mkdir -p "$PACK/debs" || die "cannot make $PACK/"
# shellcheck disable=SC2086  # DEBS is a list of names
(cd "$PACK/debs" && apt-get download $DEBS) >"$PACK/apt.log" 2>&1 ||
    { cat "$PACK/apt.log" >&2; die "apt-get download failed"; }
rm -f "$PACK/apt.log"

# ==== what the binaries link: every library from debs/, the base, or CUDA ====
# the packages the .debs hold, and the owner of each library a binary loads here
carried=" $(for d in "$PACK"/debs/*.deb; do dpkg-deb -f "$d" Package; done | tr '\n' ' ') "
bad=""
for b in "${bins[@]}"; do
    while read -r lib path; do
        case $path in
            */libcublas*) continue ;;          # the GPU machine's CUDA or PyTorch has it
            not) bad="$bad $b:$lib(not found here)"; continue ;;
        esac
        pkg=$(dpkg -S "$(readlink -f "$path")" 2>/dev/null | head -n 1 | cut -d: -f1)
        [ -n "$pkg" ] || pkg=$(dpkg -S "$path" 2>/dev/null | head -n 1 | cut -d: -f1)
        case " $BASE_PKGS $carried" in
            *" ${pkg:-?} "*) ;;
            *) bad="$bad $b:$lib(${pkg:-no package})" ;;
        esac
    done < <(ldd "$BUILD/$b" | awk '$2 == "=>" { print $1, $3 }')
done
[ -z "$bad" ] || die "libraries that neither debs/ nor every machine has:$bad"

# ==== the programs ====
echo "gpu-pack: compressing the programs (xz)"
tar -cf - -C "$BUILD" "${bins[@]}" -C "$PWD" "${scripts[@]}" | xz -T0 -6 >"$PACK/bins.tar.xz" ||
    die "tar | xz failed"

# ==== the manifest ====
# sources: the hash gpu-check.sh recomputes there, without git
src_hash=$(find lib lessons tests bench -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.py' \) \
           -not -path 'tests/grade/*' | LC_ALL=C sort | xargs cat | sha256sum | cut -c1-16)
{
    echo "packed $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -m)"
    echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')" \
         "($(git status --porcelain 2>/dev/null | grep -c .) files changed or new)"
    echo "sources $src_hash"
    echo "build $BUILD: $(cat "$BUILD/config")"
    echo "nvcc $(nvcc --version 2>/dev/null | sed -n 's/.*release \([^,]*\),.*/\1/p')"
    echo "debs $(cd "$PACK/debs" && echo *.deb)"
    echo "programs ${bins[*]} ${scripts[*]}"
} >"$PACK/MANIFEST"

# ==== size ====
bytes=$(du -cb "$PACK" | tail -n 1 | cut -f1)
tree=$( { git ls-files -z; git ls-files -z -o --exclude-standard; } 2>/dev/null |
        du -cb --files0-from=- 2>/dev/null | tail -n 1 | cut -f1)
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
ls -l "$PACK" "$PACK/debs" | sed 's/^/  /'
echo "gpu-pack: $PACK/ is $(mib "$bytes"); with the working tree that travels" \
     "($(mib "${tree:-0}")): $(mib $((bytes + ${tree:-0}))) of the 64 MiB a call carries"
if [ "$bytes" -gt $((LIMIT_MIB * 1048576)) ]; then
    die "$PACK/ is over $LIMIT_MIB MiB"
fi
if [ $((bytes + ${tree:-0})) -gt $((64 * 1048576)) ]; then
    die "the working tree and $PACK/ are over 64 MiB together"
fi
echo "gpu-pack: done. Carry: [\"$PACK\"]; there: bash scripts/gpu-check.sh"
