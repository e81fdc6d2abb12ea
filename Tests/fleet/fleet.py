#!/usr/bin/env python3
"""The fleet path as docs/fleet.md shows it, run for real on one machine.

Usage: Tests/fleet/fleet.py --fpctl PATH --image NAME [--identities N]

0. The image is what the Containerfile promises: uid 65532, ENTRYPOINT
   fpctl, the OCI labels, CA certificates; and https:// works with its system
   trust store (a CA mounted where Debian keeps it is trusted, none is not).
1. Every manifest under deploy/kubernetes is validated strictly by
   kubernetes-validate against Kubernetes 1.29 and the newest version it knows.
2. The Job's pod template runs as Kubernetes runs an Indexed Job: for each
   JOB_COMPLETION_INDEX 0..completions-1 (all at once, as parallelism says), a
   podman container of the image with the manifest's args (ENTRYPOINT fpctl, no
   shell), its env (a secretKeyRef read from secret.yaml) with Kubernetes'
   $(VAR) expansion, its volumes as bind mounts (the ConfigMap as a directory of
   its keys, read-only; each PVC a directory), its securityContext's user,
   read-only root and dropped capabilities, against an `fpctl serve` on the
   host's loopback (--network host). The one value changed is FLOWPILOT_API_URL,
   which names that server; the ConfigMap's identities are N generated lines.
3. report-job.yaml's container then reports over the results volume: every
   identity x placement once, no overlap (fpctl report refuses overlap).
4. The podFailurePolicy's claims: each exit status it names is provoked in the
   container (usage, invalid input, missing input, cannot write) and those it
   retries (some failed, backend unavailable, stopped by SIGTERM), and the
   rules are evaluated as the Job controller does for each.
5. SIGTERM: `podman stop` mid-run; the attempt's output is one whole JSON
   document, exit 75; a second attempt of that index resumes (no request for a
   finished pair, counted at the server), report merges both, and
   `cache verify` is clean.
6. The GitHub Actions workflow (deploy/github-actions/warm.yml) is checked
   against the workflow schema (check-jsonschema's built-in copy), and its run:
   steps are executed in the image, with the matrix values substituted.

Prints what it checked and exits 1 on the first claim that does not hold.
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent.parent
DEPLOY = ROOT / "deploy" / "kubernetes"
WORKFLOW = ROOT / "deploy" / "github-actions" / "warm.yml"
USER = "65532:65532"


def fail(message):
    print(f"fleet: FAILED: {message}", flush=True)
    sys.exit(1)


def check(condition, message):
    if not condition:
        fail(message)


def load(name):
    return yaml.safe_load((DEPLOY / name).read_text())


# --- Kubernetes' own rules, as the API server and the Job controller apply them ---


def expand(text, env):
    """Kubernetes' $(VAR) expansion of command, args and env values: $(VAR)
    becomes VAR's value when VAR is defined, $$ is one $, anything else stays."""
    out, i = [], 0
    while i < len(text):
        if text.startswith("$$", i):
            out.append("$")
            i += 2
        elif text.startswith("$(", i) and ")" in text[i:]:
            end = text.index(")", i)
            name = text[i + 2 : end]
            out.append(env[name] if name in env else text[i : end + 1])
            i = end + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def pod_failure_action(policy, exit_code, container):
    """The action of the first podFailurePolicy rule an exit code meets (the
    Job controller's order), or "Count" when none does: the failure counts
    against backoffLimitPerIndex, and the index is retried while it lasts."""
    for rule in policy["rules"]:
        on = rule.get("onExitCodes")
        if on is None:
            continue  # onPodConditions rules match pod conditions, not exit codes
        if on.get("containerName", container) != container:
            continue
        values = set(on["values"])
        matched = exit_code in values if on["operator"] == "In" else exit_code not in values and exit_code != 0
        if matched:
            return rule["action"]
    return "Count"


# --- The host's side: fpctl serve, podman ---


class Serve:
    started = []  # every server, stopped by main's finally even when a check fails

    def __init__(self, fpctl, *extra):
        self.process = subprocess.Popen(
            [fpctl, "serve", str(ROOT / "bundles" / "demo"), "--host", "127.0.0.1", "--port", "0", "-q", *extra],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        Serve.started.append(self.process)
        self.url = self.process.stdout.readline().strip()
        check(self.url.startswith("http://"), "fpctl serve did not start")

    def batches(self):
        with urllib.request.urlopen(self.url + "/_admin/stats") as response:
            return json.load(response)["routes"].get("resolve-batch", 0)

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=30)


def podman(*args, check_status=True, timeout=600):
    result = subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout)
    if check_status and result.returncode != 0:
        fail(f"podman {' '.join(args)}: {result.returncode}\n{result.stderr}")
    return result


class Pod:
    """A Job's pod template, run by podman as the kubelet would run it."""

    def __init__(self, image, job, secret, volumes, overrides=None):
        spec = job["spec"]["template"]["spec"]
        self.container = spec["containers"][0]
        self.pod_security = spec.get("securityContext", {})
        # The manifest's image name, given to the image built here (no registry is reached: --pull never).
        podman("tag", image, self.container["image"])
        self.image, self.secret, self.volumes = self.container["image"], secret, volumes
        self.overrides = overrides or {}

    def env(self, index):
        env = {}
        if index is not None:
            env["JOB_COMPLETION_INDEX"] = str(index)  # set by the Job controller
        for item in self.container.get("env", []):
            if "value" in item:
                env[item["name"]] = expand(item["value"], env)
            else:
                ref = item["valueFrom"]["secretKeyRef"]
                check(ref["name"] == self.secret["metadata"]["name"], f"secret {ref['name']} is not secret.yaml's")
                env[item["name"]] = self.secret["stringData"][ref["key"]]
        env.update(self.overrides)
        return env

    def command(self, index, name, extra_args=(), env_overrides=None, volume_overrides=None):
        env = self.env(index)
        env.update(env_overrides or {})
        security = self.container.get("securityContext", {})
        run = ["run", "--name", name, "--replace", "--network", "host", "--pull", "never"]
        user = self.pod_security.get("runAsUser")
        group = self.pod_security.get("runAsGroup", user)
        check(user not in (None, 0), "the pod runs as root")
        run += ["--user", f"{user}:{group}"]
        if security.get("readOnlyRootFilesystem"):
            run += ["--read-only", "--read-only-tmpfs=false"]
        if "ALL" in security.get("capabilities", {}).get("drop", []):
            run += ["--cap-drop", "ALL"]
        if security.get("allowPrivilegeEscalation") is False:
            run += ["--security-opt", "no-new-privileges"]
        for key, value in env.items():
            run += ["--env", f"{key}={value}"]
        volumes = dict(self.volumes)
        volumes.update(volume_overrides or {})
        for mount in self.container.get("volumeMounts", []):
            source = volumes.get(mount["name"])
            if source is None:
                continue  # a volume the test leaves out on purpose
            options = "ro" if mount.get("readOnly") or source.endswith(":ro") else "rw"
            run += ["--volume", f"{source.removesuffix(':ro')}:{mount['mountPath']}:{options}"]
        args = [expand(a, env) for a in self.container.get("args", [])] + list(extra_args)
        command = self.container.get("command")
        if command:
            run += ["--entrypoint", json.dumps([expand(c, env) for c in command])]
        return run + [self.image] + args


def attempt_rows(path):
    document = json.loads(Path(path).read_text())  # one whole JSON document, or this raises
    return document["rows"], document["run"]


def total_row(report_stdout):
    lines = [l for l in report_stdout.splitlines() if l.startswith("TOTAL")]
    check(lines, f"no TOTAL row in\n{report_stdout}")
    return lines[0].split()


# --- The checks ---


def validate_manifests():
    import kubernetes_validate

    schemas = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
    versions = sorted(
        {m.group(1) for d in schemas.iterdir() if (m := re.match(r"v(\d+\.\d+\.\d+)-local-strict$", d.name))},
        key=lambda v: tuple(int(p) for p in v.split(".")))
    newest = versions[-1]
    files = sorted(str(p) for p in DEPLOY.glob("*.yaml"))
    for version in ["1.29.0", newest]:
        result = subprocess.run(
            ["kubernetes-validate", "--strict", "-k", version, *files], capture_output=True, text=True)
        print(result.stdout + result.stderr, end="", flush=True)
        check(result.returncode == 0, f"kubernetes-validate -k {version} refused a manifest")
    return newest


def image_checks(image):
    """What the Containerfile promises: uid 65532, ENTRYPOINT fpctl, the OCI
    labels (created from SOURCE_DATE_EPOCH, the commit's time by default), CA
    certificates, and fpctl running with a read-only root."""
    info = json.loads(podman("image", "inspect", image).stdout)[0]
    config = info["Config"]
    check(config.get("User") == USER, f"the image's user is {config.get('User')}")
    check(config.get("Entrypoint") == ["fpctl"], f"the image's entrypoint is {config.get('Entrypoint')}")
    labels = config.get("Labels") or {}
    version = subprocess.run(["git", "-C", str(ROOT), "log", "-1", "--format=%ct"], capture_output=True,
                             text=True).stdout.strip()
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(os.environ.get("SOURCE_DATE_EPOCH", version))))
    for key, want in [("source", None), ("version", None), ("revision", None), ("created", created)]:
        value = labels.get(f"org.opencontainers.image.{key}")
        check(value and (want is None or value == want), f"label org.opencontainers.image.{key} is {value!r}")
    result = podman("run", "--rm", "--network", "none", "--read-only", "--entrypoint", "sh", image, "-c",
                    "test -s /etc/ssl/certs/ca-certificates.crt && id -u && fpctl --version", check_status=False)
    check(result.returncode == 0 and result.stdout.split() == ["65532", labels["org.opencontainers.image.version"]],
          f"the image's CA bundle, user or fpctl: {result.returncode} {result.stdout}{result.stderr}")
    size = info["Size"]
    print(f"image {image}: user {USER}, entrypoint fpctl, labels {sorted(labels)}, CA certificates, "
          f"{size / 1e6:.0f} MB", flush=True)


def system_trust(image, work):
    """https:// with the image's own trust store: a loopback TLS server whose
    certificate comes from a CA made here. With that CA where Debian's
    ca-certificates keeps the system's bundle, fpctl's request passes TLS (the
    server then answers 501: http_501); without it, it fails with tls."""
    import http.server
    import ssl

    tls = work / "tls"
    tls.mkdir()
    def openssl(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=tls)
    key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    openssl("req", "-x509", *key, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=fleet CA")
    openssl("req", *key, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1")
    (tls / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "server.pem", "-days", "2", "-extfile", "san.ext")
    class Quiet(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

    # It answers every POST 501: an answer over TLS is what is checked.
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tls / "server.pem", tls / "server.key")
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"https://127.0.0.1:{server.server_address[1]}"
    resolve = ["resolve", "paywall", "--api-url", url, "--app-id", "demo", "--cache-dir", "/tmp/c", "--timeout", "5s"]
    base = ["run", "--rm", "--network", "host", "--user", USER, "--read-only", "--tmpfs", "/tmp", "--pull", "never"]
    trusted = podman(*base, "--volume", f"{tls / 'ca.pem'}:/etc/ssl/certs/ca-certificates.crt:ro", image,
                     *resolve, check_status=False)
    untrusted = podman(*base, image, *resolve, check_status=False)
    server.shutdown()
    check("http_501: backend answered" in trusted.stdout + trusted.stderr,
          f"with the CA in the system's store: {trusted.returncode}\n{trusted.stdout}{trusted.stderr}")
    check("(tls" in untrusted.stdout + untrusted.stderr and "http_501" not in untrusted.stdout + untrusted.stderr,
          f"without it: {untrusted.returncode}\n{untrusted.stdout}{untrusted.stderr}")
    print("https:// with the image's system trust store: a CA in /etc/ssl/certs/ca-certificates.crt is trusted "
          "(the server answered 501), the same server without it fails with tls", flush=True)


def run_job(image, fpctl, work, identities):
    job, secret = load("job.yaml"), load("secret.yaml")
    configmap = load("identities-configmap.yaml")
    completions = job["spec"]["completions"]
    check(job["spec"]["completionMode"] == "Indexed", "the Job is not Indexed")
    check(job["spec"]["parallelism"] == completions, "parallelism is not completions")
    placements = [a for a in job["spec"]["template"]["spec"]["containers"][0]["args"][1:3]]
    data, cache, results = work / "data", work / "cache", work / "results"
    for d in (data, cache, results):
        d.mkdir()
    key = next(iter(configmap["data"]))
    lines = [json.dumps({"user_id": f"u{i}", "attributes": {"country": ["DE", "US", "FR"][i % 3]}})
             for i in range(identities)]
    (data / key).write_text("\n".join(lines) + "\n")
    for d in (cache, results):
        shutil.chown(d, 65532, 65532)
    server = Serve(fpctl, "--latency", "5")
    volumes = {"data": f"{data}:ro", "cache": str(cache), "results": str(results)}
    pod = Pod(image, job, secret, volumes, {"FLOWPILOT_API_URL": server.url})
    print(f"Job {job['metadata']['name']}: {completions} indexes, {identities} identities, "
          f"placements {' '.join(placements)}, FLOWPILOT_API_URL={server.url}", flush=True)
    started = time.monotonic()
    runs = [subprocess.Popen(["podman", *pod.command(i, f"fleet-warm-{i}")], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True) for i in range(completions)]
    for i, process in enumerate(runs):
        out, err = process.communicate(timeout=600)
        podman("rm", "-f", f"fleet-warm-{i}", check_status=False)
        check(process.returncode == 0, f"index {i} exited {process.returncode}\n{err}")
        print(f"  index {i}: exit 0; {err.strip().splitlines()[-1]}", flush=True)
    print(f"  {completions} pods in {time.monotonic() - started:.1f} s", flush=True)
    run_id = pod.env(0)["RUN_ID"]
    attempts = sorted(p.name for p in (results / run_id).iterdir())
    check(attempts == [f"shard-{k}-of-{completions}.attempt-001.json" for k in range(1, completions + 1)],
          f"attempt files: {attempts}")
    seen = {}
    for name in attempts:
        rows, run = attempt_rows(results / run_id / name)
        for row in rows:
            pair = (row["fingerprint"], row["placement"])
            check(pair not in seen, f"{pair} in {name} and {seen.get(pair)}")
            seen[pair] = name
    check(len(seen) == identities * len(placements), f"{len(seen)} pairs for {identities} identities")

    report_job = load("report-job.yaml")
    report_pod = Pod(image, report_job, secret, {"results": str(results)})
    result = podman(*report_pod.command(None, "fleet-report"), "--format", "text", check_status=False)
    podman("rm", "-f", "fleet-report", check_status=False)
    check(result.returncode == 0, f"report exited {result.returncode}: {result.stderr}")
    print("report-job.yaml's pod:\n" + result.stdout + result.stderr, end="", flush=True)
    total = total_row(result.stdout)
    check(total[1] == str(identities * len(placements)) and total[2] == total[1],
          f"report's TOTAL is {total}, want {identities * len(placements)} warmed")
    server.stop()
    return job, secret, pod, volumes, placements


def failure_policy(image, fpctl, work, job, secret, volumes):
    policy = job["spec"]["podFailurePolicy"]
    name = job["spec"]["template"]["spec"]["containers"][0]["name"]
    bad = work / "bad-data"
    bad.mkdir()
    (bad / "identities.jsonl").write_text('{"user_id": "u1"}\nnot json\n')
    failing = Serve(fpctl, "--fail-rate", "1", "--fail-status", "400")
    up = Serve(fpctl)
    cases = [
        # (what, status wanted, env overrides, volume overrides, the action the policy must take)
        ("usage: JOB_COMPLETION_INDEX beyond --shard job/4", 64, {"JOB_COMPLETION_INDEX": "7"}, {}, "FailIndex"),
        ("invalid input: an identities line that is not JSON", 65, {}, {"data": f"{bad}:ro"}, "FailIndex"),
        ("missing input: no identities volume", 66, {}, {"data": None}, "FailIndex"),
        ("cannot write: the results volume read-only", 73, {}, {"results": f"{volumes['results']}:ro"}, "FailIndex"),
        ("backend unavailable: nothing listening", 69, {"FLOWPILOT_API_URL": "http://127.0.0.1:9"}, {}, "Count"),
        ("partial: every resolve answered 400", 3, {"FLOWPILOT_API_URL": failing.url}, {}, "Count"),
    ]
    print(f"podFailurePolicy of container {name}:", flush=True)
    for number, (what, wanted, env, vols, action) in enumerate(cases):
        pod = Pod(image, job, secret, volumes, {"FLOWPILOT_API_URL": up.url})
        # A cache of its own: the Job's run left every pair fresh in the shared one.
        cache = work / f"policy-cache-{number}"
        cache.mkdir()
        shutil.chown(cache, 65532, 65532)
        overrides = {"cache": str(cache), **vols}
        merged = {k: v for k, v in {**volumes, **overrides}.items() if v is not None}
        pod.volumes = merged
        result = podman(*pod.command(0, "fleet-policy", env_overrides=env, extra_args=["--run-id", "policy"]),
                        check_status=False)
        podman("rm", "-f", "fleet-policy", check_status=False)
        got = pod_failure_action(policy, result.returncode, name)
        line = (result.stderr.strip().splitlines() or [""])[-1]
        print(f"  exit {result.returncode:3} ({what}) -> {got}: {line}", flush=True)
        check(result.returncode == wanted, f"{what}: exit {result.returncode}, want {wanted}\n{result.stderr}")
        check(got == action, f"{what}: the policy says {got}, want {action}")
    failing.stop()
    up.stop()
    return policy, name


def sigterm(image, fpctl, work, job, secret, policy, container_name, identities, placements):
    data, cache, results = work / "t-data", work / "t-cache", work / "t-results"
    for d in (data, cache, results):
        d.mkdir()
    (data / "identities.jsonl").write_text(
        "\n".join(json.dumps({"user_id": f"s{i}"}) for i in range(identities)) + "\n")
    for d in (cache, results):
        shutil.chown(d, 65532, 65532)
    server = Serve(fpctl, "--latency", "250")
    volumes = {"data": f"{data}:ro", "cache": str(cache), "results": str(results)}
    pod = Pod(image, job, secret, volumes, {"FLOWPILOT_API_URL": server.url})
    run_id = pod.env(0)["RUN_ID"]
    attempt1 = results / run_id / "shard-1-of-4.attempt-001.json"
    process = subprocess.Popen(["podman", *pod.command(0, "fleet-sigterm", extra_args=["--concurrency", "16"])],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        if attempt1.exists() and attempt1.read_text().count("\n") > 40:
            break
        time.sleep(0.05)
    check(process.poll() is None, "the warm ended before podman stop")
    stopped_at = time.monotonic()
    podman("stop", "--time", "30", "fleet-sigterm")
    out, err = process.communicate(timeout=60)
    took = time.monotonic() - stopped_at
    podman("rm", "-f", "fleet-sigterm", check_status=False)
    action = pod_failure_action(policy, process.returncode, container_name)
    print(f"SIGTERM (podman stop) mid-run: exit {process.returncode} after {took:.1f} s -> {action}; "
          f"{err.strip().splitlines()[-1]}", flush=True)
    check(process.returncode == 75, f"exit {process.returncode} after podman stop, want 75\n{err}")
    check(action == "Count", "the policy does not retry a stopped pod")
    rows, run = attempt_rows(attempt1)  # whole, or this raises
    finished = {row["fingerprint"] for row in rows}
    print(f"  attempt 1: one whole JSON document, {len(rows)} rows ({len(finished)} identities), "
          f"run {run['run_id']} shard {run['shard']}", flush=True)

    before = server.batches()
    result = podman(*pod.command(0, "fleet-sigterm-2"), check_status=False)
    podman("rm", "-f", "fleet-sigterm-2", check_status=False)
    check(result.returncode == 0, f"the second attempt exited {result.returncode}\n{result.stderr}")
    sent = server.batches() - before
    rows2, run2 = attempt_rows(results / run_id / "shard-1-of-4.attempt-002.json")
    again = finished & {row["fingerprint"] for row in rows2}
    check(not again, f"{len(again)} identities finished in attempt 1 were sent again")
    check(sent == len({row["fingerprint"] for row in rows2}), f"{sent} batches for {len(rows2)} rows")
    check(run2.get("resumed_from", {}).get("rows") == len(rows), f"attempt 2 resumed {run2.get('resumed_from')}")
    print(f"  attempt 2: exit 0, resumed from attempt 1's {len(rows)} rows, {sent} batches sent "
          f"(one per identity left), none for a finished pair", flush=True)
    shard_total = len(finished) + len({row["fingerprint"] for row in rows2})

    report = podman("run", "--rm", "--network", "none", "--user", USER, "--read-only", "--volume",
                    f"{results}:/results:ro", image, "report", f"/results/{run_id}", check_status=False)
    check(report.returncode == 0, f"report over both attempts: {report.returncode}\n{report.stderr}")
    total = total_row(report.stdout)
    check(total[1] == str(shard_total * len(placements)), f"report's TOTAL {total}, want {shard_total} identities")
    print(f"  report over both attempts: {total[1]} pairs, each once; {report.stderr.strip()}", flush=True)
    verify = podman("run", "--rm", "--network", "none", "--user", USER, "--read-only", "--volume",
                    f"{cache}:/cache", image, "cache", "verify", "--cache-dir", "/cache/shard-0", check_status=False)
    check(verify.returncode == 0, f"cache verify: {verify.returncode}\n{verify.stdout}{verify.stderr}")
    print(f"  cache verify: {verify.stdout.strip().splitlines()[-1] if verify.stdout.strip() else 'clean'}",
          flush=True)
    server.stop()


def workflow(image, fpctl, work, identities):
    result = subprocess.run(
        ["check-jsonschema", "--builtin-schema", "vendor.github-workflows", str(WORKFLOW)],
        capture_output=True, text=True)
    print(result.stdout.strip(), flush=True)
    check(result.returncode == 0, f"check-jsonschema refused {WORKFLOW}\n{result.stdout}{result.stderr}")
    flow = yaml.safe_load(WORKFLOW.read_text())
    server = Serve(fpctl)
    workspace_root = work / "gha"
    artifacts = work / "gha-artifacts"
    artifacts.mkdir()
    run_id = "4242"
    context = {"github.run_id": run_id, "github.run_attempt": "1", "vars.FLOWPILOT_API_URL": server.url,
               "secrets.FLOWPILOT_API_KEY": "k_workflow"}

    def substitute(text, matrix):
        def value(m):
            name = m.group(1).strip()
            if name.startswith("matrix."):
                return str(matrix[name[len("matrix."):]])
            check(name in context, f"the workflow uses ${{{{ {name} }}}}, which the test does not know")
            return context[name]
        return re.sub(r"\$\{\{([^}]*)\}\}", value, text)

    def run_job(job_name, matrix):
        job = flow["jobs"][job_name]
        container = job["container"]
        podman("tag", image, container["image"])  # the name the workflow pulls, given to the image built here
        workspace = workspace_root / f"{job_name}-{'-'.join(str(v) for v in matrix.values()) or 'one'}"
        workspace.mkdir(parents=True)
        for step in job["steps"]:
            uses = step.get("uses", "")
            if uses.startswith("actions/checkout"):
                (workspace / "identities.jsonl").write_text(
                    "\n".join(json.dumps({"user_id": f"g{i}"}) for i in range(identities)) + "\n")
            elif uses.startswith("actions/upload-artifact"):
                name = substitute(step["with"]["name"], matrix)
                shutil.copytree(workspace / substitute(step["with"]["path"], matrix), artifacts / name)
            elif uses.startswith("actions/download-artifact"):
                pattern = substitute(step["with"]["pattern"], matrix)
                target = workspace / substitute(step["with"]["path"], matrix)
                for artifact in sorted(artifacts.glob(pattern)):
                    shutil.copytree(artifact, target, dirs_exist_ok=True)
            elif "run" in step:
                script = substitute(step["run"], matrix)
                env = {k: substitute(str(v), matrix) for k, v in {**flow.get("env", {}), **job.get("env", {}),
                                                                 **step.get("env", {})}.items()}
                shell = step.get("shell") or job.get("defaults", {}).get("run", {}).get("shell") or \
                    flow.get("defaults", {}).get("run", {}).get("shell")
                check(shell == "bash", "the run: steps are written for bash (-eo pipefail)")
                args = ["run", "--rm", "--network", "host", "--pull", "never", "--entrypoint", "bash",
                        "--volume", f"{workspace}:/__w/fpctl/fpctl", "--workdir", "/__w/fpctl/fpctl",
                        "--env", f"GITHUB_STEP_SUMMARY=/__w/fpctl/fpctl/step-summary.md"]
                options = container.get("options", "")
                if "--user 0" in options:
                    args += ["--user", "0"]
                for k, v in env.items():
                    args += ["--env", f"{k}={v}"]
                # GitHub's `shell: bash`: bash --noprofile --norc -eo pipefail {0}
                result = podman(*args, container["image"], "--noprofile", "--norc", "-eo", "pipefail", "-c", script,
                                check_status=False)
                print(f"  {job_name} {matrix or ''} step '{step.get('name', 'run')}': exit {result.returncode}",
                      flush=True)
                check(result.returncode == 0, f"{job_name}: {script}\n{result.stdout}{result.stderr}")
                if job_name == "report":
                    return result.stdout
        return None

    shards = flow["jobs"]["warm"]["strategy"]["matrix"]["shard"]
    for shard in shards:
        run_job("warm", {"shard": shard})
    out = run_job("report", {})
    total = total_row(out)
    check(total[1] == str(identities * 2) and total[2] == total[1], f"the workflow's report: {total}")
    print(f"  report job: {total[1]} pairs warmed over {len(shards)} shards, each once", flush=True)
    server.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fpctl", required=True, help="fpctl on the host, for fpctl serve")
    parser.add_argument("--image", required=True)
    parser.add_argument("--identities", type=int, default=400)
    args = parser.parse_args()
    # Children (podman, fpctl serve) get SIGTERM and SIGHUP as Kubernetes' do,
    # even if this script was started with them ignored.
    for number in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(number) == signal.SIG_IGN:
            signal.signal(number, signal.SIG_DFL)
    work = Path(tempfile.mkdtemp(prefix="fpctl-fleet-"))
    os.chmod(work, 0o755)
    try:
        image_checks(args.image)
        system_trust(args.image, work)
        newest = validate_manifests()
        print(f"manifests valid for Kubernetes 1.29 and {newest}", flush=True)
        job, secret, pod, volumes, placements = run_job(args.image, args.fpctl, work, args.identities)
        policy, name = failure_policy(args.image, args.fpctl, work, job, secret, volumes)
        sigterm(args.image, args.fpctl, work, job, secret, policy, name, 1200, placements)
        if WORKFLOW.exists():
            workflow(args.image, args.fpctl, work, 200)
        print("fleet: every claim held", flush=True)
    finally:
        for process in Serve.started:
            if process.poll() is None:
                process.terminate()
                process.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
