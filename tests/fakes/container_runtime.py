"""A stand-in for the `podman`/`docker` client, for machines where no container can run.

Neither runtime can start a container on the CI machines (podman 4.3's crun
refuses a hybrid cgroup host: "cgroups in hybrid mode not supported"), so the
container sandbox is tested against this script instead. It speaks the subset
of the client's command line the sandbox uses (`version`, `ps -a --filter
label=... --format {{.Names}}`, `rm -f NAME`, `run [flags] IMAGE ARGV`),
records every call, and runs a container's command on the host, in its
`--workdir`, with exactly the variables passed by `--env`: what it proves is
the flags and the lifecycle we hand a real runtime, not the isolation the
runtime itself gives.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

__all__ = ["install_fake_runtime", "runtime_calls"]

_SCRIPT = r"""
import json, os, signal, subprocess, sys
from pathlib import Path

STATE = Path(__STATE__)
CONTAINERS = STATE / "containers"
CONTAINERS.mkdir(parents=True, exist_ok=True)
args = sys.argv[1:]
with open(STATE / "calls.jsonl", "a") as log:
    log.write(json.dumps({"argv": args, "env": sorted(os.environ)}) + "\n")

def remove(name):
    record = CONTAINERS / f"{name}.json"
    if not record.exists():
        print(f"Error: no such container {name}", file=sys.stderr)
        return 1
    pid = json.loads(record.read_text()).get("pid")
    if pid:
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    record.unlink(missing_ok=True)
    return 0

if args[0] == "version":
    if (STATE / "engine-down").exists():
        print("Cannot connect to the engine", file=sys.stderr)
        sys.exit(125)
    print("fake 1.0")
    sys.exit(0)
if args[0] == "ps":
    wanted = args[args.index("--filter") + 1].removeprefix("label=")
    for record in sorted(CONTAINERS.glob("*.json")):
        data = json.loads(record.read_text())
        if f"agent-team.state={data['label']}" == wanted:
            print(record.stem)
    sys.exit(0)
if args[0] == "rm":
    sys.exit(remove(args[-1]))
assert args[0] == "run", args
WITH_VALUE = {"--name", "--label", "--network", "--cap-drop", "--security-opt", "--pids-limit",
              "--memory", "--ulimit", "--tmpfs", "--user", "--workdir", "--volume", "--env"}
flags, i = {}, 1
while args[i].startswith("--"):
    if args[i] in WITH_VALUE:
        flags.setdefault(args[i], []).append(args[i + 1])
        i += 2
    else:
        flags.setdefault(args[i], []).append("")
        i += 1
image, command = args[i], args[i + 1:]
env = {}
for item in flags.get("--env", []):
    key, sep, value = item.partition("=")
    env[key] = value if sep else os.environ[key]
name = flags["--name"][0]
child = subprocess.Popen(command, cwd=flags["--workdir"][0], env=env, start_new_session=True)
label = flags["--label"][0].removeprefix("agent-team.state=")
(CONTAINERS / f"{name}.json").write_text(json.dumps({"label": label, "pid": child.pid}))
code = child.wait()
if "--rm" in flags:
    (CONTAINERS / f"{name}.json").unlink(missing_ok=True)
sys.exit(code if code >= 0 else 128 - code)
"""


def install_fake_runtime(bin_dir: Path, state: Path, name: str = "podman") -> Path:
    """Write the fake client as `bin_dir/name`, keeping its records in `state`; returns it."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    state.mkdir(parents=True, exist_ok=True)
    script = bin_dir / name
    body = _SCRIPT.replace("__STATE__", repr(str(state)))
    script.write_text(f"#!{sys.executable}\n{body}")
    script.chmod(0o755)
    return script


def runtime_calls(state: Path) -> list[dict[str, list[str]]]:
    """Every call the fake client got, oldest first: its argv and its environment's names."""
    path = state / "calls.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]
