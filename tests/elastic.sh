# Section 18 of tests/run.sh: elastic training, scripts/elastic.sh (a job restarted from
# its last checkpoint when a rank dies) and lesson 25. Sourced by run.sh, which then
# calls elastic_tests; it uses run.sh's run, report, now, since, missing, status_words,
# $tmp, $log, $BUILD and $MPIEXEC.
#
# fsdp on 3 ranks, 8 steps, a checkpoint every 2, tiny (hidden 16, 3 layers): each
# elastic job against the same training never stopped.
#   1. a rank killed at the end of step 5 (DT_TEST_KILL, lib/parallel/run.c) with
#      --replace: restarted on 3 ranks from step 4, the --dump weights byte for byte
#   2. killed with one rank fewer after: 3 ranks, then 2 from step 4 (train reshards):
#      the weights within 1e-5 + 1e-4 |w| (2 ranks sum in another order); ddp too;
#      and the GPT in 3 pipeline stages, then 2 (its tied embedding's copy refilled)
#   3. a rank killed half-way through writing the checkpoint of step 4
#      (DT_TEST_CHECKPOINT_CRASH): its .tmp is discarded, never used; the job resumes
#      from step 2 and ends byte for byte at the uninterrupted weights
#   4. no restart left: --min reached, and --max-restarts 0: non-zero, and it says so
#   5. failures that are no lost rank end the script at once with their status: a
#      usage error in train's arguments (exit 2), a resume train refuses (exit 2), a
#      bad DT_TEST_KILL (exit 2), the time limit (MPIEXEC_TIMEOUT covers the whole
#      script); DT_TEST_KILL does nothing in a resumed run, so running the same command
#      again continues the job (--steps grown) without a restart
#   6. the script's own usage errors: exit 2, a sentence and the Try line, nothing run
#   7. nothing left behind: no .tmp folder in a checkpoint folder, no process of the
#      section's runs (SIGTERM to the script ends its job too)
#   8. lesson 25, small: its three checks pass
#   9. lesson 25 when its runs cannot start (MPIEXEC=/nonexistent/mpiexec): one
#      sentence, then it stops: no table of nan, non-zero on every rank
# About 40 s on 2 cores.

elastic_tests() {
    local train=$BUILD/train script=scripts/elastic.sh lesson=$BUILD/lessons/25_elastic
    if [ ! -x "$train" ]; then
        missing "train (for elastic)" "$train"
        return
    fi
    local d=$tmp/elastic rc t0 why
    rm -rf "$d"
    mkdir -p "$d"
    local small=(--mode fsdp --steps 8 --hidden 16 --layers 3 --examples 200 --batch 24)

    # el_run NAME VAR=VALUE... -- SCRIPT-ARGS...: the script under a time limit (its own
    # MPIEXEC_TIMEOUT, and timeout(1) around it); stdout in $d/NAME.out, stderr in
    # $d/NAME.err, both in $log; sets rc
    el_run() {
        local name=$1 vars=()
        shift
        while [ "$1" != -- ]; do vars+=("$1"); shift; done
        shift
        env MPIEXEC="$MPIEXEC" MPIEXEC_TIMEOUT=60 ${vars[@]+"${vars[@]}"} \
            timeout -k 5 90 bash "$script" "$@" >"$d/$name.out" 2>"$d/$name.err" </dev/null
        rc=$?
        cat "$d/$name.out" "$d/$name.err" >"$log"
    }
    # el_says NAME PATTERN...: "" when $d/NAME.err matches every PATTERN (grep -E), else
    # the first that does not
    el_says() {
        local name=$1 p
        shift
        for p in "$@"; do
            grep -Eq -- "$p" "$d/$name.err" || { echo "stderr lacks /$p/"; return; }
        done
    }
    # el_close A B: "N BAD MAX" for two --dump files: weights, how many differ by more
    # than 1e-5 + 1e-4 |w|, the largest difference
    el_close() {
        paste <(od -An -v -f -w4 "$1") <(od -An -v -f -w4 "$2") |
            awk '{ d = $1 - $2; if (d < 0) d = -d; a = $1 < 0 ? -$1 : $1
                   if (d > m) m = d; if (d > 1e-5 + 1e-4 * a || NF != 2) bad++ }
                 END { printf "%d %d %g", NR, bad, m }'
    }
    # el_end NAME STEP: why the checkpoint folder $d/NAME.ck is not whole at STEP
    el_end() {
        local c=$d/$1.ck
        if [ "$(cat "$c/latest" 2>/dev/null)" != "$(printf 'step-%07d' "$2")" ]; then
            echo "latest names '$(cat "$c/latest" 2>/dev/null)', not step $2"
        elif compgen -G "$c/*.tmp" >/dev/null; then
            echo "a .tmp folder is left in it"
        fi
    }

    # the weights of the training never stopped, fsdp and ddp
    run "elastic: fsdp -n 3, never stopped" 0 "$MPIEXEC" -n 3 "$train" "${small[@]}" \
        --quiet --dump "$d/full.f32"
    run "elastic: ddp -n 3, never stopped" 0 "$MPIEXEC" -n 3 "$train" "${small[@]}" \
        --mode ddp --quiet --dump "$d/full-ddp.f32"

    # 1. --replace: the same ranks again, the same weights byte for byte
    local name="elastic --replace: rank 1 killed at step 5"
    t0=$(now)
    el_run replace DT_TEST_KILL=1:5 -- -n 3 --replace -- "$train" "${small[@]}" \
        --checkpoint "$d/replace.ck" --every 2 --dump "$d/replace.f32"
    why=$(el_says replace '^DT_TEST_KILL=1:5: rank 1 raises SIGKILL' \
          '^dtlab: rank 1 \(pid [0-9]+ on [^)]*\) died without a word' \
          '^elastic.sh: rank 1 of 3 died' \
          '^elastic.sh: restart 1 of at most 3: 3 ranks \(a replacement for rank 1\), from the checkpoint of step 4' \
          '^elastic.sh: the training completed on 3 ranks after 1 restart')
    [ "$rc" = 0 ] || why="$(status_words "$rc"), want exit 0"
    [ -n "$why" ] || why=$(el_end replace 8)
    [ -n "$why" ] || cmp -s "$d/full.f32" "$d/replace.f32" ||
        why="the weights differ from the run never stopped"
    [ -z "$why" ] && report "$name" 1 "restarted on 3 from step 4: weights byte-equal  [$(since "$t0")]" ||
        report "$name" 0 "$why"

    # 2. one rank fewer: resharded, the weights to rounding; fsdp, then ddp (rank 0 lost)
    local m k s set full from
    for m in fsdp:2:5 ddp:0:3; do
        IFS=: read -r m k s <<<"$m"
        name="elastic $m -n 3 --min 2: rank $k killed at step $s"
        t0=$(now)
        el_run "$m-shrink" DT_TEST_KILL="$k:$s" -- -n 3 --min 2 -- "$train" "${small[@]}" \
            --mode "$m" --checkpoint "$d/$m-shrink.ck" --every 2 --dump "$d/$m-shrink.f32"
        from=$((s / 2 * 2))
        why=$(el_says "$m-shrink" "^elastic.sh: rank $k of 3 died" \
              "^elastic.sh: restart 1 of at most 3: 2 ranks \\(one fewer; --min 2\\), from the checkpoint of step $from" \
              '^elastic.sh: the training completed on 2 ranks after 1 restart')
        [ "$rc" = 0 ] || why="$(status_words "$rc"), want exit 0"
        [ -n "$why" ] || grep -q '^train: .* on 2 ranks' "$d/$m-shrink.out" ||
            why="no train on 2 ranks in its output"
        [ -n "$why" ] || grep -q '^checkpoint: resharded from 3 ranks to 2' \
            "$d/$m-shrink.out" || why="train did not say it resharded from 3 ranks to 2"
        [ -n "$why" ] || why=$(el_end "$m-shrink" 8)
        if [ -z "$why" ]; then
            full=$d/full.f32
            [ "$m" = ddp ] && full=$d/full-ddp.f32
            set=$(el_close "$full" "$d/$m-shrink.f32")
            set -- $set
            if [ "$2" = 0 ] && [ "$1" -gt 0 ]; then
                report "$name" 1 "2 ranks from step $from: $1 weights, largest difference $3  [$(since "$t0")]"
            else
                report "$name" 0 "${2:-?} of ${1:-?} weights differ from the run never stopped (largest ${3:-?})"
            fi
        else
            report "$name" 0 "$why"
        fi
    done

    # 2b. the GPT in pipeline stages, one rank fewer: its stages re-cut, the last
    # stage's copy of the tied embedding refilled from the first's after the resume
    local gpt=(--model gpt --mode pp --steps 8 --embed 32 --seq 16 --layers 2 --batch 12)
    run "elastic: gpt pp -n 3, never stopped" 0 "$MPIEXEC" -n 3 "$train" "${gpt[@]}" \
        --quiet --dump "$d/full-gpt.f32"
    name="elastic gpt pp -n 3 --min 2: rank 2 killed at step 5"
    t0=$(now)
    el_run gpt-shrink DT_TEST_KILL=2:5 -- -n 3 --min 2 -- "$train" "${gpt[@]}" \
        --checkpoint "$d/gpt-shrink.ck" --every 2 --quiet --dump "$d/gpt-shrink.f32"
    why=$(el_says gpt-shrink '^elastic.sh: rank 2 of 3 died' \
          '^elastic.sh: restart 1 of at most 3: 2 ranks \(one fewer; --min 2\), from the checkpoint of step 4' \
          '^elastic.sh: the training completed on 2 ranks after 1 restart')
    [ "$rc" = 0 ] || why="$(status_words "$rc"), want exit 0"
    [ -n "$why" ] || grep -q '^checkpoint: resharded from 3 ranks to 2' \
        "$d/gpt-shrink.out" || why="train did not say it resharded from 3 ranks to 2"
    if [ -z "$why" ]; then
        set=$(el_close "$d/full-gpt.f32" "$d/gpt-shrink.f32")
        set -- $set
        [ "$2" = 0 ] && [ "$1" -gt 0 ] &&
            report "$name" 1 "2 stages from step 4: $1 weights, largest difference $3  [$(since "$t0")]" ||
            report "$name" 0 "${2:-?} of ${1:-?} weights differ from the run never stopped (largest ${3:-?})"
    else
        report "$name" 0 "$why"
    fi

    # 3. killed while writing the checkpoint of step 4: the .tmp is discarded, never used
    name="elastic: a rank killed writing step 4's checkpoint"
    t0=$(now)
    el_run crash DT_TEST_CHECKPOINT_CRASH=4 -- -n 3 --replace -- "$train" "${small[@]}" \
        --checkpoint "$d/crash.ck" --every 2 --dump "$d/crash.f32"
    why=$(el_says crash 'stops half-way through' \
          '^elastic.sh: discarded step-0000004.tmp' \
          '^elastic.sh: restart 1 of at most 3: 3 ranks .*, from the checkpoint of step 2 ' \
          '^elastic.sh: the training completed')
    [ "$rc" = 0 ] || why="$(status_words "$rc"), want exit 0"
    [ -n "$why" ] || grep -q '^checkpoint: resumed at step 2,' "$d/crash.out" ||
        why="train did not resume at step 2"
    [ -n "$why" ] || why=$(el_end crash 8)
    [ -n "$why" ] || cmp -s "$d/full.f32" "$d/crash.f32" ||
        why="the weights differ from the run never stopped"
    [ -z "$why" ] && report "$name" 1 "step-0000004.tmp discarded; from step 2, byte-equal  [$(since "$t0")]" ||
        report "$name" 0 "$why"

    # 4. no restart left
    name="elastic: --min 2 reached at 2 ranks"
    el_run min DT_TEST_KILL=1:3 -- -n 2 --min 2 -- "$train" "${small[@]}" \
        --checkpoint "$d/min.ck" --every 2
    why=$(el_says min '^elastic.sh: giving up: 1 rank would remain, fewer than --min 2$')
    [ "$rc" != 0 ] || why="exit 0, want a failure"
    grep -q '^elastic.sh: restart' "$d/min.err" && why="it restarted"
    [ -z "$why" ] && report "$name" 1 "$(status_words "$rc"), gave up, said so" ||
        report "$name" 0 "$why"
    name="elastic: --max-restarts 0"
    el_run max DT_TEST_KILL=0:3 -- -n 2 --max-restarts 0 -- "$train" "${small[@]}" \
        --checkpoint "$d/max.ck" --every 2
    why=$(el_says max '^elastic.sh: giving up: 0 restarts made, --max-restarts 0$')
    [ "$rc" != 0 ] || why="exit 0, want a failure"
    [ -z "$why" ] && report "$name" 1 "$(status_words "$rc"), gave up, said so" ||
        report "$name" 0 "$why"

    # 5. failures that are no lost rank: no restart, their own status
    # el_once NAME WANT PATTERN VAR=VALUE... -- SCRIPT-ARGS: exit WANT, stderr matching
    # PATTERN, no restart
    el_once() {
        local name=$1 want=$2 pat=$3 t0
        shift 3
        t0=$(now)
        el_run once "$@"
        why=$(el_says once "$pat" '^elastic.sh: the job failed \(exit [0-9]+\) without losing a rank: no restart$')
        [ "$rc" = "$want" ] || why="$(status_words "$rc"), want $(status_words "$want")"
        grep -q '^elastic.sh: restart' "$d/once.err" && why="it restarted"
        [ -z "$why" ] && report "$name" 1 "$(status_words "$rc"), no restart  [$(since "$t0")]" ||
            report "$name" 0 "$why"
    }
    el_once "elastic: train's usage error (--hidden -1)" 2 "^train: --hidden" -- \
        -n 2 -- "$train" "${small[@]}" --hidden -1 --checkpoint "$d/usage.ck"
    el_once "elastic: a resume train refuses (--hidden 24)" 2 'with --hidden 16; this run has --hidden 24' -- \
        -n 3 -- "$train" "${small[@]}" --hidden 24 --checkpoint "$d/replace.ck"
    el_once "elastic: DT_TEST_KILL=1x" 2 "^dtlab: DT_TEST_KILL must be R:S.*not '1x'" \
        DT_TEST_KILL=1x -- -n 2 -- "$train" "${small[@]}" --checkpoint "$d/badkill.ck"
    # the time limit covers the whole script: a job that outlasts it is not restarted
    t0=$(now)
    name="elastic: MPIEXEC_TIMEOUT=5 on a long job"
    el_run limit MPIEXEC_TIMEOUT=5 -- -n 2 -- "$train" --mode ddp --steps 1000000 --quiet \
        --checkpoint "$d/limit.ck" --every 100000
    local took
    took=$(since "$t0")
    if [ "$rc" = 0 ] || grep -q '^elastic.sh: restart' "$d/limit.err"; then
        report "$name" 0 "$(status_words "$rc"), want a failure without a restart  [$took]"
    elif ! grep -q "the job's time limit is nearly reached" "$d/limit.err"; then
        report "$name" 0 "$(status_words "$rc"), but no word of the time limit  [$took]"
    elif awk -v t="${took% s}" 'BEGIN { exit !(t > 15) }'; then
        report "$name" 0 "it took $took, not about 5 s"
    else
        report "$name" 1 "$(status_words "$rc"), no restart  [$took]"
    fi
    # run again with --steps grown: it continues from latest; DT_TEST_KILL is for fresh runs
    name="elastic: the same command again continues the job"
    el_run again DT_TEST_KILL=1:9 -- -n 3 -- "$train" "${small[@]}" --steps 10 \
        --checkpoint "$d/replace.ck" --every 2
    why=""
    [ "$rc" = 0 ] || why="$(status_words "$rc"), want exit 0"
    grep -q '^checkpoint: resumed at step 8,' "$d/again.out" || why="it did not resume at step 8"
    grep -qE 'restart|DT_TEST_KILL' "$d/again.err" && why="the hook fired in a resumed run"
    [ -n "$why" ] || why=$(el_end replace 10)
    [ -z "$why" ] && report "$name" 1 "resumed at step 8, no kill, no restart" ||
        report "$name" 0 "$why"

    # 6. the script's own usage errors: nothing runs
    local a fails="" n=0
    t0=$(now)
    for a in "" "-n" "-n 0" "-n x" "-n 65" "-n 2 --min 3" "-n 2 --max-restarts -1" \
             "-n 2 --bogus" "-n 2" "-n 2 -- $train" "-n 2 -- $train --checkpoint" \
             "-n 2 -- $train --checkpoint $d/u --resume $d/u" \
             "-n 2 -- $train --checkpoint=$d/u --resume=$d/u"; do
        n=$((n + 1))
        # shellcheck disable=SC2086
        env MPIEXEC="$d/no-mpiexec" timeout 10 bash "$script" $a >"$d/usage.out" \
            2>"$d/usage.err" </dev/null
        rc=$?
        if [ "$rc" != 2 ] || [ "$(wc -l <"$d/usage.err")" != 2 ] ||
           ! grep -q "^Try 'scripts/elastic.sh --help' for usage.$" "$d/usage.err"; then
            fails="$fails; '$a': $(status_words "$rc"), $(head -c 80 "$d/usage.err")"
        fi
    done
    MPIEXEC_TIMEOUT=abc timeout 10 bash "$script" -n 2 -- "$train" --checkpoint "$d/u" \
        >/dev/null 2>"$d/usage.err" </dev/null
    rc=$?
    [ "$rc" = 2 ] && grep -q 'MPIEXEC_TIMEOUT must be a whole number' "$d/usage.err" ||
        fails="$fails; MPIEXEC_TIMEOUT=abc: $(status_words "$rc")"
    timeout 10 bash "$script" --help >"$d/usage.out" 2>&1 </dev/null ||
        fails="$fails; --help: exit $?"
    grep -q '^usage: scripts/elastic.sh -n N' "$d/usage.out" || fails="$fails; no usage text"
    [ -e "$d/u" ] && fails="$fails; a usage error made $d/u"
    : >"$log"
    [ -z "$fails" ] && report "elastic.sh: usage errors" 1 "$((n + 1)) exit 2 with the Try line; --help  [$(since "$t0")]" ||
        report "elastic.sh: usage errors" 0 "${fails#; }"

    # 7. nothing left behind: SIGTERM to the script ends its job; no .tmp, no process
    name="elastic: SIGTERM to the script ends its job"
    t0=$(now)
    env MPIEXEC="$MPIEXEC" MPIEXEC_TIMEOUT=60 bash "$script" -n 2 -- "$train" --mode ddp \
        --steps 1000000 --checkpoint "$d/term.ck" --every 100000 >"$d/term.out" \
        2>"$d/term.err" </dev/null &
    local job=$! i
    for ((i = 0; i < 150; i++)); do     # at most 15 s for the steps to begin
        grep -q '^step 3 ' "$d/term.out" && break
        sleep 0.1
    done
    kill -TERM "$job"
    wait "$job"
    rc=$?
    cat "$d/term.out" "$d/term.err" >"$log"
    # a rank's watcher (lib/watch.c) outlives it by about 3 s, by design; zombies, which
    # an init that reaps nothing may leave, are no processes left running
    local left p
    for ((i = 0; i < 100; i++)); do     # at most 10 s
        left=0
        for p in $(pgrep -f -- "$d/"); do
            [ "$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | cut -c1)" = Z ] ||
                [ ! -e "/proc/$p" ] || left=$((left + 1))
        done
        [ "$left" = 0 ] && break
        sleep 0.1
    done
    if [ "$rc" != 143 ] || ! grep -q '^elastic.sh: stopped by SIGTERM: no restart$' \
            "$d/term.err"; then
        report "$name" 0 "$(status_words "$rc"), want exit 143 and a line saying so"
    elif [ "$left" != 0 ]; then
        report "$name" 0 "$left processes of its job are left"
    else
        report "$name" 1 "exit 143, no process left  [$(since "$t0")]"
    fi
    # 8. lesson 25, small: its three checks pass
    name="25_elastic -n 3 --steps 8 --kill-step 5 --every 2"
    if [ -x "$lesson" ]; then
        t0=$(now)
        MPIEXEC_TIMEOUT=60 timeout -k 5 90 "$lesson" -n 3 --steps 8 --kill-step 5 \
            --every 2 --keep "$d/lesson" >"$log" 2>&1 </dev/null
        rc=$?
        why=""
        [ "$rc" = 0 ] || why="$(status_words "$rc")"
        [ "$(grep -c '^check: .*PASS$' "$log")" = 3 ] || why="$why; not 3 checks that PASS"
        grep -Eq '^ +1 +[1-9][0-9]* +[1-9][0-9]* +[0-9]+ x ' "$log" ||
            why="$why; no row of bytes read for rank 1"
        [ -z "$why" ] && report "$name" 1 "3 checks PASS  [$(since "$t0")]" ||
            report "$name" 0 "${why#; }"
    else
        missing "lesson 25_elastic" "$lesson"
    fi

    # 9. lesson 25 when its first run cannot start: one sentence, and no table after it
    name="25_elastic with MPIEXEC=/nonexistent/mpiexec: one sentence, then stop"
    if [ -x "$lesson" ]; then
        t0=$(now)
        env MPIEXEC=/nonexistent/mpiexec MPIEXEC_TIMEOUT=60 "$MPIEXEC" -n 2 sh -c \
            '"$0" "$@"; rc=$?; echo "rank-exit ${PMI_RANK:-${PMIX_RANK:-?}} $rc" >&2
             exit $rc' "$lesson" -n 3 --steps 4 --kill-step 2 --every 2 \
            >"$log" 2>&1 </dev/null
        rc=$?
        why=""
        [ "$rc" != 0 ] || why="exit 0"
        [ "$(grep -c '^rank-exit [0-9]* [1-9]' "$log")" = 2 ] ||
            why="$why; not 2 ranks with a non-zero exit"
        [ "$(grep -c '^25_elastic: run 1: could not start /nonexistent/mpiexec' "$log")" = 1 ] ||
            why="$why; not one sentence naming /nonexistent/mpiexec"
        ! grep -Eqi '(^|[^a-z])(nan|inf)([^a-z]|$)|^Loss per step|^check:|^2\. ' "$log" ||
            why="$why; it went on after the failure"
        why=${why#; }
        [ -z "$why" ] && report "$name" 1 "exit $rc on every rank  [$(since "$t0")]" ||
            report "$name" 0 "$why"
    else
        missing "lesson 25_elastic" "$lesson"
    fi

    : >"$log"
    left=$(find "$d" -name '*.tmp' | wc -l)
    [ "$left" = 0 ] && report "elastic: no .tmp folder left in any checkpoint folder" 1 "" ||
        report "elastic: no .tmp folder left in any checkpoint folder" 0 \
            "$left: $(find "$d" -name '*.tmp' | head -n 3 | tr '\n' ' ')"
}
