#!/usr/bin/env bash
# Benchmark: fpctl serve vs nginx serving the same flow JSON as a static file, same run.
# wrk, 10 s each, on loopback: requests/second and p99 latency for one placement
# with a realistic flow of about 5 KB. Goal: >= 0.5x nginx's requests/second, p99 < 10 ms.
# Usage: Benchmarks/serve_bench.sh [seconds] [connections]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
conns=${2:-32}
Scripts/install-deps.sh wrk nginx
swift build -c release --product fpctl >/dev/null
fpctl=$(swift build -c release --show-bin-path)/fpctl
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null; rm -rf "$work"' EXIT

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

"$fpctl" serve "$work/src" --port 0 --ttl 300 -q > "$work/url" &
for _ in $(seq 100); do [ -s "$work/url" ] && break; sleep 0.1; done
url=$(head -n 1 "$work/url")
body='{"user_id":"u_123","attributes":{"plan":"free","country":"DE"}}'
curl -sS -X POST "$url/apps/bench/placements/paywall/resolve" -d "$body" > "$work/flow.json"
size=$(wc -c < "$work/flow.json")

mkdir -p "$work/www"
cp "$work/flow.json" "$work/www/flow.json"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat > "$work/nginx.conf" <<CONF
worker_processes auto;
pid $work/nginx.pid;
error_log $work/error.log;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $work/tmp; proxy_temp_path $work/tmp; fastcgi_temp_path $work/tmp;
  uwsgi_temp_path $work/tmp; scgi_temp_path $work/tmp;
  server { listen 127.0.0.1:$port; root $work/www; default_type application/json; }
}
CONF
mkdir -p "$work/tmp"
nginx -c "$work/nginx.conf" -p "$work"
sleep 0.5

cat > "$work/post.lua" <<LUA
wrk.method = "POST"
wrk.body = '$body'
wrk.headers["Content-Type"] = "application/json"
LUA

run_wrk() { wrk -t2 -c"$conns" -d"${secs}s" --latency "$@"; }
serve_out=$(run_wrk -s "$work/post.lua" "$url/apps/bench/placements/paywall/resolve")
nginx_out=$(run_wrk "http://127.0.0.1:$port/flow.json")
rps() { echo "$1" | awk '/Requests\/sec/ {print $2}'; }
p99() { echo "$1" | awk '$1 == "99%" {print $2}'; }
non2xx() { echo "$1" | awk '/Non-2xx/ {print $4}'; }
s_rps=$(rps "$serve_out"); n_rps=$(rps "$nginx_out")
echo "flow response: $size bytes; wrk -t2 -c$conns -d${secs}s on 2 cores shared with the server"
echo "fpctl serve  POST resolve   ${s_rps} req/s  p99 $(p99 "$serve_out")  non-2xx: $(non2xx "$serve_out" || true)"
echo "nginx        GET flow.json  ${n_rps} req/s  p99 $(p99 "$nginx_out")"
python3 -c "print('ratio fpctl/nginx: %.2fx  (goal >= 0.5x, p99 < 10ms)' % ($s_rps / $n_rps))"
