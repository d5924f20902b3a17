#!/usr/bin/env bash
# Many hosts on one machine: network namespaces joined by virtual Ethernet, for MPI.
#
#   sudo scripts/hosts.sh 3 --rate 200 -- build/lessons/22_hosts --max-size 1M
#
# makes 3 hosts, runs the program on them with mpiexec (one rank per host unless -n
# says otherwise), and takes the hosts down again however the run ends (Ctrl-C too).
# Or step by step: `up N`, then `run` as often as you like, then `down`.
#
# The picture: a "switch" namespace holds a bridge; each host is a namespace with its
# own eth0 (10.123.0.K+1/24) plugged into the bridge by a veth pair, and its own host
# name. On each host's eth0 a queueing discipline shapes what the host sends: netem for
# --delay (and the rate with it), else tbf for --rate. TCP keeps its window between
# messages (tcp_slow_start_after_idle=0), as a cluster's tuning would, so that a
# message costs about alpha + n beta and not a slow start each time. The machine's own
# network is not touched: everything lives in namespaces named PREFIX-sw and PREFIX-h0,
# PREFIX-h1, ... (PREFIX is $DT_HOSTS_PREFIX, default dtlab).
#
# mpiexec (Hydra) runs inside host 0 and talks to the others over eth0 (-iface eth0).
# Where it would ssh to a host, it calls scripts/netns-launch.sh, which enters that
# host's namespace instead. The ranks are told to use TCP (UCX_TLS=tcp,self for MPICH
# over UCX; FI_PROVIDER=tcp over libfabric): UCX would otherwise see that the "hosts"
# share memory and bypass the network altogether. The ranks also get a stand-in for
# MPI_Finalize, which over TCP often hangs in Debian 12's MPICH (see finalize_shim).
#
# Needs root and iproute2 (ip, tc). Exit status: the program's for a run; 2 for bad
# arguments; 3 when this machine cannot make network namespaces (not root, no `ip`,
# or the kernel refuses), with the reason on stderr.
set -u

here=$(cd "$(dirname "$0")" && pwd)
work=""                         # run's hostfile and MPI_Finalize stand-in
prefix=${DT_HOSTS_PREFIX:-dtlab}
MPIEXEC=${MPIEXEC:-mpiexec}
net=10.123.0

usage="usage: scripts/hosts.sh N [--delay MS] [--rate MBIT] [-n NP] -- PROGRAM [ARGS...]
         N hosts up, PROGRAM on NP ranks (default N) across them, the hosts down
       scripts/hosts.sh up N [--delay MS] [--rate MBIT]
       scripts/hosts.sh run [-n NP] [--] PROGRAM [ARGS...]
       scripts/hosts.sh down
       scripts/hosts.sh status
       scripts/hosts.sh check     can this machine make hosts, and add a delay?
  N             hosts, 2 to 16
  --delay MS    milliseconds added to every packet a host sends, 0 to 10000 (needs
                the kernel's netem; where it is missing, no delay is added and the
                script says so)
  --rate MBIT   megabits per second each host may send, 1 to 100000 (default: no limit)
  -n NP         ranks, 1 to 64, placed round-robin over the hosts
Needs root. Environment: DT_HOSTS_PREFIX (names, default dtlab), MPIEXEC,
MPIEXEC_TIMEOUT (seconds before mpiexec ends a run)."

say() { echo "hosts.sh: $*"; }
bad() {
    echo "hosts.sh: $*" >&2
    echo "$usage" >&2
    exit 2
}
cannot() {
    echo "hosts.sh: this machine cannot make network namespaces: $*" >&2
    exit 3
}

case $prefix in
    [a-z]*) ;;
    *) bad "DT_HOSTS_PREFIX '$prefix' must start with a lower-case letter" ;;
esac
case $prefix in
    *[!a-z0-9-]*) bad "DT_HOSTS_PREFIX '$prefix' may hold only a-z, 0-9 and -" ;;
esac
[ ${#prefix} -le 20 ] || bad "DT_HOSTS_PREFIX '$prefix' is longer than 20 characters"

# whole NAME VALUE MIN MAX: VALUE is a whole number in [MIN, MAX], or a usage error.
whole() {
    case $2 in
        "" | *[!0-9]*) bad "$1 must be a whole number, not '$2'" ;;
    esac
    [ ${#2} -le 6 ] && [ "$2" -ge "$3" ] && [ "$2" -le "$4" ] ||
        bad "$1 must be from $3 to $4, not '$2'"
}

# Root, ip and a namespace the kernel lets us make, or exit 3 saying which is missing.
need_netns() {
    [ "$(id -u)" = 0 ] || cannot "it needs root (try: sudo scripts/hosts.sh ...)"
    command -v ip >/dev/null && command -v tc >/dev/null ||
        cannot "no 'ip' or 'tc' command (Debian: apt-get install iproute2, or make deps)"
    local probe=$prefix-probe$$ err
    err=$(ip netns add "$probe" 2>&1) || cannot "'ip netns add' failed: $err"
    ip netns del "$probe"
}

# Whether the kernel has netem, tried on a veth pair in a namespace of its own.
have_netem() {
    local probe=$prefix-probe$$ ok=1
    ip netns add "$probe" || return 1
    ip -n "$probe" link add dtva type veth peer name dtvb &&
        tc -n "$probe" qdisc add dev dtva root netem delay 1ms 2>/dev/null || ok=0
    ip netns del "$probe"
    [ "$ok" = 1 ]
}
no_netem="this kernel has no netem (CONFIG_NET_SCH_NETEM, module sch_netem)"

# names: every namespace's name; hosts: ours that are hosts, in order; ours: all of ours
names() { ip netns list 2>/dev/null | awk '{ print $1 }'; }
hosts() { names | grep -E "^$prefix-h[0-9]+\$" | sort -V; }
ours() { names | grep -E "^$prefix-(sw|h[0-9]+)\$"; }

# down: every namespace of ours, and what still runs inside (ranks of a stopped run).
down() {
    local ns pids gone=0
    for ns in $(ours); do
        pids=$(ip netns pids "$ns" 2>/dev/null)
        [ -z "$pids" ] || kill -KILL $pids 2>/dev/null
        ip netns del "$ns" && gone=$((gone + 1))
    done
    [ "$gone" = 0 ] || say "down: removed $gone namespaces (hosts, switch, their links)"
}

# Refuses to make hosts over ones that are up (another run's, or a user's).
not_up() {
    [ -z "$(ours)" ] ||
        bad "hosts named $prefix-* are up already: scripts/hosts.sh down first"
}

# up N DELAY RATE: the switch, then N hosts plugged into it, each link shaped.
up() {
    local n=$1 delay=$2 rate=$3 k h shape=""
    not_up
    if [ -n "$delay" ] && [ "$delay" != 0 ]; then
        if have_netem; then
            shape="netem delay ${delay}ms limit 100000${rate:+ rate ${rate}mbit}"
        else
            say "$no_netem: --delay $delay is NOT applied; alpha will be the real latency"
        fi
    fi
    # tbf: a burst of 0.2 ms at the rate (two full packets at least), so that a
    # message bigger than a few KiB already pays the rate; a queue of up to 200 ms
    if [ -z "$shape" ] && [ -n "$rate" ]; then
        local burst=$((rate * 25 > 3028 ? rate * 25 : 3028))
        shape="tbf rate ${rate}mbit burst $burst latency 200ms"
    fi
    trap 'down; exit 130' INT TERM HUP
    local sw=$prefix-sw
    ip netns add "$sw" &&
        ip -n "$sw" link set lo up &&
        ip -n "$sw" link add br0 type bridge &&
        ip -n "$sw" link set br0 up || { down; cannot "could not make the switch $sw"; }
    for ((k = 0; k < n; k++)); do
        h=$prefix-h$k
        ip netns add "$h" &&
            ip -n "$sw" link add "p$k" type veth peer name eth0 netns "$h" &&
            ip -n "$sw" link set "p$k" master br0 up &&
            ip -n "$h" addr add "$net.$((k + 1))/24" dev eth0 &&
            ip -n "$h" link set eth0 up &&
            ip -n "$h" link set lo up &&
            { ip netns exec "$h" sysctl -qw net.ipv4.tcp_slow_start_after_idle=0 \
                  2>/dev/null || :; } &&
            { [ -z "$shape" ] || tc -n "$h" qdisc add dev eth0 root $shape; } ||
            { down; cannot "could not make host $h"; }
    done
    trap - INT TERM HUP
    say "$n hosts up: $prefix-h0 .. $prefix-h$((n - 1)), $net.1 .. $net.$n on one switch"
    say "each host sends through: ${shape:-no limit, no added delay}"
}

status() {
    local h list
    list=$(hosts)
    if [ -z "$list" ]; then
        say "no hosts up (prefix $prefix)"
        return
    fi
    for h in $list; do
        printf '%-14s %-18s %s\n' "$h" \
            "$(ip -n "$h" -4 -o addr show dev eth0 | awk '{ print $4 }')" \
            "$(tc -n "$h" qdisc show dev eth0 | head -n 1 |
               sed 's/ refcnt [0-9]*//; s/ root//')"
    done
}

# A stand-in for the ranks' MPI_Finalize, compiled into $work, loaded with LD_PRELOAD.
# Debian 12's MPICH (4.0, over UCX 1.13) often hangs in MPI_Finalize when ranks talk
# over TCP: a rank closing its connections waits for a peer that has already moved on
# to the launcher's final barrier and no longer answers. The stand-in waits for every
# rank (a barrier: nothing is left in flight), then tells Hydra's proxy that this rank
# is done, as MPI_Finalize would ("cmd=finalize" on the PMI socket; without it the
# proxy takes the rank's exit for a crash and kills the others). The process then exits
# with its own status, and the kernel closes its sockets. DT_HOSTS_FINALIZE=mpi keeps
# MPI's own MPI_Finalize, to see the hang.
finalize_shim() {
    cat >"$work/finalize.c" <<'EOF2'
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int MPI_Finalize(void)
{
    int rc = PMPI_Barrier(MPI_COMM_WORLD);
    const char *pmi = getenv("PMI_FD");
    char c = 0;
    if (pmi && write(atoi(pmi), "cmd=finalize\n", 13) == 13)
        while (c != '\n' && read(atoi(pmi), &c, 1) == 1)
            ;                               /* "cmd=finalize_ack" */
    return rc;
}
EOF2
    ${MPICC:-mpicc} -shared -fPIC -o "$work/finalize.so" "$work/finalize.c" ||
        bad "could not compile the MPI_Finalize stand-in with ${MPICC:-mpicc}"
    echo "$work/finalize.so${LD_PRELOAD:+:$LD_PRELOAD}"
}

# run NP PROGRAM ARGS...: mpiexec in host 0, one proxy per host through netns-launch.sh.
run() {
    local np=$1 list rc pre=()
    shift
    list=$(hosts)
    [ -n "$list" ] || bad "no hosts are up: scripts/hosts.sh up N first"
    [ -n "$np" ] || np=$(echo "$list" | wc -l)
    work=$(mktemp -d "${TMPDIR:-/tmp}/dtlab-hosts.XXXXXX") || exit 1
    echo "$list" >"$work/hostfile"
    if [ "${DT_HOSTS_FINALIZE:-shim}" != mpi ]; then
        pre=(-genv LD_PRELOAD "$(finalize_shim)") || exit $?
        # A sanitized build (make test SANITIZE=...): MPI's state is never freed now
        # that MPI_Finalize does not run, so LeakSanitizer would report MPI's memory.
        [ -z "${ASAN_OPTIONS:-}" ] || export ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0"
    fi
    export UCX_TLS=${UCX_TLS:-tcp,self} UCX_NET_DEVICES=${UCX_NET_DEVICES:-eth0}
    export FI_PROVIDER=${FI_PROVIDER:-tcp} FI_TCP_IFACE=${FI_TCP_IFACE:-eth0}
    ip netns exec "$prefix-h0" "$MPIEXEC" -iface eth0 -launcher ssh \
        -launcher-exec "$here/netns-launch.sh" -f "$work/hostfile" ${pre[@]+"${pre[@]}"} \
        -n "$np" "$@"
    rc=$?
    rm -rf "$work"
    return "$rc"
}

# Options of `up` and the one-shot form: sets delay, rate, np; $rest is what follows --.
parse() {
    delay="" rate="" np="" rest=()
    while [ $# -gt 0 ]; do
        case $1 in
            --delay) [ $# -ge 2 ] || bad "--delay needs a value"
                     whole --delay "$2" 0 10000; delay=$2; shift 2 ;;
            --rate) [ $# -ge 2 ] || bad "--rate needs a value"
                    whole --rate "$2" 1 100000; rate=$2; shift 2 ;;
            -n) [ $# -ge 2 ] || bad "-n needs a value"
                whole -n "$2" 1 64; np=$2; shift 2 ;;
            --) shift; rest=("$@"); return ;;
            *) bad "unknown argument '$1'" ;;
        esac
    done
}

[ $# -ge 1 ] || bad "what to do?"
case $1 in
    -h | --help) echo "$usage"; exit 0 ;;
    up)
        [ $# -ge 2 ] || bad "up needs the number of hosts"
        whole N "$2" 2 16
        n=$2
        shift 2
        parse "$@"
        [ -z "$np" ] || bad "-n belongs to run, not up"
        [ ${#rest[@]} = 0 ] || bad "up takes no program"
        need_netns
        up "$n" "$delay" "$rate" ;;
    run)
        shift
        np=""
        while [ $# -gt 0 ]; do
            case $1 in
                -n) [ $# -ge 2 ] || bad "-n needs a value"
                    whole -n "$2" 1 64; np=$2; shift 2 ;;
                --) shift; break ;;
                -*) bad "unknown option '$1' (a program's own options go after --)" ;;
                *) break ;;
            esac
        done
        [ $# -ge 1 ] || bad "run needs a program"
        need_netns
        run "$np" "$@" ;;
    down) [ $# = 1 ] || bad "down takes no arguments"; need_netns; down ;;
    status) [ $# = 1 ] || bad "status takes no arguments"; status ;;
    check)
        [ $# = 1 ] || bad "check takes no arguments"
        need_netns
        say "network namespaces: yes"
        if have_netem; then
            say "netem (--delay): yes"
        else
            say "netem (--delay): no: $no_netem"
        fi ;;
    [0-9]*)
        whole N "$1" 2 16
        n=$1
        shift
        parse "$@"
        [ ${#rest[@]} -gt 0 ] || bad "no program: put it after --"
        need_netns
        not_up
        trap 'down; [ -z "$work" ] || rm -rf "$work"' EXIT
        up "$n" "$delay" "$rate" || exit $?
        trap 'exit 130' INT TERM HUP     # the EXIT trap takes the hosts down
        run "$np" "${rest[@]}" ;;
    *) bad "unknown command '$1'" ;;
esac
