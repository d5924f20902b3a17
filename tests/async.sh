# Section 14 of tests/run.sh: synchronous against asynchronous gradient accumulation
# (dp --async K) with a straggler (--slow-rank R --slow-ms D), and lesson 21.
#
#   1. lesson 21_async at 1, 2, 3 and 5 ranks exits 0 (its own checks: synchronous
#      equals serial training, asynchronous with the straggler equals asynchronous
#      without it bit for bit, its loss goes down) and prints both loss curves, a row
#      per step, and the waiting table, a row per rank
#   2. train --mode dp at 3 ranks, rank 2 sleeping 40 ms before each of 8 steps: the
#      other ranks wait for it. Causality, not speed: in the synchronous run a worker
#      cannot start step s before the weights of step s-1 exist, and they need the
#      straggler's gradient of step s-1, so rank 1 waits about (8-1) x 40 ms in all
#      and the server about 8 x 40 ms. With --async 2 a worker may run 2 steps ahead,
#      no more: rank 1 still waits about (8-1-2) x 40 ms. Each bound asserted is half
#      of that, as the model is tiny (its compute is far below 40 ms a step); no
#      bound says one run is faster than the other
#   3. a straggler that cannot be: --slow-rank without --slow-ms, a slow rank out of
#      range, a negative delay; and the lesson's own bad values: exit 2 on every rank
#   4. the lesson's trace replays in dtviz: its timetable, step 2 (--png --train-step 2)
#
# run.sh sources this file and calls async_tests; it uses run.sh's run, report, now,
# since, missing, $tmp, $log, $BUILD and $MPIEXEC, and bad_run from tests/badinput.sh.

async_tests() {
    local lesson=$BUILD/lessons/21_async train=$BUILD/train n t0 rc why
    if [ ! -x "$lesson" ] || [ ! -x "$train" ]; then
        missing "lesson 21_async and train" "$lesson or $train"
        return
    fi

    # as_report NAME WHY DETAIL T0: PASS with DETAIL when WHY ("; a; b") is empty
    as_report() {
        if [ -z "$2" ]; then
            report "$1" 1 "$3  [$(since "$4")]"
        else
            report "$1" 0 "${2#; }  [$(since "$4")]"
        fi
    }

    # 1. the lesson: exit 0, the curves and the waiting table
    for n in 1 2 3 5; do
        t0=$(now)
        MPIEXEC_TIMEOUT=60 "$MPIEXEC" -n "$n" "$lesson" --steps 7 >"$log" 2>&1 </dev/null
        rc=$?
        why=""
        [ "$rc" = 0 ] || why="; $(status_words "$rc")"
        grep -q '^  step    serial  |      sync   at ms  |  async 2 ' "$log" ||
            why="$why; no loss table"
        [ "$(grep -cE '^ +[1-7] +[0-9.]+ +[|] +[0-9.]+ +[0-9]+ +[|] +[0-9.]+ +[0-9]+$' \
            "$log")" = 7 ] || why="$why; not 7 rows of both curves"
        [ "$(grep -cE '^ +[0-9]+  (server, worker|worker|straggler) ' "$log")" = "$n" ] ||
            why="$why; not $n rows of the waiting table"
        [ "$(grep -c ': PASS$' "$log")" = 3 ] || why="$why; not 3 checks passed"
        as_report "lesson 21_async -n $n" "$why" "2 curves, the waits, 3 checks" "$t0"
    done

    # 2. who waits for the straggler. as_waited R: rank R's "waited" seconds in ms,
    # from train's per-rank table in $log
    as_waited() {
        awk -v r="$1" '/^  rank +sent / { t = 1; next }
            t && $1 == r && $NF == "s" { printf "%d", $(NF - 1) * 1000; exit }' "$log"
    }
    local small=(--mode dp --steps 8 --hidden 16 --layers 3 --features 16 --classes 4
                 --batch 24 --quiet --slow-rank 2 --slow-ms 40)
    local k w0 w1 want0 want1
    for k in 0 2; do
        t0=$(now)
        MPIEXEC_TIMEOUT=60 "$MPIEXEC" -n 3 "$train" "${small[@]}" --async "$k" \
            >"$log" 2>&1 </dev/null
        rc=$?
        w0=$(as_waited 0)
        w1=$(as_waited 1)
        want0=$((8 * 40 / 2))
        want1=$(((8 - 1 - k) * 40 / 2))
        why=""
        [ "$rc" = 0 ] || why="; $(status_words "$rc")"
        if [ -z "$w0" ] || [ -z "$w1" ]; then
            why="$why; no waited column for ranks 0 and 1"
        elif [ "$w0" -lt "$want0" ] || [ "$w1" -lt "$want1" ]; then
            why="$why; waited $w0 and $w1 ms, want at least $want0 and $want1"
        fi
        as_report "dp --async $k: the others wait for a straggler" "$why" \
            "waited: rank 0 $w0 ms (>= $want0), rank 1 $w1 ms (>= $want1)" "$t0"
    done

    # 3. bad input: exit 2 on every rank (bad_group comes with section 8's file)
    declare -F bad_group >/dev/null || . tests/badinput.sh
    local dp="--mode dp --steps 2"
    bad_group "train: a straggler that cannot be" "3" "$train" "$dp --slow-rank 1" \
        "$dp --slow-rank 3 --slow-ms 9" "$dp --slow-rank 1 --slow-ms -5"
    bad_group "21_async: bad values" "3" "$lesson" "--slow-ms 0" "--slow-ms 501" \
        "--async 0" "--steps 1" "--slow-ms x"

    # 4. the lesson's trace, replayed
    local trace=$tmp/async.trace png=$tmp/async.png
    run "lesson 21_async --trace (3 ranks)" 0 env MPIEXEC_TIMEOUT=60 "$MPIEXEC" -n 3 \
        "$lesson" --steps 4 --trace "$trace"
    run "dtviz --png --train-step 2 on its trace" 0 ${limit[@]+"${limit[@]}"} \
        "$BUILD/dtviz" --png "$png" --train-step 2 "$trace"
    head -c 4 "$png" 2>/dev/null | grep -q PNG &&
        report "dtviz drew the async trace" 1 "$(wc -c <"$png") bytes" ||
        report "dtviz drew the async trace" 0 "no PNG at $png"
}
