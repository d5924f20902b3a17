#!/usr/bin/env bash
# dtviz in a real X window: Xvfb (a virtual X server) on a free display, real key
# presses, a resize and a click sent with xdotool, and dtviz --verbose telling on stdout
# what it did with each. Needs Xvfb and xdotool (make deps).
#
#     BUILD=build bash tests/viz_xvfb.sh
#
# Prints a PASS line per stage; on the first failure a FAIL line with the reason and
# dtviz's output, exit status 1. Every wait is bounded (30 s), and whatever it started
# is killed on the way out, however it ends.
set -u

cd "$(dirname "$0")/.." || exit 1
BUILD=${BUILD:-build}
DTVIZ=$BUILD/dtviz
LIMIT=30

tmp=$(mktemp -d "${TMPDIR:-/tmp}/dtviz-xvfb.XXXXXX") || exit 1
out=$tmp/out
xvfb_pid=
viz_pid=

cleanup() {
    [ -n "$viz_pid" ] && kill "$viz_pid" 2>/dev/null
    [ -n "$xvfb_pid" ] && kill "$xvfb_pid" 2>/dev/null
    wait 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

fail() {
    echo "FAIL  viz_xvfb: $*"
    for f in "$out" "$tmp/err"; do
        [ -s "$f" ] && sed 's/^/    | /' "$f"
    done
    exit 1
}
pass() { echo "PASS  viz_xvfb: $*"; }

# Waits until dtviz has printed at least $2 lines matching $1 (default 1).
wait_line() {
    timeout "$LIMIT" bash -c 'until [ "$(grep -c -- "$1" "$2")" -ge "$3" ]; do sleep 0.05; done' \
        _ "$1" "$out" "${2:-1}" || fail "no line '$1' (x${2:-1}) within $LIMIT s"
}

for tool in Xvfb xdotool timeout; do
    command -v "$tool" >/dev/null || fail "$tool is not installed (make deps)"
done
[ -x "$DTVIZ" ] || fail "$DTVIZ is not built (make BUILD=$BUILD $DTVIZ)"

# ==== without a display: a message pointing to the headless options, exit 1 ====
env -u DISPLAY -u WAYLAND_DISPLAY timeout "$LIMIT" "$DTVIZ" --algo ring-allreduce \
    >/dev/null 2>"$tmp/err"
rc=$?
[ "$rc" = 1 ] && grep -q -- '--png' "$tmp/err" || fail "without a display: exit $rc"
pass "no display: exit 1, suggests --png"

# ==== Xvfb: it picks a free display and writes its number to fd 3 when ready ====
Xvfb -displayfd 3 -screen 0 1280x1024x24 -nolisten tcp 3>"$tmp/display" 2>"$tmp/xvfb.log" &
xvfb_pid=$!
timeout "$LIMIT" bash -c 'until grep -q "^[0-9][0-9]*$" "$1"; do sleep 0.05; done' _ \
    "$tmp/display" || fail "Xvfb did not start: $(tail -n 3 "$tmp/xvfb.log")"
export DISPLAY=:$(head -n 1 "$tmp/display")
unset WAYLAND_DISPLAY
pass "Xvfb on $DISPLAY"

# ==== the window ====
timeout -k 5 120 "$DTVIZ" --verbose --algo ring-allreduce --ranks 4 --size 1000x700 \
    >"$out" 2>"$tmp/err" &
viz_pid=$!
wid=$(timeout "$LIMIT" xdotool search --sync --name '^dtviz' | head -n 1)
[ -n "$wid" ] || fail "no dtviz window within $LIMIT s"
wait_line '^dtviz: size 1000x700 '
wait_line '^dtviz: position 0 of 0\.\.6: call 1 of 1, allreduce_ring '
# keys go to the focused window; without a window manager, focus it ourselves
timeout "$LIMIT" xdotool mousemove --window "$wid" 500 100 || fail "mousemove"
timeout "$LIMIT" xdotool windowfocus --sync "$wid" || fail "cannot focus the window"
pass "window $wid opened at 1000x700, position 0"

# ==== keys: Right Right Left lands on 1; h shows the help ====
timeout "$LIMIT" xdotool key Right && wait_line '^dtviz: position 1 of 0\.\.6: '
timeout "$LIMIT" xdotool key Right && wait_line '^dtviz: position 2 of 0\.\.6: '
timeout "$LIMIT" xdotool key Left && wait_line '^dtviz: position 1 of 0\.\.6: ' 2
pass "Right Right Left: positions 1, 2, 1"
timeout "$LIMIT" xdotool key h && wait_line '^dtviz: help on'
pass "h: help on"

# ==== a resize, then a click on the new timeline, 3/4 along: step 4.5 of 6, position 4 ====
timeout "$LIMIT" xdotool windowsize "$wid" 900 600 || fail "windowsize"
wait_line '^dtviz: size 900x600 timeline '
read -r tx ty tw th < <(sed -n 's/^dtviz: size 900x600 timeline \([0-9]*\),\([0-9]*\) \([0-9]*\)x\([0-9]*\)$/\1 \2 \3 \4/p' "$out" | tail -n 1)
[ -n "${th:-}" ] && [ "$tw" -gt 0 ] || fail "no timeline in the size line"
pass "resized to 900x600, timeline at $tx,$ty ${tw}x$th"
timeout "$LIMIT" xdotool mousemove --window "$wid" $((tx + tw * 3 / 4)) $((ty + th / 2)) click 1 ||
    fail "click"
wait_line '^dtviz: position 4 of 0\.\.6: '
pass "click on the timeline: position 4"

# ==== q quits, with status 0 ====
timeout "$LIMIT" xdotool key q
timeout "$LIMIT" bash -c 'while kill -0 "$1" 2>/dev/null; do sleep 0.05; done' _ "$viz_pid" ||
    fail "dtviz still running $LIMIT s after q"
wait "$viz_pid"
rc=$?
viz_pid=
[ "$rc" = 0 ] || fail "dtviz exited with status $rc after q"
pass "q: exit 0"
