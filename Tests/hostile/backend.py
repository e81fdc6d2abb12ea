#!/usr/bin/env python3
"""A resolve backend that misbehaves on purpose, for the tests of hostile
answers (Tests/fpctlTests/HostileBackendTests.swift). It listens on
127.0.0.1 (port 0: any free one), prints its URL on the first line, and
answers the resolve API (single and batch) with the demo paywall flow, bent
by the first path segments of the API URL the test gives fpctl:

  /m/retry-after:VALUE   503 with `Retry-After: VALUE` (URL-decoded) every time
  /m/ttl:JSON            200, the flow with `cache_ttl_seconds` set to JSON
  /m/error-text          404 whose error code and message carry control characters
  /m/image:KIND          200, every image of the flow served by /img/KIND/

and its images:

  /img/png/...           a real PNG
  /img/trickle/...       a PNG's head, then one byte a second
  /img/huge/...          a chunked body of --huge-mb MiB, as fast as it is read
  /img/html/...          an HTML page, as a captive portal or a CDN error sends

Every request is counted by path kind; GET /stats answers the counts."""
import argparse
import json
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FLOW = json.loads((ROOT / "bundles/demo/flows/paywall.json").read_text())
FLOW.pop("content_hash", None)  # the images are rewritten: no hash to keep
PNG = (ROOT / "bundles/demo/assets/logo.png").read_bytes()
EVIL = "evil\x1b[2J\ncode\rx\x07"
counts = {}
lock = threading.Lock()


def rewrite(value, base):
    if isinstance(value, dict):
        return {k: (base + "/" + str(abs(hash(v)) % 100000) + ".png" if k == "src" and isinstance(v, str) else rewrite(v, base))
                for k, v in value.items()}
    if isinstance(value, list):
        return [rewrite(v, base) for v in value]
    return value


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def count(self, kind):
        with lock:
            counts[kind] = counts.get(kind, 0) + 1

    def reply(self, status, body, headers=()):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        parts = self.path.split("/")
        if self.path == "/stats":
            with lock:
                return self.reply(200, counts)
        if len(parts) < 3 or parts[1] != "img":
            return self.reply(404, {"error": {"code": "not_found"}})
        kind = parts[2]
        self.count("img:" + kind)
        if kind == "png":
            return self.reply(200, PNG, [("Content-Type", "image/png")])
        if kind == "html":
            page = b"<!doctype html><html><body>Sign in to the Wi-Fi</body></html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)
            return
        if kind == "trickle":
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.send_header("Content-Length", str(len(PNG)))
            self.end_headers()
            try:
                for byte in PNG[:120]:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(1)
            except OSError:
                pass
            self.close_connection = True
            return
        if kind == "huge":
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            chunk = PNG[:8] + bytes(65536 - 8)
            try:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                chunk = bytes(65536)
                for _ in range(self.server.huge_mb * 16):
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.write(b"0\r\n\r\n")
            except OSError:
                pass
            self.close_connection = True
            return
        self.reply(404, {"error": {"code": "not_found"}})

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        request = json.loads(self.rfile.read(length) or b"{}")
        parts = self.path.split("/")
        mode = urllib.parse.unquote(parts[2]) if len(parts) > 2 and parts[1] == "m" else ""
        batch = self.path.endswith("/resolve-batch")
        keys = request.get("placement_keys") if batch else [parts[-2]]
        self.count("resolve-batch" if batch else "resolve")
        name, _, arg = mode.partition(":")
        if name == "retry-after":
            return self.reply(503, {"error": {"code": "unavailable", "message": "later"}}, [("Retry-After", arg)])
        if name == "error-text":
            error = {"code": EVIL, "message": "line one\nline two\x1b[31m red"}
            if batch:
                return self.reply(200, {"results": [{"placement_key": k, "error": error} for k in keys]})
            return self.reply(404, {"error": error})
        result = {"flow": FLOW, "cache_ttl_seconds": 300}
        if name == "ttl":
            result["cache_ttl_seconds"] = json.loads(arg)
        if name == "image":
            host = self.headers.get("Host")
            result["flow"] = rewrite(FLOW, f"http://{host}/img/{arg}")
            # Fonts from here too (a 404: a font is best effort), never from the flow's real CDN.
            result["flow"]["fonts"] = [dict(font, url=f"http://{host}/font/{i}.ttf") for i, font in enumerate(FLOW.get("fonts", []))]
        if batch:
            return self.reply(200, {"results": [dict(result, placement_key=k) for k in keys]})
        return self.reply(200, dict(result, placement_key=keys[0]))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--huge-mb", type=int, default=500)
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    server.huge_mb = args.huge_mb
    print(f"http://127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
