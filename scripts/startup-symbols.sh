#!/usr/bin/env bash
# Records which functions a short `redlock run` executes, for build.rs to link them together.
# Run it after changes to the run path, to dependencies or to the toolchain (symbol names carry
# hashes that change with each), then commit link/startup-symbols.txt; `cargo test` fails when
# fewer than 90% of the listed names are left in the release binary, or when a function of
# redlock's own that the exact trace below sees is not listed (tests/cli/startup_symbols.rs).
# Needs perf (Debian: linux-perf), valgrind and redis-server.
#
# Three sources, in this order; nothing of an earlier list is kept:
# * an exact trace (callgrind) of a run up to the start of its keeper, a process that shares
#   redlock's memory (clone(CLONE_VM)), which valgrind cannot follow; and of `acquire`,
#   `extend` and `release`, which run the same acquire, renewal, release and exit paths
#   without a keeper;
# * samples (perf record at a high rate over a few hundred runs of each kind) for what a run
#   does after its keeper starts; sampling misses the briefest functions;
# * the run path's own modules (the keeper, the tree, the raw system calls, the spawn, the
#   heartbeat), whole, from the symbol table.
# Names the binary no longer has are dropped (a dependency's features or version change its
# symbols' names). A stale or partial list only makes the layout less tight, and so does
# sampling alone, which misses the briefest functions (benches/HISTORY.md has the figures).
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
trace() {
    valgrind --tool=callgrind --demangle=no --callgrind-out-file="$dir/cg.$1" "${@:2}" 2>/dev/null
}
trace run --dump-before=clone "$bin" --url "$url" run --key t --ttl 1s -- true >/dev/null || true
trace unix --dump-before=clone "$bin" --url "redis+unix://$dir/redis.sock" run --key u --ttl 1s \
    -- true >/dev/null || true
token=$(trace acquire "$bin" --url "$url" acquire --key a --ttl 10s | head -1)
# `extend` renews as the heartbeat does (Nodes::extend, lock::extend, a connection of its own).
trace extend "$bin" --url "$url" extend --key a --token "$token" --ttl 10s >/dev/null
trace release "$bin" --url "$url" release a --token "$token" >/dev/null
cat "$dir"/cg.* | sed -n 's/^c\?fn=([0-9]*) //p' | awk '!seen[$0]++' > "$dir/traced"
# Sampling misses a brief function now and then: each common kind of run is sampled twice
# over, 600 runs in all.
runs() { for _ in $(seq 600); do "$bin" "$@" >/dev/null 2>&1 || true; done; }
sample() { perf record -q -F 30000 -o "$dir/perf.$1" -- bash -c "$(declare -f runs); bin=$bin; runs ${*:2}" 2>/dev/null; }
sample tcp --url "$url" run --key a --ttl 1s -- true
sample unix --url "redis+unix://$dir/redis.sock" run --key a --ttl 1s -- true
sample descendants --url "$url" run --key a --ttl 1s --contain descendants -- true
runs() { for _ in $(seq 50); do "$bin" "$@" >/dev/null 2>&1 || true; done; }
sample renewals --url "$url" run --key r --ttl 1s -- sleep 0.4
runs() { for _ in $(seq 600); do "$bin" "$@" >/dev/null 2>&1 || true; done; }
"$bin" --url "$url" run --key c --ttl 60s -- sleep 30 & holder=$!
for _ in $(seq 50); do [ "$(redis-cli -p "$port" exists c)" = 1 ] && break; sleep 0.02; done
sample busy --url "$url" run --key c --ttl 1s -- true
kill "$holder"; wait "$holder" || true
{
    for data in "$dir"/perf.*; do
        perf report -i "$data" --comm redlock --no-demangle --sort sym --no-children -g none \
            2>/dev/null | awk '$2 == "[.]" { print $3 }'
    done
    nm "$bin" | awk '{ print $3 }' \
        | grep -E '7redlock(9supervise(6keeper|4tree|3sys|5child|7signals)|4lock9heartbeat)' || true
} | grep -v '^0x' | sort -u > "$dir/found"
list=link/startup-symbols.txt
nm "$bin" | awk '{ print $3 }' | sort -u > "$dir/symbols"
# A fresh list, from this trace alone: names an earlier list had are not carried over.
cat "$dir/traced" "$dir/found" | awk '!seen[$0]++' | grep -xF -f "$dir/symbols" \
    > "$dir/list" || true
mv "$dir/list" "$list"
wc -l "$list"
