#!/usr/bin/env bash
# Benchmark: fpctl serve vs nginx serving the same flow JSON as a static file, same run.
# wrk -t1 on loopback, POST resolve with an API key, one placement with a ~5 KB flow;
# median of RUNS runs of SECONDS each, every pair run back to back:
#   everyday  fpctl serve --rewrite-asset-urls, request log to a file
#             vs nginx with access_log to a file           (goal >= 0.7x, p99 < 10 ms)
#   quiet     fpctl serve -q vs nginx with access_log off  (goal >= 0.8x)
# Each comparison also prints what each run cost the servers in CPU time per
# request (user+system microseconds, from /proc), steadier than requests/s when
# wrk and the server share two cores with whatever else the machine runs.
# Usage: Benchmarks/serve_bench.sh [seconds] [connections] [runs]
# It measures the binary Scripts/install.sh installs (release, Swift runtime
# linked in, in .build-static); FPCTL=PATH measures another, e.g. the everyday
# `swift build -c release` one, whose every retain and release goes through
# the shared runtime's PLT.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-5}
conns=${2:-32}
runs=${3:-5}
Scripts/install-deps.sh wrk
if [ -n "${FPCTL:-}" ]; then
    fpctl=$FPCTL
else
    build=(swift build -c release --static-swift-stdlib --scratch-path .build-static --product fpctl)
    "${build[@]}" >/dev/null
    fpctl=$("${build[@]}" --show-bin-path)/fpctl
fi
echo "fpctl: $fpctl"
work=$(mktemp -d)
# The servers start inside $(...), a subshell whose jobs this shell cannot
# see: each writes its pid to a file, and the trap stops them by those.
trap 'for p in "$work"/*.pid; do [ -f "$p" ] && kill "$(cat "$p")" 2>/dev/null; done; rm -rf "$work"' EXIT

# A bundle source with one ~5 KB flow: five screens of text, buttons and an image.
mkdir -p "$work/src/flows" "$work/src/assets"
cp bundles/demo/assets/welcome.png "$work/src/assets/hero.png"
python3 - "$work/src" <<'PY'
import json, sys
root = sys.argv[1]
screens = []
for s in range(5):
    comps = [{"type": "image", "src": "https://cdn.example.com/bench/hero.png"}]
    comps += [{"type": "text", "text": f"Benefit {i} of screen {s}: everything you need, offline and synced."} for i in range(6)]
    comps.append({"type": "button", "text": "Continue", "action": {"type": "navigate", "screen": f"s{(s + 1) % 5}"}})
    comps.append({"type": "button", "text": "Subscribe", "action": {"type": "purchase", "product_id": "pro_monthly"}})
    screens.append({"id": f"s{s}", "components": comps})
flow = {"schema_version": 1, "id": "flow_bench", "version": "ver_1", "screens": screens}
open(f"{root}/flows/paywall.json", "w").write(json.dumps(flow))
json.dump({"app_id": "bench", "placements": {"paywall": "flows/paywall.json"},
           "assets": {"https://cdn.example.com/bench/hero.png": "assets/hero.png"}}, open(f"{root}/bundle.json", "w"))
PY

echo "k_bench_secret" > "$work/key"
start_serve() { # NAME ARGS...: starts fpctl serve, sets url
    local name=$1
    shift
    "$fpctl" serve "$work/src" --port 0 --ttl 300 --api-key-file "$work/key" "$@" > "$work/url-$name" 2> "$work/log-$name" &
    echo $! > "$work/fpctl-$name.pid"
    for _ in $(seq 100); do [ -s "$work/url-$name" ] && break; sleep 0.1; done
    head -n 1 "$work/url-$name"
}
quiet_url=$(start_serve quiet -q)
everyday_url=$(start_serve everyday --rewrite-asset-urls)
body='{"user_id":"u_123","attributes":{"plan":"free","country":"DE"}}'
curl -sS -X POST -H "Authorization: Bearer k_bench_secret" "$everyday_url/apps/bench/placements/paywall/resolve" \
    -d "$body" > "$work/flow.json"
size=$(wc -c < "$work/flow.json")

mkdir -p "$work/www" "$work/tmp"
cp "$work/flow.json" "$work/www/flow.json"
start_nginx() { # NAME ACCESS_LOG: starts nginx, prints its port
    local name=$1 log=$2 port
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    cat > "$work/nginx-$name.conf" <<CONF
worker_processes auto;
pid $work/nginx-$name.pid;
error_log $work/error-$name.log;
events { worker_connections 1024; }
http {
  access_log $log;
  client_body_temp_path $work/tmp; proxy_temp_path $work/tmp; fastcgi_temp_path $work/tmp;
  uwsgi_temp_path $work/tmp; scgi_temp_path $work/tmp;
  server { listen 127.0.0.1:$port; root $work/www; default_type application/json; }
}
CONF
    nginx -c "$work/nginx-$name.conf" -p "$work"
    echo "$port"
}
quiet_nginx=$(start_nginx quiet off)
logged_nginx=$(start_nginx logged "$work/access.log")
sleep 0.5

cat > "$work/post.lua" <<LUA
wrk.method = "POST"
wrk.body = '$body'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer k_bench_secret"
LUA

run_wrk() { wrk -t1 -c"$conns" -d"${secs}s" --latency "$@"; }
# CPU time (user and system clock ticks) of processes, summed: a server's cost per
# request is steadier than its requests/s on a machine shared with wrk.
ticks() { local u=0 s=0 p; for p in "$@"; do read -r -a f < "/proc/$p/stat"; u=$((u + f[13])); s=$((s + f[14])); done; echo "$u $s"; }
nginx_workers() { pgrep -P "$(cat "$work/nginx-$1.pid")" | tr '\n' ' '; }
per_request() { # BEFORE AFTER REQUESTS: "U+S" microseconds per request
    local hz
    hz=$(getconf CLK_TCK)
    python3 -c "b, a, n, hz = '$1'.split(), '$2'.split(), $3, $hz
u = (int(a[0]) - int(b[0])) * 1e6 / hz / n; s = (int(a[1]) - int(b[1])) * 1e6 / hz / n
print(f'{u:.1f}+{s:.1f}')"
}
requests() { echo "$1" | awk '/requests in/ {print $1}'; }
rps() { echo "$1" | awk '/Requests\/sec/ {print $2}'; }
p99() { echo "$1" | awk '$1 == "99%" {print $2}'; }
non2xx() { echo "$1" | awk '/Non-2xx/ {print $4}'; }
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# NAME FPCTL_NAME FPCTL_URL NGINX_NAME NGINX_PORT GOAL
compare() {
    local name=$1 server=$2 url=$3 nginx=$4 port=$5 goal=$6 s_all=() n_all=() s_p99=() s_out n_out b
    local s_cpu=() n_cpu=() pid workers
    pid=$(cat "$work/fpctl-$server.pid")
    workers=$(nginx_workers "$nginx")
    for _ in $(seq "$runs"); do
        b=$(ticks "$pid")
        s_out=$(run_wrk -s "$work/post.lua" "$url/apps/bench/placements/paywall/resolve")
        s_cpu+=("$(per_request "$b" "$(ticks "$pid")" "$(requests "$s_out")")")
        # shellcheck disable=SC2086 # one pid per word
        b=$(ticks $workers)
        n_out=$(run_wrk "http://127.0.0.1:$port/flow.json")
        # shellcheck disable=SC2086
        n_cpu+=("$(per_request "$b" "$(ticks $workers)" "$(requests "$n_out")")")
        if [ -n "$(non2xx "$s_out")" ]; then echo "fpctl answered non-2xx: $s_out" >&2; exit 1; fi
        s_all+=("$(rps "$s_out")"); n_all+=("$(rps "$n_out")"); s_p99+=("$(p99 "$s_out")")
    done
    local s n
    s=$(median "${s_all[@]}"); n=$(median "${n_all[@]}")
    printf '%-9s fpctl %9.0f req/s (p99 of runs: %s)  nginx %9.0f req/s  ratio %.2fx  (goal %s)\n' \
        "$name" "$s" "${s_p99[*]}" "$n" "$(python3 -c "print($s / $n)")" "$goal"
    printf '%-9s server CPU per request, user+system microseconds: fpctl %s; nginx %s\n' \
        "" "${s_cpu[*]}" "${n_cpu[*]}"
}
echo "flow response: $size bytes; wrk -t1 -c$conns -d${secs}s, median of $runs, on 2 cores shared with the server"
compare everyday everyday "$everyday_url" logged "$logged_nginx" \
    ">= 0.7x, p99 < 10ms; fpctl --rewrite-asset-urls + log file, nginx access_log file"
compare quiet quiet "$quiet_url" quiet "$quiet_nginx" ">= 0.8x; fpctl -q, nginx access_log off"
echo "request log lines: fpctl $(grep -c ' 200 ' "$work/log-everyday"), nginx $(wc -l < "$work/access.log")"
if grep -q k_bench_secret "$work/log-everyday" "$work/access.log"; then echo "the API key reached a log" >&2; exit 1; fi
