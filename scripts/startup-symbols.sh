#!/usr/bin/env bash
# Records which functions a short `redlock run` executes, for build.rs to link them together.
# Run it after changes to the run path or to dependencies, then commit link/startup-symbols.txt.
# Needs valgrind and redis-server.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release
bin=target/x86_64-unknown-linux-gnu/release/redlock
dir=$(mktemp -d)
trap 'kill "$(cat "$dir/redis.pid" 2>/dev/null)" 2>/dev/null || true; rm -rf "$dir"' EXIT
port=$((20000 + RANDOM % 20000))
redis-server --port "$port" --unixsocket "$dir/redis.sock" --save "" --appendonly no \
    --dir "$dir" --daemonize yes --pidfile "$dir/redis.pid" >/dev/null
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
url="redis://127.0.0.1:$port"
trace() { valgrind -q --tool=callgrind --demangle=no --callgrind-out-file="$dir/cg.%p" "$bin" "$@" || true; }
trace --url "$url" run --key a --ttl 1s -- true
trace --url "redis+unix://$dir/redis.sock" run --key a --ttl 1s -- true
trace --url "$url" run --key b --ttl 1s -- sleep 1.2           # renewals
"$bin" --url "$url" run --key c --ttl 3s -- sleep 1 & holder=$!
for _ in $(seq 50); do [ "$(redis-cli -p "$port" exists c)" = 1 ] && break; sleep 0.02; done
trace --url "$url" run --key c --ttl 1s -- true                 # busy
trace --url "$url" run --key c --ttl 1s --wait 3s -- true       # waiting, notified
wait "$holder"
grep -hoE "^c?fn=\([0-9]+\) .+" "$dir"/cg.* \
    | sed -E "s/^c?fn=\([0-9]+\) //; s/'[0-9]+$//" \
    | grep -v '^(below main)\|^0x' | sort -u > link/startup-symbols.txt
wc -l link/startup-symbols.txt
