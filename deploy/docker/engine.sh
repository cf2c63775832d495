#!/usr/bin/env bash
# The Docker engine the testbed and the container tests run on.
#   deploy/docker/engine.sh ensure   # installs Debian's docker.io, docker-compose and debootstrap when
#                                    # missing, starts dockerd when none answers (or reuses the one that
#                                    # does); fails loudly when the engine cannot start
#   deploy/docker/engine.sh stop     # stops the dockerd that `ensure` started, and nothing else
#   deploy/docker/engine.sh status   # says whether an engine answers and who started it
# Packages come from the machine's own apt sources. The pid of a dockerd started here is kept in
# $PAGEWIRE_DOCKERD_STATE (default /tmp/pagewire-dockerd), its log beside it.
set -euo pipefail

state=${PAGEWIRE_DOCKERD_STATE:-/tmp/pagewire-dockerd}
pidfile="$state.pid"
logfile="$state.log"

say() { echo "docker-engine: $*" >&2; }

as_root() {
  if [ "$(id -u)" = 0 ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo -n "$@"
  else
    say "this needs root to run: $*"
    exit 1
  fi
}

install_missing() {
  local packages=()
  command -v dockerd >/dev/null 2>&1 || packages+=(docker.io)
  command -v docker-compose >/dev/null 2>&1 || docker compose version >/dev/null 2>&1 || packages+=(docker-compose)
  command -v debootstrap >/dev/null 2>&1 || packages+=(debootstrap)
  [ ${#packages[@]} -eq 0 ] && return 0
  say "installing Debian's ${packages[*]}"
  export DEBIAN_FRONTEND=noninteractive
  local attempt
  for attempt in 1 2 3; do
    if as_root apt-get install -y -qq --no-install-recommends "${packages[@]}" >&2; then
      return 0
    fi
    as_root apt-get update -qq >&2 || true
    sleep $((attempt * 5))
  done
  say "apt-get could not install ${packages[*]} (see above)"
  exit 1
}

engine_answers() { docker info >/dev/null 2>&1; }

started_here() {
  [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null
}

ensure() {
  install_missing
  if engine_answers; then
    if started_here; then say "reusing the dockerd started here (pid $(cat "$pidfile"))"; else say "reusing the running Docker engine"; fi
    return 0
  fi
  say "starting dockerd (log: $logfile)"
  as_root true
  # containerd comes with docker.io; dockerd starts its own when no system one runs. Published ports
  # are forwarded by the kernel (iptables NAT), not by a docker-proxy process per port that copies
  # every byte in user space: that proxy costs the testbed's host applications bandwidth and latency.
  nohup dockerd --userland-proxy=false >"$logfile" 2>&1 &
  echo $! >"$pidfile"
  local _
  for _ in $(seq 1 60); do
    engine_answers && { say "dockerd is up (pid $(cat "$pidfile"))"; return 0; }
    kill -0 "$(cat "$pidfile")" 2>/dev/null || break
    sleep 1
  done
  say "the Docker engine did not start; the end of $logfile:"
  tail -n 20 "$logfile" >&2 || true
  rm -f "$pidfile"
  exit 1
}

stop() {
  if ! started_here; then
    say "no dockerd started by this script is running; nothing to stop"
    rm -f "$pidfile"
    return 0
  fi
  local pid
  pid=$(cat "$pidfile")
  say "stopping the dockerd started here (pid $pid)"
  kill -TERM "$pid"
  local _
  for _ in $(seq 1 30); do
    kill -0 "$pid" 2>/dev/null || { rm -f "$pidfile"; return 0; }
    sleep 1
  done
  say "dockerd (pid $pid) did not stop within 30 s"
  exit 1
}

status() {
  if engine_answers; then
    if started_here; then echo "running (started by $0, pid $(cat "$pidfile"))"; else echo "running (not started by this script)"; fi
  else
    echo "not running"
    return 1
  fi
}

case "${1:-ensure}" in
  ensure) ensure ;;
  stop) stop ;;
  status) status ;;
  *) say "usage: $0 ensure|stop|status"; exit 2 ;;
esac
