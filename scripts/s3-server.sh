#!/usr/bin/env bash
# A real S3 server on loopback for packer's object-storage tests and for trying s3:// by hand:
# versitygw (Apache-2.0, github.com/versity/versitygw) with its posix backend, which keeps each
# bucket as a folder and each object as a plain file.
#
#   bash scripts/s3-server.sh install       build versitygw into the cache folder (once; cached)
#   bash scripts/s3-server.sh start [DIR]   start it in the background, serving DIR (default: a
#                                           new temporary folder), and print the environment to
#                                           use (eval "$(bash scripts/s3-server.sh start)")
#   bash scripts/s3-server.sh bucket NAME   create a bucket in the running server (a folder of DIR)
#   bash scripts/s3-server.sh stop          stop the server started by start
#   bash scripts/s3-server.sh path          print the binary's path
#
# Each start is an instance of its own: its pid, log and folder are kept in a new state folder
# (under $TMPDIR, on the node it runs on), whose path start prints as PACKER_S3_SERVER with the
# rest of the environment. bucket and stop act on the instance $PACKER_S3_SERVER names, so two
# jobs of one user, sharing the cache folder, each start, use and stop their own server.
#
# The Go tests do not need start: they run the binary themselves (storage/s3/s3test), each on a
# port of its own, and stop it when they end. The account is a test account of this server
# only, printed on purpose.
set -euo pipefail
VERSITYGW_VERSION=v1.8.0  # keep in step with storage/s3/s3test.Version
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/packer"
DIR="$CACHE/versitygw-$VERSITYGW_VERSION"
BIN="$DIR/versitygw"
STATE="${PACKER_S3_SERVER:-}"
ACCESS=packer-test-access
SECRET=packer-test-secret-9f3c1a7e

install() {
  if [ -x "$BIN" ]; then
    return
  fi
  mkdir -p "$DIR"
  echo "s3-server: building versitygw $VERSITYGW_VERSION into $DIR (about 2 minutes, once)" >&2
  GOBIN="$DIR" GOFLAGS=-buildvcs=false go install "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION"
}

start() {
  install
  local root="${1:-}"
  if [ -z "$root" ]; then
    root=$(mktemp -d "${TMPDIR:-/tmp}/packer-s3.XXXXXX")
  fi
  if [ -n "$STATE" ] && [ -f "$STATE/pid" ] && kill -0 "$(cat "$STATE/pid")" 2>/dev/null; then
    echo "s3-server: the server of PACKER_S3_SERVER=$STATE is running (pid $(cat "$STATE/pid")); stop it first, or unset PACKER_S3_SERVER to start another" >&2
    exit 1
  fi
  mkdir -p "$root"
  STATE=$(mktemp -d "${TMPDIR:-/tmp}/packer-s3-server.XXXXXX")
  local port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  # Keep-alive is on, as any S3 store keeps its connections (versitygw closes each one after
  # one request unless told): VGW_KEEP_ALIVE=false in the environment turns it off.
  VGW_KEEP_ALIVE=${VGW_KEEP_ALIVE:-true} "$BIN" --access "$ACCESS" --secret "$SECRET" --region us-east-1 \
    --port "127.0.0.1:$port" posix "$root" >"$STATE/log" 2>&1 &
  echo $! >"$STATE/pid"
  echo "$root" >"$STATE/root"
  for _ in $(seq 100); do
    if curl -s -o /dev/null "http://127.0.0.1:$port/"; then
      break
    fi
    if ! kill -0 "$(cat "$STATE/pid")" 2>/dev/null; then
      echo "s3-server: versitygw exited:" >&2
      cat "$STATE/log" >&2
      rm -rf "$STATE"
      exit 1
    fi
    sleep 0.1
  done
  echo "# versitygw $VERSITYGW_VERSION on 127.0.0.1:$port serving $root (pid $(cat "$STATE/pid")); buckets are folders of it"
  echo "export AWS_ENDPOINT_URL=http://127.0.0.1:$port"
  echo "export AWS_ACCESS_KEY_ID=$ACCESS"
  echo "export AWS_SECRET_ACCESS_KEY=$SECRET"
  echo "export AWS_REGION=us-east-1"
  echo "export PACKER_S3_SERVER=$STATE"
}

# started fails, saying why, unless PACKER_S3_SERVER names the state folder of a start.
started() {
  if [ -z "$STATE" ]; then
    echo "s3-server: PACKER_S3_SERVER is not set: run eval \"\$(bash $0 start)\" first (it sets it)" >&2
    exit 1
  fi
  [ -f "$STATE/root" ] || { echo "s3-server: $STATE (PACKER_S3_SERVER) is not the state folder of a started server" >&2; exit 1; }
}

bucket() {
  started
  mkdir -p "$(cat "$STATE/root")/$1"
}

# stop stops the instance PACKER_S3_SERVER names and removes its state folder; with none set,
# or one already stopped, it does nothing.
stop() {
  if [ -z "$STATE" ] || [ ! -f "$STATE/root" ]; then
    return
  fi
  if [ -f "$STATE/pid" ]; then
    kill "$(cat "$STATE/pid")" 2>/dev/null || true
  fi
  rm -rf "$STATE"
}

case "${1:-}" in
  install) install ;;
  start) shift; start "$@" ;;
  bucket) bucket "${2:?bucket name}" ;;
  stop) stop ;;
  path) echo "$BIN" ;;
  *) echo "usage: $0 install|start [DIR]|bucket NAME|stop|path" >&2; exit 2 ;;
esac
