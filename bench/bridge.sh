#!/usr/bin/env bash
# Bridge throughput next to the physical limit: requests/second through `edgelimit bridge` (HTTP+JSON, measured by
# wrk) for PING and for a small EVALSHA, next to redis-benchmark sending the same commands straight to the same
# Redis in the same run. Prints the ratio. Everything shares this machine's cores, so read ratios, not absolutes.
# Usage: bench/bridge.sh [seconds-per-run, default 10] [connections, default 32]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
seconds=${1:-10}
connections=${2:-32}
command -v wrk >/dev/null || { step "apt: installing wrk"; as_root apt-get install -y -qq wrk >/dev/null; }
cargo build -p edgelimit-cli --release --quiet

redis_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
bridge_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
workdir=$(mktemp -d)
redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no --dir "$workdir" --daemonize yes \
    --pidfile "$workdir/redis.pid" >/dev/null
target/release/edgelimit bridge --listen "127.0.0.1:$bridge_port" --redis "redis://127.0.0.1:$redis_port" \
    --token bench >/dev/null &
bridge_pid=$!
trap 'kill $bridge_pid 2>/dev/null; kill "$(cat "$workdir/redis.pid")" 2>/dev/null; rm -rf "$workdir"' EXIT
for _ in $(seq 100); do curl -sf -H 'Authorization: Bearer bench' -d '["PING"]' "http://127.0.0.1:$bridge_port/" >/dev/null && break; sleep 0.05; done

script="return redis.call('INCR', KEYS[1])"
sha=$(redis-cli -p "$redis_port" SCRIPT LOAD "$script")

# wrk: POST a fixed JSON body; prints requests/second.
bridge_rps() {
    cat >"$workdir/post.lua" <<LUA
wrk.method = "POST"
wrk.body = '$1'
wrk.headers["Authorization"] = "Bearer bench"
wrk.headers["Content-Type"] = "application/json"
LUA
    wrk -t2 -c"$connections" -d"${seconds}s" -s "$workdir/post.lua" "http://127.0.0.1:$bridge_port/" >"$workdir/wrk.out"
    # Error replies are fast replies: a run with any of them measures nothing.
    if grep -q "Non-2xx" "$workdir/wrk.out"; then
        echo "bridge answered errors for $1:" >&2; cat "$workdir/wrk.out" >&2; exit 1
    fi
    awk '/Requests\/sec/ {print int($2)}' "$workdir/wrk.out"
}
# redis-benchmark: the same command over RESP; prints requests/second.
redis_rps() {
    redis-benchmark -p "$redis_port" -c "$connections" -n $((seconds * 40000)) -q "$@" |
        tr '\r' '\n' | awk '/requests per second/ {for (i = 1; i <= NF; i++) if ($i == "requests") print int($(i - 1))}' | tail -1
}

printf '| command | bridge req/s | redis-benchmark req/s | bridge / redis |\n|---|---|---|---|\n'
for name in PING EVALSHA; do
    if [[ $name == PING ]]; then
        b=$(bridge_rps '["PING"]'); r=$(redis_rps PING)
    else
        b=$(bridge_rps "[\"EVALSHA\",\"$sha\",\"1\",\"{bench}:n\"]"); r=$(redis_rps EVALSHA "$sha" 1 "{bench}:n")
    fi
    printf '| %s | %s | %s | %s |\n' "$name" "$b" "$r" "$(python3 -c "print(f'{$b/$r:.2f}')")"
done
printf '\nEVALSHA calls seen by Redis: %s\n' "$(redis-cli -p "$redis_port" GET '{bench}:n')"
printf '%s connections, %ss per bridge run, %s cores (%s)\n' "$connections" "$seconds" "$(nproc)" \
    "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
