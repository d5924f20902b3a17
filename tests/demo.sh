# make demo as a learner meets it: no display, and only what the demo runs installed
# (MPICH, SDL2, the font), none of the tests' tools (clang, Xvfb, xauth, xdotool,
# valgrind) nor Check. Sourced by tests/run.sh (section 6), which defines run and report.
#
# The tools are hidden by a PATH of links to every command but them (and sudo, so that
# if the demo asked for packages, scripts/deps.sh could not install them and the demo
# would fail: the test can fail), Check by a pkg-config search path without check.pc.
# The demo builds into $BUILD-cpu when $BUILD is a CUDA build; the test uses that
# directory when it exists (CI builds it first), else $BUILD itself, so that it never
# adds a whole build to make test.
demo_tests() {
    shopt -s extglob
    local pc=$tmp/demo-pc d f name path="" i=0 demo_build=$BUILD
    mkdir -p "$pc"
    local IFS=:
    for d in $PATH; do                 # a directory holding a hidden tool: a copy without
        i=$((i + 1))
        if ! compgen -G "$d/@(clang*|Xvfb|xauth|xdotool|valgrind*|sudo)" >/dev/null; then
            path=$path${path:+:}$d     # none: as it is (nvcc finds its toolkit beside it)
            continue
        fi
        mkdir -p "$tmp/demo-bin$i"
        for f in "$d"/*; do
            name=${f##*/}
            case $name in
                clang*|Xvfb|xauth|xdotool|valgrind*|sudo) ;;
                *) [ -x "$f" ] && ln -s "$f" "$tmp/demo-bin$i/$name" ;;
            esac
        done
        path=$path${path:+:}$tmp/demo-bin$i
    done
    for d in $(pkg-config --variable pc_path pkg-config); do
        for f in "$d"/*.pc; do
            [ -e "$f" ] && [ "${f##*/}" != check.pc ] && [ ! -e "$pc/${f##*/}" ] &&
                ln -s "$f" "$pc/${f##*/}"
        done
    done
    unset IFS
    [ -d "$BUILD-cpu" ] && demo_build=$BUILD-cpu
    rm -rf "$BUILD/demo-frames"
    run "make demo (no display, no test tools, no Check)" 0 env -u DISPLAY -u WAYLAND_DISPLAY \
        PATH="$path" PKG_CONFIG_LIBDIR="$pc" \
        make --no-print-directory -s demo BUILD="$BUILD" DEMO_BUILD="$demo_build" \
        MPIEXEC="$MPIEXEC"
    if grep -q 'missing:' "$log"; then
        report "make demo asks only for what it runs" 0 "$(grep -m1 'missing:' "$log")"
    fi
    n=$(ls "$BUILD/demo-frames" 2>/dev/null | grep -c '\.png$')
    [ "$n" = 7 ] && report "make demo wrote the ring's steps as PNG" 1 "$n frames" ||
        report "make demo wrote the ring's steps as PNG" 0 "$n frames, not 7"
}
