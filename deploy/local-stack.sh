#!/usr/bin/env bash
# The whole many-machines stack on one machine, for a trial (docs/many-machines.md): PostgreSQL (Debian's
# `postgresql` package), 2 app replicas, 2 grading workers and nginx (Debian's `nginx`, with deploy/nginx.conf)
# on a free port, every process started by this script in DIR and stopped by the ids it recorded there.
#
#   deploy/local-stack.sh start DIR     # prints the address to open; DIR/stack.env says what runs where
#   deploy/local-stack.sh stop DIR      # stops what `start` started (by the process ids in DIR/pids), nothing else
#
# The judge: the host's, from this shell's OPENAI_API_KEY / OPENAI_BASE_URL / MMVET_JUDGE_MODEL (none: the offline
# baseline only). Python: $PYTHON (python3). Run from anywhere; the repository is this script's parent folder.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
NGINX="${NGINX:-/usr/sbin/nginx}"

usage() { echo "usage: $0 start|stop DIR" >&2; exit 2; }
[ $# -eq 2 ] || usage
ACTION="$1"
mkdir -p "$2"
DIR="$(cd "$2" && pwd)"
PIDS="$DIR/pids"

free_port() { "$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

pg_bin() {
  local d
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    [ -x "$d/pg_ctl" ] && { echo "$d"; return; }
  done
  command -v pg_ctl >/dev/null && { dirname "$(command -v pg_ctl)"; return; }
  echo "PostgreSQL is not installed: apt-get install -y postgresql" >&2; exit 1
}

# PostgreSQL refuses to run as root: then it runs as Debian's `postgres` user, in a folder that user owns
as_pg() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

wait_http() {   # URL PID: until URL answers; fails when the process PID ended
  local url="$1" pid="$2" i
  for i in $(seq 1 600); do
    curl -fsS -o /dev/null --max-time 2 "$url" && return 0
    kill -0 "$pid" 2>/dev/null || { echo "the process $pid behind $url ended: see $DIR/*.log" >&2; return 1; }
    sleep 0.5
  done
  echo "$url did not answer" >&2; return 1
}

spawn() {       # NAME COMMAND...: in the background, its output in DIR/NAME.log, its id in DIR/pids
  local name="$1"; shift
  "$@" >"$DIR/$name.log" 2>&1 &
  echo "$! $name" >>"$PIDS"
  LAST_PID=$!
}

start() {
  [ -s "$PIDS" ] && { echo "$DIR already holds a stack (stop it first: $0 stop $DIR)" >&2; exit 1; }
  : >"$PIDS"
  local bin; bin="$(pg_bin)"
  local pg_port replica1 replica2 web
  pg_port="$(free_port)"; replica1="$(free_port)"; replica2="$(free_port)"; web="$(free_port)"

  # 1. PostgreSQL: a cluster of its own in DIR/pg, on 127.0.0.1 only
  mkdir -p "$DIR/pg"
  if [ "$(id -u)" -eq 0 ]; then chown postgres: "$DIR/pg"; chmod o+x "$DIR"; fi
  chmod 700 "$DIR/pg"
  as_pg "$bin/initdb" -D "$DIR/pg/data" -U postgres --auth=trust -E UTF8 --locale=C >"$DIR/initdb.log" 2>&1
  as_pg "$bin/pg_ctl" -D "$DIR/pg/data" -l "$DIR/pg/server.log" -w -t 120 \
    -o "-p $pg_port -k $DIR/pg -c listen_addresses=127.0.0.1 -c max_connections=100" start >/dev/null
  echo "$(head -1 "$DIR/pg/data/postmaster.pid") postgresql" >>"$PIDS"
  as_pg "$bin/psql" -h 127.0.0.1 -p "$pg_port" -U postgres -q -c "CREATE DATABASE grader" >/dev/null
  local db="postgresql://postgres@127.0.0.1:$pg_port/grader"

  # 2. the environment every process shares (deploy/mmvet-grader.env.example explains each line)
  cat >"$DIR/stack.env" <<EOF
MMVET_DATABASE_URL=$db
MMVET_WORKERS=external
MMVET_TRUSTED_PROXY_HOPS=1
MMVET_PUBLIC_URL=http://127.0.0.1:$web/
MMVET_STACK_URL=http://127.0.0.1:$web/
MMVET_STACK_REPLICAS=$replica1,$replica2
EOF
  set -a; . "$DIR/stack.env"; set +a
  export GRADIO_ANALYTICS_ENABLED=False HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 GRADIO_SERVER_NAME=127.0.0.1

  # 3. two app replicas (the first to start creates the schema); the workers start once it is there
  local n port
  n=0
  for port in "$replica1" "$replica2"; do
    n=$((n + 1))
    mkdir -p "$DIR/replica$n"
    (cd "$ROOT" && GRADIO_SERVER_PORT="$port" MMVET_DATA_DIR="$DIR/replica$n" GRADIO_TEMP_DIR="$DIR/replica$n/gradio" \
      spawn "replica$n" "$PYTHON" app.py)
  done
  while read -r pid name; do
    case "$name" in replica1) wait_http "http://127.0.0.1:$replica1/gradio_api/info" "$pid" ;;
                    replica2) wait_http "http://127.0.0.1:$replica2/gradio_api/info" "$pid" ;; esac
  done <"$PIDS"

  # 4. two grading workers
  for n in 1 2; do
    mkdir -p "$DIR/worker$n"
    (cd "$ROOT" && MMVET_DATA_DIR="$DIR/worker$n" spawn "worker$n" "$PYTHON" -m mmvet_core worker)
  done

  # 5. nginx: the shipped site (deploy/nginx.conf) with this stack's ports, in a main configuration of its own
  mkdir -p "$DIR/nginx/temp"
  sed -e "s/listen 80;/listen 127.0.0.1:$web;/" -e "s/server 127.0.0.1:7861 /server 127.0.0.1:$replica1 /" \
      -e "s/server 127.0.0.1:7862 /server 127.0.0.1:$replica2 /" "$ROOT/deploy/nginx.conf" >"$DIR/nginx/site.conf"
  cat >"$DIR/nginx/nginx.conf" <<EOF
$( [ "$(id -u)" -eq 0 ] && echo "user root;" )
worker_processes 1;
daemon off;
pid nginx.pid;
error_log stderr warn;
events { worker_connections 512; }
http {
    access_log off;
    client_body_temp_path temp/body; proxy_temp_path temp/proxy; fastcgi_temp_path temp/fastcgi;
    uwsgi_temp_path temp/uwsgi; scgi_temp_path temp/scgi;
    include site.conf;
}
EOF
  spawn nginx "$NGINX" -p "$DIR/nginx/" -c nginx.conf
  wait_http "http://127.0.0.1:$web/gradio_api/info" "$LAST_PID"
  echo "stack up: open http://127.0.0.1:$web/  (stop it: $0 stop $DIR)"
}

stop() {
  [ -f "$PIDS" ] || { echo "no stack in $DIR"; return 0; }
  local pid name bin
  # workers first (they hand their slices back), then nginx and the replicas, the database last
  for wanted in worker nginx replica; do
    while read -r pid name; do
      case "$name" in "$wanted"*) kill -TERM "$pid" 2>/dev/null || true ;; esac
    done <"$PIDS"
    while read -r pid name; do
      case "$name" in "$wanted"*)
        for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
        kill -KILL "$pid" 2>/dev/null || true ;;
      esac
    done <"$PIDS"
  done
  if grep -q " postgresql$" "$PIDS"; then
    bin="$(pg_bin)"
    as_pg "$bin/pg_ctl" -D "$DIR/pg/data" -m fast -w stop >/dev/null 2>&1 || true
  fi
  rm -f "$PIDS"
  echo "stack in $DIR stopped"
}

case "$ACTION" in
  start) start ;;
  stop) stop ;;
  *) usage ;;
esac
