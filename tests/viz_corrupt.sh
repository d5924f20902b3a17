#!/usr/bin/env bash
# dtviz on corrupted traces. Each run must end with exit 0 (it rendered a PNG) or exit 2
# with a "dtviz:" message (it refused the file): never a signal, a timeout or any other
# status. This is what an outside check does to the viewer, so the tests do it first.
#
#     BUILD=build bash tests/viz_corrupt.sh TRACE...
#
# From the traces given (real ones: a lesson's, build/train's), MUTATIONS mutated copies
# (default 200, taken in turn from each trace) are drawn from a fixed SEED (default 1),
# so a failure repeats. A mutation truncates the file at a random byte, flips bytes,
# deletes, duplicates or swaps lines, sets a number to 0, a negative, a huge or an
# out-of-range value, changes the rank count header, a kind, a coll or a phase, drops
# the call marks, splices in another trace's lines, or does several of these at once.
# Line edits usually drop the "# events" line too, since otherwise the reader refuses
# every file whose count of lines changed and the model is never reached.
# Mutations of a training trace (build/train's) also edit its "# train" line and its
# training events' names. Each mutated file is shown with
#
#     timeout 20 $DTVIZ --png OUT.png --step 0 FILE
#
# and, when it comes from a training trace, its timetable (timetable.h, tt_draw.c) with
#
#     timeout 20 $DTVIZ --png OUT.png --view timetable FILE
#
# which must draw it or refuse it in the same way (exit 2 with a "dtviz:" message: a
# file no longer read as training). Prints one line per crash (the mutation, the view,
# the status, the end of the output), then "N mutated traces: A rendered, B refused
# (exit 2), C crashed; T timetables: D drawn, E refused" (C counts both views); exits 1
# on a crash.
#
#     BUILD=build bash tests/viz_corrupt.sh --hostile
#
# gives dtviz --png and dttrace ($DTTRACE, default $BUILD/dttrace) files that are no
# traces at all, as an outside check would: /dev/zero, /dev/urandom, 10 MB of 'a' with
# no '\n', a NUL after 600 bytes, endless lines and endless comments through a pipe, a
# header line of 100 KB, a folder, an empty file, a binary (dtviz itself), a trace cut
# in a line, a file that does not exist. Each must be refused within `timeout 10`
# (never 124) as bad input: status 2, one "dtviz:"/"dttrace:" sentence, then "Try
# '... --help' for usage." and nothing else. Then output names, for --png, --frames,
# --export-chrome and dttrace --chrome: "" or "x/", a folder that does not exist, a
# folder where a file goes (a file where --frames' folder goes) are all refused the
# same way (2, the sentence, the Try line) before any work, creating nothing. A write
# that fails once the work has started is status 1, one sentence naming the file, and
# no "wrote"/"written" line: to /dev/full (where it is the device; else skipped, with
# a line saying so), stdout included, and under a file-size limit (ulimit -f 1, SIGXFSZ ignored), which
# fails the same way on any machine and must leave no PNG behind. dtviz --algo foo and
# dttrace's bad options are one sentence and the Try line. Prints a line per failure,
# then "N hostile runs: M failed"; exits 1 on a failure.
# Knobs (environment): BUILD, DTVIZ (default $BUILD/dtviz), DTTRACE, MUTATIONS, SEED,
# KEEP (a directory to copy the traces that crashed into, to reproduce them), VERBOSE=1
# (a line per mutation).
set -u

BUILD=${BUILD:-build}
DTVIZ=${DTVIZ:-$BUILD/dtviz}
DTTRACE=${DTTRACE:-$BUILD/dttrace}
MUTATIONS=${MUTATIONS:-200}
SEED=${SEED:-1}
KEEP=${KEEP:-}

if [ $# -eq 0 ]; then
    echo "usage: BUILD=build bash tests/viz_corrupt.sh TRACE... | --hostile" >&2
    exit 2
fi

# ==== --hostile: files that are no traces, output names that are no files ====
hostile() {
    local nrun=0 nfail=0 f
    for f in "$DTVIZ" "$DTTRACE"; do
        [ -x "$f" ] || { echo "viz_corrupt: $f is not built" >&2; exit 2; }
    done
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/viz-hostile.XXXXXX") || exit 1
    trap 'rm -rf "$tmp"' EXIT

    # expect WANT WHAT RUN...: RUN (a command line for eval, stdin from /dev/null unless
    # it pipes) must end with status WANT and one line naming the program; WHAT, words
    # joined by ',' ("-" for none), adds the other checks: try (that line, the Try line
    # and nothing else on stderr), nopng (no $tmp/out.png), quiet (nothing on stdout:
    # refused before the work), none (no file made or removed under $tmp), failed=PATH
    # (the sentence names PATH; no "wrote"/"written" line).
    expect() {
        local want=$1 what=$2 rc prog why="" w before=""
        shift 2
        prog=dtviz
        [[ "$*" == *'$DTTRACE'* ]] && prog=dttrace
        rm -f "$tmp/out.png"
        [[ ",$what," != *,none,* ]] || before=$(files)
        eval "$*" >"$tmp/out" 2>"$tmp/err" </dev/null
        rc=$?
        nrun=$((nrun + 1))
        [ "$rc" = "$want" ] || why="exit $rc, want $want"
        [ "$rc" != 124 ] || why="timed out after 10 s (it reads a file that never ends)"
        [ "$(grep -c "^$prog: " "$tmp/err")" = 1 ] || why="$why; not one '$prog:' sentence"
        for w in ${what//,/ }; do
            case $w in
            try) [ "$(grep -c "^Try '$prog --help' for usage\.\$" "$tmp/err")" = 1 ] &&
                     [ "$(wc -l <"$tmp/err")" = 2 ] ||
                     why="$why; not one sentence and the Try line" ;;
            nopng) [ ! -e "$tmp/out.png" ] || why="$why; a PNG was written" ;;
            quiet) [ ! -s "$tmp/out" ] || why="$why; it worked before refusing" ;;
            none) [ "$(files)" = "$before" ] || why="$why; it made or removed a file" ;;
            failed=*)
                grep "^$prog: " "$tmp/err" | grep -qF "${w#failed=}" ||
                    why="$why; the sentence does not name ${w#failed=}"
                ! grep -qE 'wrote|written' "$tmp/out" "$tmp/err" ||
                    why="$why; it says the file was written" ;;
            esac
        done
        if [ -n "$why" ]; then
            nfail=$((nfail + 1))
            echo "FAIL  $*: ${why#; }"
            sed 's/^/      | /' "$tmp/err" | head -n 4
        elif [ -n "${VERBOSE:-}" ]; then
            echo "ok    $*: $(head -n 1 "$tmp/err")"
        fi
    }
    # the files under $tmp but the runs' own out, err and out.png
    files() { (cd "$tmp" && find . ! -name out ! -name err ! -name out.png | sort); }

    head -c 10000000 /dev/zero | tr '\0' a >"$tmp/aaaa"
    { head -c 600 "$tmp/aaaa"; printf '\0'; head -c 1000 "$tmp/aaaa"; } >"$tmp/nul600"
    { printf '# dtlab-trace 1\n# ranks 2\n# program '; head -c 100000 "$tmp/aaaa"
      printf '\n'; } >"$tmp/longhead"
    : >"$tmp/empty"
    mkdir "$tmp/folder"
    printf '# dtlab-trace 1\n# ranks 1\n' >"$tmp/ok.trace"
    # a ring's messages between 2 ranks, 12 events: Chrome JSON of some 3 KB; then the
    # same cut in its 9th event line
    local s
    { printf '# dtlab-trace 1\n# ranks 2\n# events 12\n# program hostile\n'
      for s in 0 1 2 3 4 5; do
          printf '0.%03d000000 0.%03d500000 0 send 1 allreduce_ring reduce-scatter %d %d' \
              "$s" "$s" "$s" "$((s % 2))"
          printf ' %d %d 400\n' "$((s % 2 * 100))" "$((s % 2 * 100 + 100))"
      done
      for s in 0 1 2 3 4 5; do
          printf '0.%03d100000 0.%03d900000 1 recv 0 allreduce_ring reduce-scatter %d %d' \
              "$s" "$s" "$s" "$((s % 2))"
          printf ' %d %d 400\n' "$((s % 2 * 100))" "$((s % 2 * 100 + 100))"
      done; } >"$tmp/ring.trace"
    head -n 13 "$tmp/ring.trace" | head -c -20 >"$tmp/cut.trace"
    local t=(timeout 10) endless_line="yes | tr -d '\\n'"
    local endless_comments="{ printf '# dtlab-trace 1\\n'; yes '#'; }"
    for f in /dev/zero /dev/urandom "$tmp"/{aaaa,nul600,longhead,empty,folder,cut.trace} \
             "$tmp/no-such.trace" "$DTVIZ"; do
        expect 2 nopng,try '"${t[@]}" "$DTVIZ" --png "$tmp/out.png" "'"$f"'"'
        expect 2 try,quiet '"${t[@]}" "$DTTRACE" "'"$f"'"'
    done
    for f in endless_line endless_comments; do
        expect 2 nopng,try "${!f}"' | "${t[@]}" "$DTVIZ" --png "$tmp/out.png" /dev/stdin'
        expect 2 try,quiet "${!f}"' | "${t[@]}" "$DTTRACE" /dev/stdin'
    done

    # output names that no file can have, and places that cannot be written: bad input
    # (2), refused before the work, leaving the file system as it was
    local algo=(--algo ring-allreduce) no=$tmp/no/such
    expect 2 try '"$DTVIZ" "${algo[@]}" --png ""'
    expect 2 try '"$DTVIZ" "${algo[@]}" --png "$tmp/folder/"'
    expect 2 try '"$DTVIZ" "${algo[@]}" --frames ""'
    expect 2 try '"$DTVIZ" "${algo[@]}" --export-chrome ""'
    expect 2 try '"$DTVIZ" ""'
    expect 2 try '"$DTTRACE" --chrome "" "$tmp/ok.trace"'
    expect 2 try '"$DTTRACE" --chrome "$tmp/folder/" "$tmp/ok.trace"'
    expect 2 try '"$DTTRACE" ""'
    local ok=try,quiet,none,nopng
    expect 2 $ok '"$DTVIZ" "${algo[@]}" --png "$no/out.png"'
    expect 2 $ok '"$DTVIZ" "${algo[@]}" --png "$tmp/folder"'
    expect 2 $ok '"$DTVIZ" "${algo[@]}" --frames "$no/frames"'
    expect 2 $ok '"$DTVIZ" "${algo[@]}" --frames "$tmp/ok.trace"'
    expect 2 $ok '"$DTVIZ" "${algo[@]}" --png "$tmp/out.png" --export-chrome "$no/x.json"'
    expect 2 $ok '"$DTVIZ" "${algo[@]}" --export-chrome "$tmp/folder"'
    expect 2 $ok '"$DTVIZ" --png "$tmp/out.png" --export-chrome "$no/x.json" "$tmp/ring.trace"'
    expect 2 $ok '"$DTTRACE" --chrome "$no/x.json" "$tmp/ring.trace"'
    expect 2 $ok '"$DTTRACE" --chrome "$tmp/folder" "$tmp/ring.trace"'

    # writes that fail once the work has started (a full disk): an error (1), said
    if [ -c /dev/full ]; then
        expect 1 failed=/dev/full '"$DTVIZ" "${algo[@]}" --png /dev/full'
        expect 1 failed=/dev/full '"$DTVIZ" "${algo[@]}" --export-chrome /dev/full'
        expect 1 failed=/dev/full '"$DTTRACE" --chrome /dev/full "$tmp/ring.trace"'
        # the summary and the "wrote" line are output too
        expect 1 failed="standard output" '"$DTTRACE" "$tmp/ring.trace" >/dev/full'
        expect 1 failed="standard output" '"$DTVIZ" "${algo[@]}" --png "$tmp/x.png" >/dev/full'
    else
        echo "viz_corrupt: /dev/full is not the device here ($(ls -ld /dev/full 2>&1 |
            cut -c1-60)): its runs skipped, the file-size limit's kept"
    fi
    # RLIMIT_FSIZE of 1 KB: stdout and stderr fit, the PNG and the JSON do not; an
    # ignored SIGXFSZ stays ignored in the program, whose write then fails with EFBIG
    local lim="ulimit -f 1; trap '' XFSZ; exec"
    expect 1 failed="$tmp/out.png",nopng '('"$lim"' "$DTVIZ" "${algo[@]}" --png "$tmp/out.png")'
    expect 1 failed="$tmp/fr/frame-0000.png" \
        '('"$lim"' "$DTVIZ" "${algo[@]}" --frames "$tmp/fr")'
    expect 1 failed="$tmp/x.json" '('"$lim"' "$DTVIZ" "${algo[@]}" --export-chrome "$tmp/x.json")'
    expect 1 failed="$tmp/y.json" '('"$lim"' "$DTTRACE" --chrome "$tmp/y.json" "$tmp/ring.trace")'

    # dtviz's unknown algorithm, dttrace's usage errors: one sentence and the Try line,
    # not a list of names on lines of their own, nor the whole usage text
    expect 2 try '"$DTVIZ" --algo foo'
    expect 2 try '"$DTTRACE" --bogus "$tmp/ok.trace"'
    expect 2 try '"$DTTRACE" -x "$tmp/ok.trace"'
    expect 2 try '"$DTTRACE" --chrome'
    expect 2 try '"$DTTRACE"'
    expect 2 try '"$DTTRACE" a b'
    # the trace those runs write from is good: what they refuse is the hostile part
    nrun=$((nrun + 1))
    if ! "$DTTRACE" "$tmp/ring.trace" 2>&1 </dev/null | grep -q ' 2 ranks, 12 events'; then
        nfail=$((nfail + 1))
        echo "FAIL  $DTTRACE $tmp/ring.trace: not read as 2 ranks, 12 events"
    fi
    echo "$nrun hostile runs: $nfail failed"
    [ "$nfail" -eq 0 ]
}
if [ "$1" = --hostile ]; then
    hostile
    exit
fi
for f in "$@"; do
    [ -s "$f" ] || { echo "viz_corrupt: $f: no such trace, or empty" >&2; exit 2; }
done
if [ ! -x "$DTVIZ" ]; then
    echo "viz_corrupt: $DTVIZ is not built" >&2
    exit 2
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/viz-corrupt.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
traces=("$@")

# The random numbers: a 64-bit LCG (Knuth's MMIX constants) in the shell itself, since
# bash's RANDOM is reseeded from the clock in every $(...) subshell. rnd N sets R to a
# number in 0..N-1; pick WORD... sets P to one of the words.
state=$SEED
rnd() {
    state=$(( state * 6364136223846793005 + 1442695040888963407 ))
    R=$(( ((state >> 33) & 0x7fffffff) % $1 ))
}
pick() { rnd $#; local a=("$@"); P=${a[$R]}; }

# The odd values a number field is set to: zero, negatives, the ends of int and long
# long and one past, more digits than any integer type, floats where ints belong.
ODD_NUMBERS=(0 -1 -2 1 2147483647 2147483648 -2147483649 9223372036854775807
    9223372036854775808 -9223372036854775808 99999999999999999999999 1e308 1e-300 0.5
    63 64 65 1048576 -0 00000000000000000000007)
ODD_RANKS=(0 1 2 3 5 63 64 65 100 1000 1048576 1048577 -1 x 99999999999999999999)
NAMES=(allreduce_ring reduce_scatter_ring allgather_ring allreduce_naive bcast_tree
    reduce_tree allreduce_rd alltoall_pairwise gather_tree scatter_tree bcast_naive call
    reduce-scatter allgather reduce bcast fold exchange unfold gather scatter forward - x
    train ddp fsdp tp pipeline moe dp step backward optimizer loss bucket free f g
    activations gradients gather-updated dispatch combine weights)
# What a "# train" line becomes (training traces): another mode, sizes out of range or
# missing, a schedule that does not exist, no mode, nothing.
TRAIN_LINES=("mode pp schedule gpipe stages 0 micro 0"
    "mode pp schedule 1f1b stages 65 micro 1000000"
    "mode pp schedule bogus stages 3 micro 4" "mode pp stages -1 micro -1" "mode pp"
    "mode pp schedule gpipe stages 1e308 micro 2" "mode ddp" "mode fsdp zero 9"
    "mode pp schedule gpipe stages 99999999999999999999 micro 2"
    "mode tp tp 0" "mode hybrid dp 0 tp 0 pp 0 schedule 1f1b micro 0" "mode moe" "mode dp"
    "mode serial" "mode bogus" "mode" "schedule gpipe stages 3 micro 4" "x")
KINDS=(send recv reduce copy d2h h2d compute mark)
FIELDS=(1 2 3 5 8 9 10 11 12)           # the numbers of an event line

# set_field IN OUT FIELD VALUE: on one random event line of IN, field FIELD := VALUE.
set_field() {
    local lines
    lines=($(awk '!/^#/ { print NR }' "$1"))
    if [ ${#lines[@]} -eq 0 ]; then
        cp "$1" "$2"
        return
    fi
    rnd ${#lines[@]}
    awk -v k="${lines[$R]}" -v f="$3" -v v="$4" 'NR == k { $f = v } { print }' "$1" >"$2"
}

# One line edit of IN into OUT, appended to $what.
edit_line() {
    local in=$1 out=$2 nl k
    nl=$(wc -l <"$in")
    [ "$nl" -gt 0 ] || nl=1
    rnd 6
    case $R in
    0)  rnd "$nl"; k=$((R + 1)); awk -v k="$k" 'NR != k' "$in" >"$out"
        what="$what; delete line $k" ;;
    1)  rnd "$nl"; k=$((R + 1)); awk -v k="$k" '{ print } NR == k { print }' "$in" >"$out"
        what="$what; duplicate line $k" ;;
    2)  local j
        rnd "$nl"; k=$((R + 1)); rnd "$nl"; j=$((R + 1))
        awk -v a="$k" -v b="$j" '{ l[NR] = $0 } END { t = l[a]; l[a] = l[b]; l[b] = t
                                  for (i = 1; i <= NR; i++) print l[i] }' "$in" >"$out"
        what="$what; swap lines $k and $j" ;;
    3)  pick "${FIELDS[@]}"; k=$P; pick "${ODD_NUMBERS[@]}"
        set_field "$in" "$out" "$k" "$P"; what="$what; field $k := $P" ;;
    4)  pick 6 7; k=$P; pick "${NAMES[@]}"
        set_field "$in" "$out" "$k" "$P"; what="$what; field $k := $P" ;;
    5)  pick "${KINDS[@]}"; set_field "$in" "$out" 4 "$P"; what="$what; kind := $P" ;;
    esac
}

# mutate IN OUT: one mutation; says what it did in $what.
mutate() {
    local in=$1 out=$2 size nl k v
    size=$(wc -c <"$in")
    nl=$(wc -l <"$in")
    what=""
    rnd $((training ? 12 : 10))
    case $R in
    0)  rnd "$size"; head -c "$R" "$in" >"$out"; what="cut at byte $R" ;;
    1)  cp "$in" "$out"
        rnd 8
        local flips=$((R + 1)) j
        what="flip"
        for ((j = 0; j < flips; j++)); do
            rnd "$size"; k=$R; rnd 256; v=$R
            printf "\\$(printf %03o "$v")" | dd of="$out" bs=1 seek="$k" conv=notrunc \
                status=none
            what="$what byte $k=$v"
        done ;;
    2|3|4) edit_line "$in" "$out"; what=${what#; } ;;
    5)  pick "${ODD_RANKS[@]}"
        sed "s/^# ranks .*/# ranks $P/" "$in" >"$out"; what="# ranks $P" ;;
    6)  grep -av ' mark ' "$in" >"$out"; what="no marks" ;;
    7)  local other
        rnd ${#traces[@]}; other=${traces[$R]}
        rnd "$nl"; k=$((R + 1)); rnd 200
        { head -n "$k" "$in"; grep -av '^#' "$other" | head -n "$((R + 1))"
          tail -n "+$((k + 1))" "$in"; } >"$out"
        what="splice $((R + 1)) lines of $(basename "$other") after line $k" ;;
    10) pick "${TRAIN_LINES[@]}"
        if grep -aq '^# train ' "$in"; then
            awk -v t="$P" '/^# train / { print "# train " t; next } { print }' "$in" >"$out"
        else
            awk -v t="$P" '{ print } /^# program / { print "# train " t }' "$in" >"$out"
        fi
        what="# train $P" ;;
    11) grep -av '^# train ' "$in" >"$out"; what="no # train line" ;;
    8|9) local a=$tmp/a b=$tmp/b j n
        cp "$in" "$a"
        rnd 4; n=$((R + 2))
        for ((j = 0; j < n; j++)); do
            edit_line "$a" "$b"
            mv "$b" "$a"
        done
        mv "$a" "$out"; what=${what#; } ;;
    esac
    # usually without the line count, so that the reader lets the line edits through
    rnd 4
    if [ "$R" != 0 ] && [ "$(head -c 2 "$out")" = "# " ] && grep -aq '^# events ' "$out"
    then
        grep -av '^# events ' "$out" >"$tmp/noev"
        mv "$tmp/noev" "$out"
    fi
}

# Which traces are training traces: a "# train" line, or train's compute events.
is_training=()
for f in "${traces[@]}"; do
    if grep -aq -e '^# train ' -e ' compute -1 train ' "$f"; then
        is_training+=(1)
    else
        is_training+=(0)
    fi
done
# The timetable view needs a dtviz that has it (--view); without it, say so once.
tt_view=1
"$DTVIZ" --help 2>&1 | grep -q -- '--view' || tt_view=0

# show VIEW FILE ARGS...: draws FILE with dtviz ARGS; counts the outcome into
# ok_VIEW, no_VIEW or crashed (one CRASH line for a crash).
ok_collective=0 no_collective=0 ok_timetable=0 no_timetable=0 crashed=0
show() {
    local view=$1 f=$2 rc why
    shift 2
    rm -f "$tmp/out.png"
    timeout 20 "$DTVIZ" --png "$tmp/out.png" "$@" "$f" >"$tmp/log" 2>&1 </dev/null
    rc=$?
    [ -z "${VERBOSE:-}" ] ||
        echo "mutation $i of $(basename "$src"), $view: $what: exit $rc"
    if [ "$rc" = 0 ] && [ -s "$tmp/out.png" ]; then
        eval "ok_$view=\$((ok_$view + 1))"
    elif [ "$rc" = 2 ] && grep -aq 'dtviz:' "$tmp/log"; then
        eval "no_$view=\$((no_$view + 1))"
    else
        crashed=$((crashed + 1))
        case $rc in
            0) why="exit 0 without a PNG" ;;
            2) why="exit 2 without a 'dtviz:' message" ;;
            124) why="timed out after 20 s" ;;
            1[3-9][0-9]) why="killed by signal $((rc - 128))" ;;
            *) why="exit $rc" ;;
        esac
        echo "CRASH  mutation $i of $(basename "$src") (SEED=$SEED), $view: $what: $why"
        tail -n 5 "$tmp/log" | sed 's/^/      | /'
        if [ -n "$KEEP" ]; then
            mkdir -p "$KEEP" && cp "$f" "$KEEP/crash-$SEED-$i.trace"
        fi
    fi
}

for ((i = 0; i < MUTATIONS; i++)); do
    src=${traces[$(( i % ${#traces[@]} ))]}
    training=${is_training[$(( i % ${#traces[@]} ))]}
    f=$tmp/m$i.trace
    mutate "$src" "$f"
    show collective "$f" --step 0
    if [ "$training" = 1 ] && [ "$tt_view" = 1 ]; then
        show timetable "$f" --view timetable
    fi
    rm -f "$f"
done
[ "$tt_view" = 1 ] || echo "viz_corrupt: $DTVIZ has no --view: timetables not drawn"
echo "$MUTATIONS mutated traces: $ok_collective rendered, $no_collective refused" \
    "(exit 2), $crashed crashed; $((ok_timetable + no_timetable)) timetables:" \
    "$ok_timetable drawn, $no_timetable refused"
[ "$crashed" -eq 0 ]
