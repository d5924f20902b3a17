#!/usr/bin/env bash
# Whether the files of lib/ and of viz/ call each other in circles. DESIGN's rule is that
# arrows point down: start-up above the modules it starts, transports below p2p.c, the
# modes' shared books below the modes; in viz/, the views above what they share.
#
#   bash scripts/layers.sh [--build DIR] [lib|viz ...]     (default: both)
#
# It reads what was built (make first): from each object file under DIR/obj/lib or
# DIR/obj/viz (C and CUDA alike), the global symbols it defines and the ones it uses, so
# "a.c calls b.c" means a.o uses a function or variable b.o defines (a static inline of
# a header is no call). A circle is a set of files each of which reaches every other
# by such calls (a strongly connected component of two files or more). For each part it
# prints "lib: no circles (N files, E arrows)", or each circle's files and the arrows
# among them with the symbols of each. Exit status 0 when no part has a circle, 1 when
# one has, 2 for bad input.
set -u
cd "$(dirname "$0")/.." || exit 2
build=build
parts=()
while [ $# -gt 0 ]; do
    case $1 in
        --build) [ $# -ge 2 ] || { echo "layers.sh: --build needs a folder" >&2; exit 2; }
                 build=$2; shift 2 ;;
        lib|viz) parts+=("$1"); shift ;;
        -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "layers.sh: '$1': the parts are lib and viz" >&2
           echo "usage: bash scripts/layers.sh [--build DIR] [lib|viz ...]" >&2; exit 2 ;;
    esac
done
[ ${#parts[@]} -gt 0 ] || parts=(lib viz)
command -v nm >/dev/null 2>&1 || { echo "layers.sh: needs nm (binutils)" >&2; exit 2; }

status=0
for part in "${parts[@]}"; do
    objs=$(find "$build/obj/$part" -name '*.o' 2>/dev/null | sort)
    if [ -z "$objs" ]; then
        echo "layers.sh: no objects under $build/obj/$part: build first (make)" >&2
        exit 2
    fi
    # "D file symbol" for what a file defines, "U file symbol" for what it uses
    # shellcheck disable=SC2086
    for o in $objs; do
        f=${o#"$build"/obj/}
        nm "$o" | awk -v f="${f%.o}" '
            NF == 3 && $2 ~ /^[TDBRCVWG]$/ { print "D", f, $3 }
            NF == 2 && $1 == "U"           { print "U", f, $2 }'
    done | awk -v part="$part" '
        $1 == "D" { def[$3] = $2; files[$2] = 1; next }
        { use[NR] = $2 " " $3; files[$2] = 1 }
        END {
            # the arrows: a -> b with the symbols of b that a uses
            for (i in use) {
                split(use[i], u, " ")
                if (!(u[2] in def) || def[u[2]] == u[1]) continue
                k = u[1] SUBSEP def[u[2]]
                if (!(k in edge)) { edge[k] = u[2]; narrows++ }
                else if (length(edge[k]) < 60) edge[k] = edge[k] ", " u[2]
            }
            nfiles = 0
            for (f in files) nfiles++
            for (k in edge) { split(k, e, SUBSEP); adj[e[1], ++nadj[e[1]]] = e[2] }
            for (f in files) if (!(f in num)) strong(f)
            bad = 0
            for (c = 1; c <= ncomp; c++) if (size[c] > 1) bad++
            if (bad == 0) {
                printf "%s: no circles (%d files, %d arrows)\n", part, nfiles, narrows
                exit 0
            }
            printf "%s: %d circle%s (files that reach each other), with their arrows:\n",
                   part, bad, (bad > 1 ? "s" : "")
            for (c = 1; c <= ncomp; c++) {
                if (size[c] < 2) continue
                printf "  %d files: %s\n", size[c], members[c]
                cmd = "sort"
                for (k in edge) {
                    split(k, e, SUBSEP)
                    if (comp[e[1]] == c && comp[e[2]] == c)
                        printf "    %s -> %s  (%s)\n", e[1], e[2], edge[k] | cmd
                }
                close(cmd)
            }
            exit 1
        }
        # Tarjan: the strongly connected components, each a circle when it has two files
        function strong(v,    i, w) {
            num[v] = low[v] = ++count
            stack[++sp] = v; onstack[v] = 1
            for (i = 1; i <= nadj[v]; i++) {
                w = adj[v, i]
                if (!(w in num)) { strong(w); if (low[w] < low[v]) low[v] = low[w] }
                else if (onstack[w] && num[w] < low[v]) low[v] = num[w]
            }
            if (low[v] == num[v]) {
                ncomp++
                do {
                    w = stack[sp--]; onstack[w] = 0; comp[w] = ncomp; size[ncomp]++
                    members[ncomp] = members[ncomp] (size[ncomp] > 1 ? " " : "") w
                } while (w != v)
            }
        }' || status=1
done
exit $status
