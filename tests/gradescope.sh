# Section 20 of tests/run.sh: the grader as a course uses it (docs/course.md).
#
#   1. Gradescope: make gradescope's zip for exercise 02 (tests/grade/gradescope/pack.sh)
#      holds setup.sh and run_autograder, executable, at its root, and none of the
#      learners' answers; unpacked as Gradescope lays it out (source/, submission/,
#      results/ under AUTOGRADER_ROOT: no root needed), with dtlab's library of $BUILD
#      beside it (the zip keeps the files' dates, so make finds that build current and
#      only the grading programs are built), run_autograder grades a learner's correct
#      answer (tests/grade/learner), a planted mistake (tests/grade/mistakes), an empty
#      submission, one that does not compile (sent as a whole repository) and one that
#      runs past GS_TIMEOUT; results.json is read with python's json and held to the
#      fields Gradescope documents (tests/grade/gradescope/results.py) and to the scores
#   2. make grade-class (tests/grade/class.sh): 20 students generated from the same
#      answers: correct, mistaken, crashing, hanging, a fork bomb, a memory hog, a
#      printing flood, not compiling, missing, a symbolic link into another's folder, the
#      untouched stub twice, and pairs identical once comments and whitespace are
#      removed; the CSV gives each the right points and first failure, flags exactly the
#      pairs, and the submissions' folder is unchanged. Short limits here: CLASS_TIMEOUT
#      15 s (a correct answer's grading takes 2-8 s on 2 busy cores; the hang outlasts
#      it, as one run may take GRADE_TIMEOUT, 60 s here; a crash, a memory hog or a
#      flood may run out of time too on a machine loaded enough, for 0 points all the
#      same), 2 ranks, a wait of 1 s; the defaults are in class.sh
#
# run.sh sources this file and calls gradescope_tests; it uses run.sh's report, skip, now,
# since, missing, $tmp, $log and $BUILD.

gradescope_tests() {
    local d=$tmp/gradescope ex=02_reduce_scatter t0 rc why
    local answer=tests/grade/learner/$ex/reduce_scatter.c
    if [ ! -f "$BUILD/libdt.a" ]; then
        missing "make gradescope" "$BUILD/libdt.a"
        return
    fi
    command -v python3 >/dev/null 2>&1 || { skip "make gradescope, make grade-class" "no python3"; return; }
    rm -rf "$d" && mkdir -p "$d"

    # ---- 2. a class at once: 20 students, graded in the background ----
    local c=$d/class
    mkdir -p "$c"
    # student NAME CONTENT-FILE: NAME/02_reduce_scatter/reduce_scatter.c
    student() { mkdir -p "$c/$1/$ex" && cp "$2" "$c/$1/$ex/reduce_scatter.c"; }
    local v=$d/variants
    mkdir -p "$v"
    sed 's|$| // mine|' "$answer" >"$v/commented"
    sed -e 's/^ */&  /' -e 's/, /,/g' "$answer" >"$v/spaced"
    sed 's/\bin\b/scratch/g' "$answer" >"$v/renamed"
    sed 's|$| // ours|' "$v/renamed" >"$v/renamed-commented"
    sed -e 's/^ */&\t/' -e 's/ = /=/g' "$v/renamed" >"$v/renamed-spaced"
    sed -f tests/grade/mistakes/off_by_one_chunk/$ex.learner.sed "$answer" >"$v/mistake"
    sed 's|$|  // x|' "$v/mistake" >"$v/mistake-commented"
    sed 's/^ */&   /' "$v/mistake" >"$v/mistake-spaced"
    at_start() { sed "s|^    int rank, n;|    int rank, n;\n$1|" "$answer" >"$v/$2"; }
    at_start '    *(volatile int *)0 = rank;' crash
    at_start '    for (;;) { }' hang
    { echo '#include <unistd.h>'; at_start '    while (fork() >= 0) { }' x && cat "$v/x"; } >"$v/forkbomb"
    { echo '#include <string.h>'
      at_start '    for (;;) { char *p = malloc(1 << 24); if (p) memset(p, 1, 1 << 24); }' x &&
      cat "$v/x"; } >"$v/memhog"
    { echo '#include <stdio.h>'
      at_start '    for (;;) printf("a learner who prints and prints %p\\n", (void *)buf);' x &&
      cat "$v/x"; } >"$v/flood"
    sed 's/int rank, n;/int rank, n/' "$answer" >"$v/nobuild"
    # (names in alphabetical order: the students who crash, hang or bomb come first)
    student "a-crash" "$v/crash"
    student "b-hang" "$v/hang"
    student "c-forkbomb" "$v/forkbomb"
    student "d-memhog" "$v/memhog"
    student "e-flood" "$v/flood"
    student "f-nobuild" "$v/nobuild"
    mkdir -p "$c/g-missing" && echo "forgot the file" >"$c/g-missing/notes.txt"
    mkdir -p "$c/h-link/$ex" && ln -s "../../p-correct/$ex/reduce_scatter.c" "$c/h-link/$ex/reduce_scatter.c"
    student "i-stub" "exercises/$ex/reduce_scatter.c"
    student "j-stub" "exercises/$ex/reduce_scatter.c"
    student "k-pair-a1" "$v/renamed-commented"
    student "l-pair-a2" "$v/renamed-spaced"
    student "m-pair-b1" "$v/mistake-commented"
    student "n-pair-b2" "$v/mistake-spaced"
    student "o-extra-files" "$answer"
    echo "my notes" >"$c/o-extra-files/notes.txt" && cp "$v/crash" "$c/o-extra-files/$ex/old.c"
    student "p-correct" "$answer"
    student "q-correct-late" "$v/spaced"
    student "r o'neil \$x" "$answer"
    student "s-mistake" "$v/mistake-commented"
    mkdir -p "$c/t-empty"
    local before
    before=$(cd "$c" && find . -print0 | sort -z | xargs -0 ls -ld --time-style=+%s 2>/dev/null |
             awk '{ $2 = ""; print }' | sha256sum)
    # (graded in the background while part 1 runs: the class mostly waits out its
    # students' limits, part 1 its time-out case)
    local t1 class_pid
    t1=$(now)
    { BUILD=$BUILD CUDA=${CUDA:-} SUBMISSIONS=$c EX=02 CLASS_OUT=$d/class-out CLASS_TIMEOUT=15 \
        CLASS_MEM_MB=256 CLASS_FILE_MB=16 GRADE_RANKS=2 GRADE_TIMEOUT=60 GRADE_WAIT=1 \
        bash tests/grade/class.sh >"$d/class.log" 2>&1 </dev/null
      echo $? >"$d/class.rc"; } &
    class_pid=$!

    # ---- 1. the zip ----
    t0=$(now)
    EX=02 EXTRA_TESTS= bash tests/grade/gradescope/pack.sh "$d/zips" >"$log" 2>&1
    rc=$?
    local zip=$d/zips/dtlab-autograder-$ex.zip
    local ag=$d/ag
    why=$(python3 - "$zip" "$ag" <<'EOF' 2>&1
import os, sys, time, zipfile
zip, ag = sys.argv[1], sys.argv[2]
z = zipfile.ZipFile(zip)
names = z.namelist()
for need in ("setup.sh", "run_autograder", "results.py", "autograder.env", "dtlab/Makefile",
             "dtlab/tests/grade/grade.sh", "dtlab/tests/grade/ref/02_reduce_scatter.c"):
    if need not in names:
        sys.exit(f"{need} is not in the zip")
for x in ("setup.sh", "run_autograder"):
    if not (z.getinfo(x).external_attr >> 16) & 0o111:
        sys.exit(f"{x} is not executable in the zip")
bad = [n for n in names if "/learner/" in n or "/mistakes/" in n or n.startswith("dtlab/build")
       or (n.startswith("dtlab/exercises/") and n.endswith(".c"))]
if bad:
    sys.exit(f"the zip holds answers or builds: {bad[:3]}")
# unpacked as Gradescope does: the zip in source/, run_autograder copied beside it
src = os.path.join(ag, "source")
for info in z.infolist():
    path = z.extract(info, src)
    os.chmod(path, (info.external_attr >> 16) & 0o777 or 0o644)
    t = time.mktime(info.date_time + (0, 0, -1))
    os.utime(path, (t, t))
EOF
)
    if [ "$rc" = 0 ] && [ -z "$why" ]; then
        report "make gradescope: the zip for $ex" 1 "$(du -k "$zip" | cut -f1) KiB  [$(since "$t0")]"
    else
        echo "$why" >>"$log"
        report "make gradescope: the zip for $ex" 0 "${why:-pack.sh: exit $rc}"
        wait "$class_pid"      # (the class's grading, left to end before the folder goes)
        return
    fi
    cp "$ag/source/run_autograder" "$ag/run_autograder"
    mkdir -p "$ag/source/dtlab/build/obj"
    cp -p "$BUILD/config" "$BUILD/libdt.a" "$ag/source/dtlab/build/" &&
        cp -rp "$BUILD/obj/lib" "$ag/source/dtlab/build/obj/"
    # (section 7's grading objects too, when it ran: make rebuilds what is older than
    # its source)
    if [ -d "$BUILD/obj/tests/grade" ]; then
        mkdir -p "$ag/source/dtlab/build/obj/tests" &&
            cp -rp "$BUILD/obj/tests/grade" "$ag/source/dtlab/build/obj/tests/"
    fi

    # gs_run NAME: run_autograder on $ag/submission as it is now, into $d/NAME.json
    gs_run() {
        rm -rf "$ag/results" && mkdir -p "$ag/results"
        t0=$(now)
        AUTOGRADER_ROOT=$ag GRADE_RANKS="1 2" GRADE_WAIT=2 GRADE_TIMEOUT=10 \
            "$ag/run_autograder" >"$log" 2>&1 </dev/null
        rc=$?
        cp "$ag/results/results.json" "$d/$1.json" 2>/dev/null
    }
    # gs_check NAME TITLE SCORE|below|zero WORDS: results.json against Gradescope's
    # fields, its score, and WORDS in the top-level output
    gs_check() {
        why=$(python3 - "$d/$1.json" "$3" "$4" <<'EOF' 2>&1
import json, sys
path, want, words = sys.argv[1], sys.argv[2], sys.argv[3]
try:
    r = json.load(open(path))
except Exception as e:
    sys.exit(f"no results.json, or not JSON: {e}")
top = {"score", "execution_time", "output", "output_format", "test_output_format",
       "test_name_format", "visibility", "stdout_visibility", "extra_data", "tests", "leaderboard"}
test = {"score", "max_score", "status", "name", "name_format", "number", "output",
        "output_format", "tags", "visibility", "extra_data"}
vis = {"visible", "hidden", "after_due_date", "after_published"}
fmt = {"text", "html", "simple_format", "md", "ansi"}
if set(r) - top: sys.exit(f"fields Gradescope does not know: {set(r) - top}")
if not isinstance(r.get("score"), (int, float)): sys.exit("no numeric score")
for k in ("output_format", "test_output_format", "test_name_format"):
    if k in r and r[k] not in fmt: sys.exit(f"{k} is {r[k]!r}")
t = r.get("tests", [])
if len(t) != 3: sys.exit(f"{len(t)} tests, not the 3 cases of 02")
for x in t:
    if set(x) - test: sys.exit(f"test fields Gradescope does not know: {set(x) - test}")
    if x.get("visibility", "visible") not in vis: sys.exit(f"visibility {x['visibility']!r}")
    if x.get("status") not in ("passed", "failed"): sys.exit(f"status {x.get('status')!r}")
    if not (0 <= x["score"] <= x["max_score"]): sys.exit(f"score {x['score']} of {x['max_score']}")
    if (x["status"] == "passed") != (x["score"] == x["max_score"]):
        sys.exit(f"{x['name']}: status {x['status']} with {x['score']}/{x['max_score']}")
    if not isinstance(x.get("output"), str) or not x["output"]: sys.exit("a test without output")
if sum(x["max_score"] for x in t) != 10: sys.exit("the cases' max_score do not add to 10")
if abs(sum(x["score"] for x in t) - r["score"]) > 1e-9 and r["score"] != 0:
    sys.exit("the score is not the tests' sum")
s = r["score"]
if want == "below" and (s >= 10 or r["output"].startswith("Not graded")):
    sys.exit(f"score {s}, want below 10, graded")
if want == "zero" and s != 0: sys.exit(f"score {s}, want 0")
if want not in ("below", "zero") and s != float(want): sys.exit(f"score {s}, want {want}")
if want == "zero" and any(x["score"] for x in t): sys.exit("a test scored in a zero result")
for w in words.split("|"):
    if w and w not in r["output"]: sys.exit(f"the output does not say {w!r}:\n{r['output'][:600]}")
print(f"ok: score {s:g}/10")
EOF
)
        if [ "$rc" = 0 ] && [[ $why == "ok: "* ]]; then
            report "run_autograder: $2" 1 "${why#ok: }  [$(since "$t0")]"
        else
            echo "$why" >>"$log"
            report "run_autograder: $2" 0 "$(echo "$why" | head -n 1)${rc:+ (exit $rc)}"
        fi
    }

    local sub=$ag/submission
    rm -rf "$sub" && mkdir -p "$sub" && cp "$answer" "$sub/"
    gs_run correct
    gs_check correct "a correct answer" 10 "Graded reduce_scatter.c"
    rm -rf "$sub" && mkdir -p "$sub/$ex"
    sed -f tests/grade/mistakes/off_by_one_chunk/$ex.learner.sed "$answer" >"$sub/$ex/reduce_scatter.c"
    gs_run mistake
    gs_check mistake "a planted mistake (off_by_one_chunk)" below "off by 1"
    python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))["tests"]; sys.exit(not any("off by 1" in x["output"] and x["status"] == "failed" for x in t))' \
        "$d/mistake.json" 2>/dev/null &&
        report "  its failed case says why (your chunks are off by 1)" 1 "" ||
        report "  its failed case says why (your chunks are off by 1)" 0 "no failed test says 'off by 1'"
    rm -rf "$sub" && mkdir -p "$sub"
    gs_run empty
    gs_check empty "an empty submission" zero "Not graded|has no reduce_scatter.c|Nothing was received"
    rm -rf "$sub" && mkdir -p "$sub/dtlab/exercises/$ex"
    sed 's/int rank, n;/int rank, n/' "$answer" >"$sub/dtlab/exercises/$ex/reduce_scatter.c"
    gs_run nobuild
    gs_check nobuild "a file that does not compile" zero "does not compile|error"
    rm -rf "$sub" && mkdir -p "$sub"
    sed 's/^    int rank, n;/    int rank, n;\n    for (;;) { }/' "$answer" >"$sub/reduce_scatter.c"
    GS_TIMEOUT=3 gs_run timeout
    gs_check timeout "a grading past GS_TIMEOUT (3 s)" zero "did not end within 3 s"

    # ---- 2. a class at once: its verdicts (graded beside part 1, above) ----
    wait "$class_pid"
    rc=$(cat "$d/class.rc" 2>/dev/null || echo 1)
    cp "$d/class.log" "$log"
    local took
    took=$(since "$t1")
    why=$(python3 - "$d/class-out/results.csv" <<'EOF' 2>&1
import csv, sys
rows = {r["student"]: r for r in csv.DictReader(open(sys.argv[1]))}
if len(rows) != 20: sys.exit(f"{len(rows)} rows, want 20")
def expect(name, pts, first="", same=""):
    r = rows[name]
    p = int(r["points"])
    if pts == "below" and not 0 < p < 10 or pts != "below" and p != pts:
        sys.exit(f"{name}: {p} points, want {pts} ({r['first failure']})")
    if r["max"] != "10": sys.exit(f"{name}: max {r['max']}")
    if first is None and r["first failure"]: sys.exit(f"{name}: first failure {r['first failure']!r}")
    if first and not any(f in r["first failure"] for f in first.split("|")):
        sys.exit(f"{name}: first failure {r['first failure']!r}, want {first!r}")
    if sorted(r["identical to"].split()) != sorted(same.split()):
        sys.exit(f"{name}: identical to {r['identical to']!r}, want {same!r}")
# (a crash, a memory hog or a flood may also run out of time on a loaded machine: 0 too)
expect("a-crash", 0, "sum:|timed out")
expect("b-hang", 0, "timed out")
expect("c-forkbomb", 0, "fork")
expect("d-memhog", 0, "sum:|timed out")
expect("e-flood", 0, "sum:|timed out")
expect("f-nobuild", 0, "does not build")
expect("g-missing", 0, "no 02_reduce_scatter/reduce_scatter.c")
expect("h-link", 0, "symbolic link")
expect("i-stub", 0, "not implemented")
expect("j-stub", 0, "not implemented")
expect("k-pair-a1", 10, None, "l-pair-a2")
expect("l-pair-a2", 10, None, "k-pair-a1")
expect("m-pair-b1", 0, "off by 1", "n-pair-b2 s-mistake")
expect("n-pair-b2", 0, "off by 1", "m-pair-b1 s-mistake")
expect("o-extra-files", 10, None, "p-correct q-correct-late r o'neil $x")
expect("p-correct", 10, None, "o-extra-files q-correct-late r o'neil $x")
expect("q-correct-late", 10, None, "o-extra-files p-correct r o'neil $x")
expect("s-mistake", 0, "off by 1", "m-pair-b1 n-pair-b2")
expect("t-empty", 0, "no 02_reduce_scatter")
print("20 students as expected")
EOF
)
    if [ "$rc" = 0 ] && [[ $why == "20 students"* ]]; then
        report "make grade-class: 20 generated students" 1 "$why  [$took]"
    else
        echo "$why" >>"$log"
        report "make grade-class: 20 generated students" 0 "$(echo "$why" | tail -n 1) (exit $rc)"
    fi
    : >"$log"
    local after
    after=$(cd "$c" && find . -print0 | sort -z | xargs -0 ls -ld --time-style=+%s 2>/dev/null |
            awk '{ $2 = ""; print }' | sha256sum)
    [ "$before" = "$after" ] && report "  the submissions' folder is left as it was" 1 "" ||
        report "  the submissions' folder is left as it was" 0 "a file or folder under it changed"
    grep -q "^20 students" "$d/class-out/summary.txt" 2>/dev/null &&
        grep -q "o-extra-files, p-correct, q-correct-late" "$d/class-out/identical.txt" 2>/dev/null &&
        report "  summary.txt, identical.txt side by side" 1 "" ||
        report "  summary.txt, identical.txt side by side" 0 "summary.txt or identical.txt is missing or wrong"
}
