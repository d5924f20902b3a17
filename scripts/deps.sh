#!/usr/bin/env bash
# Installs the Debian packages dtlab needs: as root directly, else through sudo,
# else prints the exact command for the user to run.
set -eu
pkgs=("$@")
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then echo "dtlab: all packages present"; exit 0; fi
cmd="apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y ${missing[*]}"
if [ "$(id -u)" -eq 0 ]; then
  echo "dtlab: installing ${missing[*]}"
  sh -c "$cmd"
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
  echo "dtlab: installing ${missing[*]} through sudo"
  sudo sh -c "$cmd"
else
  echo "dtlab: please install the missing packages as root:" >&2
  echo "  sudo sh -c '$cmd'" >&2
  exit 1
fi
