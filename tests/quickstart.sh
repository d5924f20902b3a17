#!/usr/bin/env bash
# The README's quick start, as a new user runs it: the commands of its first code block,
# in the README's order, each in a fresh shell, on this tree as it is (CI runs it first,
# on a fresh clone, before anything else has built a thing, so a step that needs one the
# README puts later fails here). It stops before `make test`, which .ci/run runs next.
#
#   bash tests/quickstart.sh          (QUICKSTART_LIMIT: seconds per command, default 1800)
#
# Each command's output goes to the terminal; a line before it names it, a line after it
# says how long it took. Exit 0 when every command did, else the first failure's status.
set -u
cd "$(dirname "$0")/.." || exit 1
limit=${QUICKSTART_LIMIT:-1800}
export MPIEXEC_TIMEOUT=${MPIEXEC_TIMEOUT:-300}

# The block under "## Quick start": its lines, without the '# ...' comments and the
# comment-only lines that continue them.
mapfile -t cmds < <(awk '/^## Quick start/ { on = 1; next }
                         on && /^```/ { if (inside) exit; inside = 1; next }
                         inside { sub(/[ \t]*#.*/, ""); if ($0 != "") print }' README.md)
if [ ${#cmds[@]} -eq 0 ]; then
    echo "quickstart: README.md has no code block under '## Quick start'" >&2
    exit 1
fi
n=0
for c in "${cmds[@]}"; do
    [ "$c" = "make test" ] && break           # .ci/run's next step
    n=$((n + 1))
    echo "== quick start $n: $c"
    t0=$SECONDS
    timeout "$limit" bash -c "$c" </dev/null
    rc=$?
    echo "== quick start $n: exit $rc after $((SECONDS - t0)) s: $c"
    if [ "$rc" != 0 ]; then
        echo "quickstart: '$c', step $n of the README's quick start, failed (exit $rc)" >&2
        exit "$rc"
    fi
done
echo "quickstart: the README's $n commands before 'make test' passed, in its order"
