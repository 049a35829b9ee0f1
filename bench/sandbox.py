"""What the sandbox adds: a build with and without it, back to back; a request through its proxy.

    .venv/bin/python bench/sandbox.py             # 40 builds each way, 200 requests each way
    .venv/bin/python bench/sandbox.py --n 100

Builds: the `command` builder (`echo built > out.txt`) through `run_build` on one
repository, alternating a build in bubblewrap (with the process limits and the
cgroup where the host gives one) and one without, each a new task (worktree
added, command run, commit recorded). Reports p50/p90 per build and the added
time per build (aim: under 50 ms).

Proxy: from inside a sandbox, `n` HTTP GETs to a loopback server on the host,
through the bridge and the egress proxy, against the same GETs from the host
straight to the server (no sandbox can reach the host's loopback otherwise).
Each GET opens its own connection, as a tool making one request would.
Reports p50 per request and the proxy's added time.
"""

from __future__ import annotations

import argparse
import http.server
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from agent_team.builders import BuildTask, run_build
from agent_team.builders.command import CommandBuilder
from agent_team.builders.sandbox import NoSandbox, SandboxPolicy
from agent_team.builders.sandbox_choice import make_sandbox

_CLIENT = """
import sys, time, urllib.request, json
url, n = sys.argv[1], int(sys.argv[2])
times = []
for _ in range(n):
    began = time.perf_counter()
    urllib.request.urlopen(url, timeout=30).read()
    times.append(time.perf_counter() - began)
times = sorted(t * 1000 for t in times[1:])  # the first: warm-up
print("TIMES", json.dumps([times[len(times) // 2], times[int(0.9 * len(times))]]))
"""


def _repo(path: Path) -> Path:
    path.mkdir(parents=True)
    git = ["git", "-c", "user.name=b", "-c", "user.email=b@example.com"]
    subprocess.run([*git, "init", "-q", "-b", "main"], cwd=path, check=True)
    (path / "README.md").write_text("bench\n")
    subprocess.run([*git, "add", "."], cwd=path, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "init"], cwd=path, check=True)
    return path


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def builds(root: Path, n: int) -> None:
    repo = _repo(root / "repo")
    state = root / "state"
    policy = SandboxPolicy(state_dir=state, hide=(root / "hidden",))
    boxed = make_sandbox("bwrap", policy, runs_processes=True)
    print(f"sandbox: {boxed.describe()}")
    builders = {
        "none": CommandBuilder("echo built > out.txt", 60, sandbox=NoSandbox()),
        "bwrap": CommandBuilder("echo built > out.txt", 60, sandbox=boxed),
    }
    times: dict[str, list[float]] = {"none": [], "bwrap": []}
    for i in range(-1, n):  # one warm-up pair, left out
        for name, builder in builders.items():
            task = BuildTask(f"{name}-{i + 1}", "bench")
            began = time.perf_counter()
            run_build(builder, task, "plan", repo_path=repo, state_dir=state)
            if i >= 0:
                times[name].append((time.perf_counter() - began) * 1000)
    none50, box50 = statistics.median(times["none"]), statistics.median(times["bwrap"])
    print(f"\nbuilds ({n} each, alternating)")
    print(f"{'':10} {'p50 ms':>8} {'p90 ms':>8}")
    for name, values in times.items():
        print(f"{name:10} {statistics.median(values):8.1f} {_p(values, 0.9):8.1f}")
    print(f"added by the sandbox: {box50 - none50:.1f} ms per build (p50), {box50 / none50:.2f}x")


class _Quiet(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def do_GET(self) -> None:
        body = b"ok"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def proxy(root: Path, n: int) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    repo = _repo(root / "repo-proxy")
    (repo / "client.py").write_text(_CLIENT)
    subprocess.run(["git", "add", "."], cwd=repo, check=True, env=None)
    subprocess.run(
        ["git", "-c", "user.name=b", "-c", "user.email=b@example.com", "commit", "-q", "-m", "c"],
        cwd=repo,
        check=True,
    )
    direct = subprocess.run(
        [sys.executable, "-I", "-S", str(repo / "client.py"), f"http://127.0.0.1:{port}/", str(n)],
        capture_output=True,
        text=True,
        check=True,
    )
    policy = SandboxPolicy(state_dir=root / "state-proxy", allow_hosts=("localhost",))
    boxed = CommandBuilder(
        f"{sys.executable} -I -S client.py http://localhost:{port}/ {n}",
        300,
        sandbox=make_sandbox("bwrap", policy, runs_processes=True),
    )
    result = run_build(
        boxed, BuildTask("proxy", "bench"), "plan", repo_path=repo, state_dir=root / "state-proxy"
    )
    server.shutdown()

    def parsed(text: str) -> list[float]:
        """(p50, p90) in ms, as the client printed them (a build keeps only its output's tail)."""
        line = next(x for x in text.splitlines() if x.startswith("TIMES "))
        return [float(t) for t in json.loads(line.removeprefix("TIMES "))]

    host, sandboxed = parsed(direct.stdout), parsed(result.output)
    print(f"\nrequests ({n} each, a new connection each)")
    print(f"{'':28} {'p50 ms':>8} {'p90 ms':>8}")
    print(f"{'host -> server':28} {host[0]:8.2f} {host[1]:8.2f}")
    print(f"{'sandbox -> proxy -> server':28} {sandboxed[0]:8.2f} {sandboxed[1]:8.2f}")
    added = sandboxed[0] - host[0]
    print(f"added by the proxy: {added:.2f} ms per request (p50)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=40, help="builds each way")
    parser.add_argument("--requests", type=int, default=200, help="proxied requests")
    args = parser.parse_args()
    if shutil.which("bwrap") is None:
        sys.exit("bench/sandbox.py needs bubblewrap: apt install bubblewrap")
    with tempfile.TemporaryDirectory(prefix="agent-team-bench-sandbox-") as tmp:
        builds(Path(tmp), args.n)
        proxy(Path(tmp), args.requests)


if __name__ == "__main__":
    main()
