# Section 19 of tests/run.sh: the docs still say what is true. Every command shown in a
# fenced code block of README.md and docs/*.md that can run here runs, and must exit 0;
# every relative link in those files names a file that exists, and every #anchor a
# heading of the file it points into. So a renamed option, a removed program, a mistyped
# path or a page moved without its links fails here.
#
#   1. links: [text](path#anchor) and ![picture](path) outside code blocks; http(s) and
#      mailto links are not followed. An anchor is checked against the headings of its
#      file, slugged as GitHub does (lower case, punctuation dropped, spaces to '-').
#   2. commands: the blocks opened by ``` alone or ```sh, ```bash, ```console (```c
#      is source, ```text is output, and neither is read). In a block with "$ " prompts
#      only the prompted lines are commands; elsewhere a line is a command when its
#      first word (after VAR=value settings) is one of: build/..., ./..., mpiexec, make,
#      mpicc, cmp, bash scripts/..., scripts/..., sudo, python3. A line ending in '\'
#      goes on on the next; '# ...' comments are dropped.
#      Each block runs in a scratch folder of its own under $tmp ($tmp/docs/N), whose
#      build/ is a link to $BUILD and whose lessons/, scripts/, viz/, bench/, lib/,
#      tests/, exercises/ and Makefile are links to the repository's, so what a command
#      writes (traces, checkpoints, PNGs) stays there; the block's commands run in order
#      in it (a trace, then the viewer on it). Each command has $DOCS_LIMIT seconds
#      (default 30) through timeout(1) and MPIEXEC_TIMEOUT. `mpiexec` at the start of a
#      command is $MPIEXEC. A `make` command runs as `make -n -C ROOT` with BUILD a
#      folder of the block's own (a dry run: its target and settings must exist; nothing
#      is built, which would race whoever builds in this checkout, and nothing is
#      installed). The program of your own (myprog.c) is the first ```c block of the
#      same file, written into the block's folder, and path/to/dtlab is the repository.
#   Three lists below, each entry with its reason: the commands not run here (skipped,
#   one SKIP line each); the jobs the doc shows killed part way (run with the test hook
#   DT_TEST_KILL, so that the resume after them has something to resume); and the
#   benchmarks, run with options added that make them cheap. The last lines say how
#   many commands ran and how many were skipped, and why.
#
# DOCS_FILES="README.md docs/x.md" checks those files only; DOCS_LIMIT (seconds a
# command, default 30).
#
# run.sh sources this file and calls docs_tests; it uses run.sh's report, skip, now,
# since, status_words, $tmp, $log, $BUILD and $MPIEXEC.

# Commands the test does not run: "PATTERN<TAB>REASON", PATTERN an extended regular
# expression (bash's =~) on the command as the doc shows it, first match wins.
# (A dtviz command that writes a PNG, frames or a JSON file needs no display and runs;
# the window-opening ones are caught by docs_opens_window below.)
docs_skip_list=$(cat <<'EOF'
^make test( |$)	make test itself (this test is one of its sections)
^make deps( |$)	installs packages (apt-get, as root)
(^|[ ;])sudo 	needs root: hosts made of network namespaces
^cat hosts$	shows a cluster's hosts file (node1, node2)
mpiexec -f hosts 	needs other hosts reached over ssh (a hosts file)
scripts/gpu-pack\.sh	builds a CUDA pack for another machine: nvcc, minutes
scripts/gpu-check\.sh( --budget| --bench|$| *#)	needs a GPU (the pack, and minutes)
scripts/gpu-check\.sh --dry-run	minutes of runtime (every GPU check, on the CPU)
bench/step_vs_torch\.py	needs PyTorch, and minutes of runtime
EOF
)

# Commands that stand for a job killed part way, the next command of their block resuming
# it: "PATTERN<TAB>R:S<TAB>WHY". Each runs with DT_TEST_KILL=R:S (rank R kills itself at
# the end of step S, after the checkpoint before it), and must end with the watcher's
# line for that rank; the resume after it must then exit 0.
docs_kill_list=$(cat <<'EOF'
build/train --mode fsdp --steps 100 --checkpoint ck --every 10$	3:15	"after a crash or a kill, the same command with --resume"
-n 4 build/train --mode fsdp --steps 20 --checkpoint ck --every 5$	0:12	"# killed at 12", then resharded onto 3 ranks
EOF
)

# Commands that run here made cheaper by options added at the end (the last one given
# wins), all the doc's own options still parsed and used: "PATTERN<TAB>ADDED<TAB>WHY".
docs_cheap_list=$(cat <<'EOF'
build/bench/collbench 	-n 1 -w 0 -e 1M	a benchmark: one timed call a size, none to warm up, up to 1 MiB (64 MiB at 4 ranks took over 20 s on 2 busy cores)
DT_BLAS=0 build/train --hidden 1024	--steps 2 --batch 32	the plain loops at width 1024: 10 steps of 256 took over 30 s under the sanitizers on 2 busy cores
build/train --model gpt	--steps 30	the GPT's 300 default steps took over 30 s at 2 ranks under the sanitizers on 2 busy cores; 30 print the same lines (section 5 runs the README's command whole)
EOF
)

# docs_opens_window CMD: whether CMD is a dtviz run that opens a window (no --png,
# --frames or --export-chrome): it waits for a display and its user.
docs_opens_window() {
    [[ $1 =~ (^|[ /])dtviz( |$) ]] || return 1
    [[ ! $1 =~ --(png|frames|export-chrome)( |=) ]]
}

# docs_commands FILE...: "FILE<TAB>BLOCK<TAB>LINE<TAB>COMMAND" for every command line.
docs_commands() {
    awk 'function flush() { if (cmd != "") print FILENAME "\t" blk "\t" at "\t" cmd; cmd = "" }
         FNR == 1 { inblk = 0; cmd = ""; nb = 0 }
         /^```/ {
             if (!inblk) {
                 tag = substr($0, 4); gsub(/[ \t]/, "", tag)
                 inblk = 1; nb++; blk = FILENAME ":" FNR; n = 0; prompted = 0
                 use = (tag == "" || tag == "sh" || tag == "bash" || tag == "console" ||
                        tag == "shell")
                 next
             }
             flush(); inblk = 0; next
         }
         !inblk || !use { next }
         {
             line = $0
             if (cont) { cmd = cmd " " line; sub(/^[ \t]+/, " ", line) }
             else {
                 if (line ~ /^\$ /) { prompted = 1; line = substr(line, 3) }
                 else if (prompted || line !~ /^(([A-Z_][A-Z0-9_]*=[^ ]* )*)(build\/|\.\/|mpiexec |make( |$)|mpicc |cmp |bash scripts\/|scripts\/|sudo |python3 )/) next
                 cmd = line; at = FNR
             }
             cont = (cmd ~ /\\[ \t]*$/)
             if (cont) { sub(/[ \t]*\\[ \t]*$/, "", cmd); next }
             sub(/[ \t]+#.*$/, "", cmd); gsub(/[ \t]+/, " ", cmd); sub(/ $/, "", cmd)
             flush()
         }' "$@"
}

# docs_slugs FILE: the anchors of the headings of FILE, one a line, as GitHub makes them.
docs_slugs() {
    awk '/^```/ { inblk = !inblk; next }
         !inblk && /^#+ / {
             h = $0; sub(/^#+ +/, "", h); h = tolower(h)
             gsub(/[^a-z0-9 _-]/, "", h); gsub(/ /, "-", h); print h
         }' "$1"
}

# docs_links FILE: "LINE<TAB>TARGET" for every link outside code blocks.
docs_links() {
    awk '/^```/ { inblk = !inblk; next }
         !inblk {
             s = $0; gsub(/`[^`]*`/, "", s)
             while (match(s, /\]\([^) ]+\)/)) {
                 print FNR "\t" substr(s, RSTART + 2, RLENGTH - 3)
                 s = substr(s, RSTART + RLENGTH)
             }
         }' "$1"
}

docs_tests() {
    local root=$PWD f line target path anchor bad nlinks
    local files=(README.md docs/*.md)
    [ -z "${DOCS_FILES:-}" ] || read -r -a files <<<"$DOCS_FILES"
    local build_abs=$BUILD lim=${DOCS_LIMIT:-30} t0
    case $build_abs in /*) ;; *) build_abs=$root/$BUILD ;; esac
    if [ ! -d docs ]; then
        : >"$log"
        report "docs: docs/ exists" 0 "no docs/ folder beside README.md"
        return
    fi

    # 1. links and anchors
    : >"$log"
    bad=0
    nlinks=0
    for f in "${files[@]}"; do
        while IFS=$'\t' read -r line target; do
            case $target in http://*|https://*|mailto:*) continue ;; esac
            nlinks=$((nlinks + 1))
            path=${target%%#*}
            anchor=""
            [[ $target == *'#'* ]] && anchor=${target#*#}
            if [ -z "$path" ]; then
                path=$f
            else
                path=$(dirname "$f")/$path
            fi
            if [ ! -e "$path" ]; then
                echo "$f:$line: $target: no such file ($path)" >>"$log"
                bad=$((bad + 1))
            elif [ -n "$anchor" ]; then
                if [ -d "$path" ] || [[ $path != *.md ]]; then
                    echo "$f:$line: $target: an anchor into a file that is no .md" >>"$log"
                    bad=$((bad + 1))
                elif ! docs_slugs "$path" | grep -qxF -- "$anchor"; then
                    echo "$f:$line: $target: $path has no heading '#$anchor'" >>"$log"
                    bad=$((bad + 1))
                fi
            fi
        done < <(docs_links "$f")
    done
    if [ "$bad" = 0 ]; then
        report "docs: links and anchors" 1 "$nlinks relative links in ${#files[@]} files"
    else
        report "docs: links and anchors" 0 "$bad of $nlinks links lead nowhere"
    fi

    # 2. the commands, block by block
    local d="" blk="" last="" cmd run_cmd rc why name ran=0 dry=0 skipped_here=0 n=0
    local -A skip_why=()
    local pat reason x mk_build kill_at
    while IFS=$'\t' read -r f blk line cmd; do
        name="$f:$line: $cmd"
        [ ${#name} -le 110 ] || name="${name:0:107}..."
        why=""
        while IFS=$'\t' read -r pat reason; do
            if [[ $cmd =~ $pat ]]; then why=$reason; break; fi
        done <<<"$docs_skip_list"
        [ -n "$why" ] || ! docs_opens_window "$cmd" || why="opens a window: needs a display"
        if [ -n "$why" ]; then
            skipped_here=$((skipped_here + 1))
            skip_why[$why]=$(( ${skip_why[$why]:-0} + 1 ))
            skip "docs: $name" "$why"
            continue
        fi
        if [ "$blk" != "$last" ]; then           # a new block: a new scratch folder
            last=$blk
            n=$((n + 1))
            d=$tmp/docs/$n
            mkdir -p "$d"
            ln -s "$build_abs" "$d/build"
            for x in lessons scripts viz bench lib tests exercises Makefile; do
                ln -s "$root/$x" "$d/$x"
            done
        fi
        if [[ $cmd == *myprog.c* ]] && [ ! -e "$d/myprog.c" ]; then
            awk '/^```c$/ { on = 1; next } on && /^```/ { exit } on' "$f" >"$d/myprog.c"
        fi
        run_cmd=${cmd//path\/to\/dtlab/$root}
        mk_build=$build_abs
        case $run_cmd in
            make|make\ *)
                # make -n still expands recipes, and the library's writes build/flags
                # and build/libs through $(file ...): a BUILD of the block's own
                mk_build=$d/make-n-build
                mkdir -p "$mk_build" "$mk_build-cpu"     # (make demo's, with nvcc)
                # (a target under build/ names the file in that BUILD: make's rule
                # for it is $(BUILD)/..., whatever BUILD this run has)
                run_cmd=${run_cmd#make}
                run_cmd="make -n -C \"$root\" ${run_cmd// build\// \"$mk_build\"/}"
                dry=$((dry + 1)) ;;
            mpiexec\ *) run_cmd="\"\$DOCS_MPIEXEC\" ${run_cmd#mpiexec }" ;;
        esac
        kill_at=""
        while IFS=$'\t' read -r pat x reason; do
            if [[ $cmd =~ $pat ]]; then kill_at=$x; break; fi
        done <<<"$docs_kill_list"
        while IFS=$'\t' read -r pat x reason; do
            if [[ $cmd =~ $pat ]]; then run_cmd="$run_cmd $x"; break; fi
        done <<<"$docs_cheap_list"
        t0=$(now)
        (cd "$d" && env BUILD="$mk_build" DOCS_MPIEXEC="$MPIEXEC" MPIEXEC_TIMEOUT="$lim" \
            ${kill_at:+DT_TEST_KILL=$kill_at} timeout "$lim" bash -c "$run_cmd") \
            >"$log" 2>&1 </dev/null
        rc=$?
        ran=$((ran + 1))
        if [ -n "$kill_at" ]; then
            # killed on purpose: it must end as the kill makes it end, the rank named
            if [ "$rc" != 0 ] && [ "$rc" != 124 ] && grep -q 'died without a word' "$log"; then
                report "docs: $name" 1 "killed as the doc says (DT_TEST_KILL=$kill_at) [$(since "$t0")]"
            else
                report "docs: $name" 0 "$(status_words "$rc") with DT_TEST_KILL=$kill_at; want a rank that died without a word"
            fi
        elif [ "$rc" = 0 ]; then
            report "docs: $name" 1 "[$(since "$t0")]"
        else
            [ "$rc" = 124 ] && why="timed out after $lim s" || why=$(status_words "$rc")
            report "docs: $name" 0 "$why (in $d)"
        fi
    done < <(docs_commands "${files[@]}")

    echo "docs: $ran commands ran ($dry of them as make -n), $skipped_here skipped:"
    for why in "${!skip_why[@]}"; do
        printf 'docs:   %3d  %s\n' "${skip_why[$why]}" "$why"
    done
}
