#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image (its Ubuntu
# base image): it installs with apt what dtlab's grader needs, builds dtlab's library and
# the exercise's grading programs in source/dtlab/build, and grades dtlab's own answer,
# which must get full marks, so that a broken image fails here and not on a learner.
#
# What the grader needs (the Makefile's RUN_DEBS and CHECK_DEBS, less what only
# programs other than the grader use, and the tools grade.sh runs):
#   build-essential              gcc (with AddressSanitizer), make, binutils (nm,
#                                readelf, objcopy: the rules read the learner's object)
#   mpich libmpich-dev           mpicc and mpiexec
#   zlib1g-dev libopenblas-dev   what libdt links against
#   pkg-config check libsubunit-dev   the suites are built with Check's headers
#   python3                      run_autograder writes results.json with it
# Paths: AUTOGRADER_ROOT (default /autograder), as run_autograder.
set -eu
root=${AUTOGRADER_ROOT:-/autograder}
src=$root/source
export DEBIAN_FRONTEND=noninteractive
if [ "${GS_SKIP_APT:-0}" != 1 ]; then
    apt-get update
    apt-get install -y --no-install-recommends build-essential mpich libmpich-dev \
        zlib1g-dev libopenblas-dev pkg-config check libsubunit-dev python3 ca-certificates
fi

. "$src/autograder.env"
cd "$src/dtlab"
make -s --no-print-directory CUDA=0 BUILD=build -j"$(nproc)" build/libdt.a
# dtlab's answers (SOLUTION=1): this builds every grading program the exercise needs,
# and STRICT=1 fails the image unless they get full marks here, on this image
EXTRA=""
[ -d extra ] && EXTRA=extra
BUILD=build CUDA=0 EX=$DTLAB_EXERCISE SOLUTION=1 STRICT=1 EXTRA_TESTS=$EXTRA \
    bash tests/grade/grade.sh
echo "dtlab autograder for $DTLAB_EXERCISE: ready"
