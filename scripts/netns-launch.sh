#!/bin/sh
# mpiexec's launcher for hosts made of network namespaces (scripts/hosts.sh).
#
# Hydra starts one proxy per host, and through a real network it would run
#     ssh [options] HOST 'hydra_pmi_proxy --control-port ADDR ...'
# scripts/hosts.sh passes `-launcher ssh -launcher-exec` this script, which Hydra then
# calls with the same arguments as ssh. Instead of logging in to HOST, it enters the
# network namespace named HOST and runs the command there, as ssh would, through a
# shell; `unshare --uts` gives the host its own host name, so that
# MPI_Get_processor_name and lesson 01 tell the hosts apart.
set -eu

while [ $# -gt 0 ]; do          # ssh's options (Hydra passes -x): none takes a value here
    case $1 in
        -*) shift ;;
        *) break ;;
    esac
done
if [ $# -lt 2 ]; then
    echo "netns-launch.sh: usage: netns-launch.sh [-x] HOST COMMAND..." >&2
    exit 2
fi
host=$1
shift
case $host in
    *[!a-z0-9-]* | "")
        echo "netns-launch.sh: '$host' is not a host of scripts/hosts.sh" >&2
        exit 2 ;;
esac
if [ ! -e "/run/netns/$host" ]; then
    echo "netns-launch.sh: no network namespace '$host' (is scripts/hosts.sh up?)" >&2
    exit 2
fi
if command -v unshare >/dev/null 2>&1; then
    exec ip netns exec "$host" unshare --uts sh -c "hostname $host && exec $*"
fi
exec ip netns exec "$host" sh -c "exec $*"
