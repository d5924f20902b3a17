#!/usr/bin/env bash
# make gradescope: Gradescope autograder zips, one per exercise (a Gradescope assignment
# grades one exercise), OUT/dtlab-autograder-NN_topic.zip. Each holds, at its root:
#
#   setup.sh          run once when Gradescope builds the image: installs with apt what
#                     the grader needs, builds dtlab's library and the exercise's grading
#                     programs, and checks that dtlab's own answer gets full marks
#   run_autograder    run for each submission: finds the learner's topic.c in
#                     /autograder/submission, grades it with tests/grade/grade.sh and
#                     writes /autograder/results/results.json (results.py)
#   results.py        the grader's per-case records (GRADE_RESULTS) -> results.json
#   autograder.env    the exercise, and the settings given to make gradescope
#   dtlab/            what grading builds: the Makefile, lib/, exercises/ (the READMEs and
#                     exercises.h; no answers), tests/harness.h, tests/grade/ (grade.sh,
#                     grade.h, the suites and dtlab's reference answers: not the learners'
#                     answers nor the planted mistakes), and extra/ with the hidden suites
#
# usage: bash tests/grade/gradescope/pack.sh OUT      (from dtlab's root; make gradescope)
# Environment: EX (the exercises; default all), EXTRA_TESTS (hidden suites DIR/NN_*.c,
# packed with their exercise), and settings recorded in autograder.env for run_autograder:
# GRADE_RANKS, GRADE_TIMEOUT, GRADE_WAIT, HINTS, GS_TIMEOUT (seconds for the whole
# grading, default 540: under Gradescope's default limit of 10 minutes, so that a
# result is written), GS_HIDDEN_VISIBILITY (the hidden cases' visibility, default
# after_published).
set -u
cd "$(dirname "$0")/../../.." || exit 1
out=${1:-}
[ -n "$out" ] || { echo "usage: pack.sh OUT" >&2; exit 2; }
EX=${EX:-}
EXTRA_TESTS=${EXTRA_TESTS:-}
if [ -n "$EXTRA_TESTS" ] && [ ! -d "$EXTRA_TESTS" ]; then
    echo "gradescope: EXTRA_TESTS=$EXTRA_TESTS is not a directory" >&2
    exit 2
fi
command -v python3 >/dev/null || { echo "gradescope: python3 is needed to write the zip" >&2; exit 1; }

# The exercises that can be graded: a folder with its suite and dtlab's answer beside it
all=()
for d in exercises/[0-9][0-9]_*/; do
    e=$(basename "$d")
    [ -f "tests/grade/$e.c" ] && [ -f "tests/grade/ref/$e.c" ] && all+=("$e")
done
want=()
read -ra asked <<<"${EX//,/ }"
for x in ${asked[@]+"${asked[@]}"}; do
    [[ $x =~ ^[0-9]$ ]] && x=0$x
    found=0
    for e in "${all[@]}"; do
        if [ "$x" = "$e" ] || [ "$x" = "${e%%_*}" ]; then want+=("$e"); found=1; fi
    done
    [ "$found" = 1 ] || { echo "gradescope: there is no exercise '$x' (${all[*]})" >&2; exit 2; }
done
[ ${#want[@]} -gt 0 ] || want=("${all[@]}")

mkdir -p "$out" || exit 1
for e in "${want[@]}"; do
    stage=$out/stage-$e
    rm -rf "$stage"
    # (the files keep their dates, in the zip too: a build made from these same files
    # stays current beside them, as tests/gradescope.sh's does)
    mkdir -p "$stage/dtlab/tests/grade/ref" "$stage/dtlab/exercises" || exit 1
    cp -p tests/grade/gradescope/setup.sh tests/grade/gradescope/run_autograder \
        tests/grade/gradescope/results.py "$stage/" || exit 1
    cp -p Makefile "$stage/dtlab/" && cp -rp lib "$stage/dtlab/" &&
        cp -p tests/harness.h "$stage/dtlab/tests/" &&
        cp -p tests/grade/grade.sh tests/grade/grade.h "$stage/dtlab/tests/grade/" || exit 1
    cp -p exercises/exercises.h exercises/README.md "$stage/dtlab/exercises/" || exit 1
    for x in "${all[@]}"; do
        mkdir -p "$stage/dtlab/exercises/$x"
        cp -p "exercises/$x/README.md" "$stage/dtlab/exercises/$x/" 2>/dev/null
        cp -p "tests/grade/$x.c" "$stage/dtlab/tests/grade/" &&
            cp -p "tests/grade/ref/$x.c" "$stage/dtlab/tests/grade/ref/" || exit 1
    done
    hidden=0
    if [ -n "$EXTRA_TESTS" ]; then
        for f in "$EXTRA_TESTS/${e%%_*}"_*.c; do
            [ -e "$f" ] || continue
            mkdir -p "$stage/dtlab/extra" && cp -p "$f" "$stage/dtlab/extra/" || exit 1
            hidden=$((hidden + 1))
        done
    fi
    { echo "# written by make gradescope; the environment, when it sets one, wins"
      printf 'DTLAB_EXERCISE=%q\n' "$e"
      for v in GRADE_RANKS GRADE_TIMEOUT GRADE_WAIT HINTS GS_TIMEOUT GS_HIDDEN_VISIBILITY; do
          [ -n "${!v:-}" ] && printf ': "${%s=%q}"\n' "$v" "${!v}"
      done; } >"$stage/autograder.env"
    zip=$out/dtlab-autograder-$e.zip
    rm -f "$zip"
    # (python's zipfile: the scripts keep their modes, the files are at the zip's root)
    python3 - "$stage" "$zip" <<'EOF' || exit 1
import os, sys, zipfile
stage, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as z:
    for top, dirs, files in os.walk(stage):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(top, name)
            info = zipfile.ZipInfo.from_file(path, os.path.relpath(path, stage))
            mode = 0o755 if os.access(path, os.X_OK) or name == "setup.sh" else 0o644
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            with open(path, "rb") as f:
                z.writestr(info, f.read())
EOF
    rm -rf "$stage"
    msg=$zip
    [ "$hidden" -gt 0 ] && msg+=" (with $hidden hidden suite(s) from $EXTRA_TESTS)"
    echo "$msg"
done
