"""The kfp.local half of hack/kfp-local.sh: runs the shipped pipelines with the
real, pinned KFP SDK's DockerRunner against the Docker daemon that DOCKER_HOST
names, and checks what they return and write. Every task runs as the calling
user, on the host's network, with credentials bound read-only where the
cluster pipeline mounts its Secrets (examples/kfp-local's docker_runner, as the
README shows it); the backends are the suite's services (hack/services.sh's env
files, sourced by hack/kfp-local.sh) and the LSF and Quantum fakes (hack/fakes,
built by hack/kfp-local.sh as BRIDGE_FAKES), all on loopback.
Usage: kfp_local.py ROOT WORKDIR (KFP_LOCAL_ONLY=text: only the checks whose
name contains text). Prints "kfp-local: N passed, M failed, K skipped".
A check whose service is missing is skipped, and fails under CI=true."""
import contextlib
import datetime
import hashlib
import hmac
import importlib.util
import json
import os
import subprocess
import sys
import time
import traceback
import urllib.request

from kfp import components, local

ROOT = os.path.abspath(sys.argv[1])
WORK = os.path.abspath(sys.argv[2])
results = []


class Skip(Exception):
    """A check whose service is not there (a failure under CI=true)."""


def say(line):
    # kfp.local leaves its indenting stdout in place after a sub-pipeline.
    print(line, file=sys.__stdout__, flush=True)


def check(name):
    def wrap(fn):
        if os.environ.get("KFP_LOCAL_ONLY", "") not in name:
            return fn  # another check was asked for
        t0 = time.monotonic()
        try:
            fn()
            results.append((name, None))
            say(f"ok   {name} ({time.monotonic() - t0:.1f}s)")
        except Skip as e:
            results.append((name, e))
            say(f"skip {name}: {e}")
        except Exception as e:  # noqa: BLE001 - every failure is reported
            results.append((name, e))
            say(f"FAIL {name}: {e}")
            traceback.print_exc(limit=4)
        return fn
    return wrap


def require(cond, msg):
    if not cond:
        raise AssertionError(msg)


def env(*names):
    """The values of the suite's environment variables names, or Skip."""
    missing = [n for n in names if not os.environ.get(n)]
    if missing:
        msg = f"{', '.join(missing)} not set: start the suite's services (hack/services.sh) first"
        if os.environ.get("CI") == "true":
            raise AssertionError(msg)
        raise Skip(msg)
    return [os.environ[n] for n in names]


def load(rel, name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, rel))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def outputs_of(root, task="bridge-job", output="status"):
    """The outputs of every run of task under root (loop iterations and
    sub-pipelines nest it deeper), one dict per task directory that holds
    output, in order."""
    found = []
    for d, _, files in sorted(os.walk(root)):
        if os.path.basename(d) == task and output in files:
            found.append({f: open(os.path.join(d, f)).read() for f in files})
    return found


def new_root(name):
    """A pipeline root that is the caller's alone (0700), as a user's own
    folder would be."""
    root = os.path.join(WORK, name)
    os.makedirs(root, mode=0o700)
    return root


def world_writable(root):
    """The paths under root (root included) that anyone may change."""
    bad = []
    for d, dirs, files in os.walk(root):
        for p in [d] + [os.path.join(d, f) for f in files]:
            st = os.lstat(p)
            if st.st_mode & 0o002:
                bad.append(f"{p} ({oct(st.st_mode & 0o777)})")
    return bad


def slurm_get(url, creds, path):
    """GET path of a slurmrestd with the token of the credentials directory creds (loopback, no proxy)."""
    read = lambda name: open(os.path.join(creds, name)).read().strip()  # noqa: E731
    req = urllib.request.Request(url + path, headers={"X-SLURM-USER-NAME": read("username"),
                                                      "X-SLURM-USER-TOKEN": read("token")})
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(req, timeout=30) as r:
        return json.load(r)


def require_slurm_completed(url, creds, version, job_id):
    """The Slurm at url says job_id is COMPLETED (not only invoke's outputs)."""
    [job] = slurm_get(url, creds, f"/slurm/{version}/job/{job_id}")["jobs"]
    state = job["job_state"]  # a string in v0.0.38, a list from v0.0.40
    require(state in ("COMPLETED", ["COMPLETED"]), f"Slurm says job {job_id} is {state}, want COMPLETED")
    return job


example = load("examples/kfp-local/kfp_pipeline.py", "kfp_local_example")


def run_example(ex, name, mounts=None, **arguments):
    """Runs examples/<ex>/kfp_pipeline.py's pipeline as shipped under
    kfp.local, with docker_runner(mounts) and a state directory of its own,
    in a new pipeline root; returns the root and the bridge-job tasks'
    outputs. The records are shared by the tasks as a cluster's ConfigMaps
    are: each cleanup must have found its job's record and deleted it."""
    mod = load(f"examples/{ex}/kfp_pipeline.py", f"example_{ex}")
    root, state = new_root(name), new_root(name + "-state")
    local.init(runner=example.docker_runner(mounts, state_dir=state), pipeline_root=root)
    ran.add(f"examples/{ex}/kfp_pipeline.py")  # its check reports how it went
    mod.pipeline(**arguments)
    require(not world_writable(root), f"world-writable under the pipeline root: {world_writable(root)}")
    left = [f for _, _, files in os.walk(state) for f in files if f.endswith("-bridge-cm.json")]
    require(not left, f"records left in the state directory (cleanup did not find them?): {left}")
    return root, outputs_of(root)


ran = {"examples/kfp-local/kfp_pipeline.py"}  # the pipelines run by a check (run_example adds to it)


def require_done(out, what):
    require(out.get("status") == "DONE", f"{what}: status {out.get('status')!r}, want DONE ({out})")
    require(out.get("job_id"), f"{what}: no job_id ({out})")


# 1. The example as a user runs it: the tasks run as the caller (uid
#    os.getuid()), the outputs come back, the files are the caller's, and the
#    pipeline root stays the caller's alone.
def docs_text():
    """README.md and every markdown file under docs/, one after the other
    (the KFP snippets moved from the README to docs/guides/kfp.md)."""
    import glob
    paths = [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True))
    texts = []
    for p in paths:
        with open(p) as f:
            texts.append(f.read())
    return "\n".join(texts)


def doc_python(containing):
    """The docs' python block that contains the text containing, dedented."""
    import textwrap
    blocks = [b.split("\n", 1)[1] for b in docs_text().split("```")[1::2] if b.startswith("python\n")]
    found = [textwrap.dedent(b) for b in blocks if containing in b]
    require(len(found) == 1, f"{len(found)} python blocks of README.md and docs/ contain {containing!r}, want 1")
    return found[0]


@check("examples/kfp-local: a DONE job's outputs read back, written by the caller into a 0700 root")
def _():
    root = os.path.join(WORK, "example")
    out = example.run(root)
    require(out["status"] == "DONE", f"status {out['status']!r}, want DONE ({out})")
    require(out["job_exit_code"] == "0", f"job_exit_code {out['job_exit_code']!r}")
    require(out["message"] == "the job exited 0", f"message {out['message']!r}")
    require(out["job_id"].startswith("br-"), f"job_id {out['job_id']!r}")
    require(os.stat(root).st_mode & 0o777 == 0o700, f"{root} is {oct(os.stat(root).st_mode & 0o777)}, want 0700")
    [d] = [d for d, _, files in os.walk(root) if os.path.basename(d) == "bridge-job"]
    st = os.stat(os.path.join(d, "status"))
    require(st.st_uid == os.getuid(), f"status written by uid {st.st_uid}, want the caller's {os.getuid()}")
    with open(os.path.join(d, "status")) as f:
        require(f.read() == "DONE", "the status file is not DONE without a newline")
    require(not world_writable(root), f"world-writable under the pipeline root: {world_writable(root)}")


# What works instead of a dsl.If on status under kfp.local (see 3b): the
# pipeline returns the job's outputs and the caller branches in Python.
@check("examples/kfp-local: a failing job is FAILED with its exit code (exit_zero), for Python to branch on")
def _():
    out = example.run(os.path.join(WORK, "failing"), script="echo about to fail >&2; exit 3")
    require(out["status"] == "FAILED", f"status {out['status']!r}, want FAILED ({out})")
    require(out["job_exit_code"] == "3", f"job_exit_code {out['job_exit_code']!r}, want 3")
    require(len(outputs_of(os.path.join(WORK, "failing"))) == 1, "no bridge-job task directory")


# 1b. The README's command for it, run as the README gives it (the pipeline
#     root moved into the work directory): one JSON line of outputs.
@check("the README's `python examples/kfp-local/kfp_pipeline.py ROOT` prints the job's outputs")
def _():
    import re
    m = re.search(r"^python (examples/kfp-local/kfp_pipeline\.py) (\S+)$", docs_text(), re.M)
    require(m is not None, "the README gives no `python examples/kfp-local/kfp_pipeline.py ROOT` command")
    out = subprocess.run([sys.executable, m.group(1), os.path.join(WORK, "readme")], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    require(out.returncode == 0, f"exit {out.returncode}: {out.stderr[-2000:]}")
    got = json.loads(out.stdout.strip().splitlines()[-1])
    require(got.get("status") == "DONE" and got.get("job_exit_code") == "0", f"the command printed {got}")


# 2. From an ordinary user's own folder: a non-root caller with a 0700
#    pipeline root gets the outputs, written as itself, and nothing in the
#    root is world-writable. Run as root, the check runs the example in a
#    child that is uid 4242 (the image's 65532 could not enter that root),
#    reaching the daemon through a socket only that user may open.
NON_ROOT = 4242


@contextlib.contextmanager
def docker_socket_for(uid, path):
    """A unix socket at path, owned by uid, passing every connection on to
    DOCKER_HOST's socket (the child is no member of the daemon's group)."""
    import socket
    import threading
    daemon = os.environ["DOCKER_HOST"].removeprefix("unix://")
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(path)
    os.chown(path, uid, uid)
    os.chmod(path, 0o600)
    srv.listen(16)

    def pipe(a, b):
        with contextlib.suppress(OSError):
            while data := a.recv(65536):
                b.sendall(data)
        with contextlib.suppress(OSError):
            b.shutdown(socket.SHUT_WR)

    def serve():
        with contextlib.suppress(OSError):
            while True:
                c, _ = srv.accept()
                d = socket.socket(socket.AF_UNIX)
                d.connect(daemon)
                threading.Thread(target=pipe, args=(c, d), daemon=True).start()
                threading.Thread(target=pipe, args=(d, c), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield "unix://" + path
    finally:
        srv.close()


def run_as(uid, home, fn):
    """fn() in a child process that is uid (and gid uid) with no other
    groups, HOME and TMPDIR home; returns what fn returned (JSON)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(r)
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            os.environ.update(HOME=home, TMPDIR=home)
            import tempfile
            tempfile.tempdir = None  # computed again from TMPDIR
            os.write(w, json.dumps(fn()).encode())
            code = 0
        except BaseException:  # noqa: BLE001 - reported by the parent
            traceback.print_exc()
        finally:
            os._exit(code)
    os.close(w)
    with os.fdopen(r) as f:
        got = f.read()
    _, status = os.waitpid(pid, 0)
    require(os.waitstatus_to_exitcode(status) == 0 and got, f"the child as uid {uid} failed (exit {status})")
    return json.loads(got)


@check("kfp.local from a non-root user's 0700 pipeline root: outputs back, the user's, nothing world-writable")
def _():
    base = os.path.join(WORK, "non-root")
    os.makedirs(base, mode=0o700)
    root = os.path.join(base, "kfp-root")
    if os.getuid() != 0:
        out, uid = example.run(root), os.getuid()
    else:
        uid = NON_ROOT
        os.chown(base, uid, uid)
        with docker_socket_for(uid, os.path.join(base, "docker.sock")) as host:
            os.environ["DOCKER_HOST"], daemon = host, os.environ["DOCKER_HOST"]
            try:
                out = run_as(uid, base, lambda: example.run(root))
            finally:
                os.environ["DOCKER_HOST"] = daemon
    require(out["status"] == "DONE" and out["job_exit_code"] == "0", f"outputs {out}")
    st = os.stat(root)
    require(st.st_uid == uid and st.st_mode & 0o777 == 0o700, f"{root}: uid {st.st_uid}, {oct(st.st_mode & 0o777)}")
    for d, dirs, files in os.walk(root):
        for p in [d] + [os.path.join(d, f) for f in files]:
            require(os.lstat(p).st_uid == uid, f"{p} belongs to uid {os.lstat(p).st_uid}, want {uid}")
    require(not world_writable(root), f"world-writable under the pipeline root: {world_writable(root)}")
    require(len(outputs_of(root)) == 1, "no bridge-job task directory")


# 3. The cluster examples, unchanged but for their parameters (resource_url
#    and what names the site: a working directory, a package index), with
#    their Secrets bound where the pipeline mounts them with kfp-kubernetes
#    (dsl.ExitHandler, ParallelFor and sub-pipelines included).
@check("examples/local/kfp_pipeline.py (ExitHandler, Secret mounts) runs under kfp.local: DONE")
def _():
    _, [out] = run_example("local", "local")
    require_done(out, "the job")
    require(out["job_exit_code"] == "0", f"job_exit_code {out['job_exit_code']!r}")


@check("examples/loop/kfp_pipeline.py: each of the 4 items' jobs DONE, each its own job")
def _():
    _, outs = run_example("loop", "loop")
    require(len(outs) == 4, f"{len(outs)} bridge-job tasks ran, want 4 (one per item)")
    for o in outs:
        require_done(o, "an item's job")
    require(len({o["job_id"] for o in outs}) == 4, f"job ids {[o['job_id'] for o in outs]}: not one job per item")


# 3b. kfp.local does not evaluate a dsl.If on a task's output: the branch is
#     skipped without a word even when the job FAILED (the README says so).
#     When kfp.local learns it, this fails: say so in the README then.
@check("examples/branching/kfp_pipeline.py: the job FAILED (exit 3) and kfp.local skips the dsl.If branch")
def _():
    root, [out] = run_example("branching", "branching")
    require(out["status"] == "FAILED" and out["job_exit_code"] == "3", f"the job's outputs {out}")
    ran = [d for d, _, _ in os.walk(root) if os.path.basename(d) == "report"]
    require(not ran, f"the dsl.If branch ran ({ran}): kfp.local evaluates it now; update the README")


def slurm_properties():
    # A directory that exists on the suite's node (the example's /scratch/bridge is a site's).
    return json.dumps({"partition": "debug", "nodes": 1, "time_limit": 30, "current_working_directory": "/tmp"})


def readme_exec(code, namespace):
    """Runs README code from the repository's root, as a user would; returns what it printed."""
    import io
    out, cwd = io.StringIO(), os.getcwd()
    os.chdir(ROOT)
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(code, "README.md", "exec"), namespace)
    finally:
        os.chdir(cwd)
    return out.getvalue()


# The README's snippets, run as written but for the places it names: the
# slurm example against the suite's Slurm 22.05 with the credentials mounted
# and the host's network, then the Python branch on a FAILED job's status
# (what works where kfp.local skips a dsl.If, 3b).

@check("examples/slurm/kfp_pipeline.py as the README runs it, on the suite's Slurm 22.05 over REST: DONE, COMPLETED")
def _():
    url, creds = env("BRIDGE_TEST_SLURM_URL", "BRIDGE_TEST_SLURM_CREDS")
    root, state = os.path.join(WORK, "readme-slurm"), new_root("readme-slurm-state")
    code = doc_python('load("examples/slurm/kfp_pipeline.py")')
    for placeholder, value in (('"/home/you/slurm-credentials"', repr(creds)), ('"http://127.0.0.1:6820"', repr(url)),
                               ('"kfp-root"', repr(root)), ('"kfp-state"', repr(state))):
        require(placeholder in code, f"the README's slurm snippet has no {placeholder}")
        code = code.replace(placeholder, value)
    ran.add("examples/slurm/kfp_pipeline.py")  # as the README's snippet loads it
    readme_exec(code, {})
    [out] = outputs_of(root)
    require_done(out, "the Slurm job")
    require(out["job_id"].isdigit() and out["backend_state"] == "COMPLETED", f"the Slurm job's outputs {out}")
    require_slurm_completed(url, creds, "v0.0.38", out["job_id"])
    require(not world_writable(root), f"world-writable under the pipeline root: {world_writable(root)}")
    left = [f for _, _, files in os.walk(state) for f in files]
    require(os.path.isdir(os.path.join(state, "bridge-runner")) and not left,
            f"the state directory has {left or 'no bridge-runner directory'}: the record was not kept there, or cleanup left it")


@check("the README's Python branch on status sees the FAILED job kfp.local's dsl.If would skip")
def _():
    # kfp_local: examples/kfp-local's module, as the slurm snippet loads it.
    code = doc_python("kfp_local.run(").replace('"kfp-root"', repr(os.path.join(WORK, "readme-branch")))
    printed = readme_exec(code, {"kfp_local": example})
    require(" ended FAILED: the job exited 3" in printed, f"the README's branch printed {printed!r}")


@check("examples/retry/kfp_pipeline.py on the suite's Slurm 24.11 over REST: DONE in attempt 1")
def _():
    url, creds = env("BRIDGE_TEST_SLURM2411_URL", "BRIDGE_TEST_SLURM2411_CREDS")
    _, [out] = run_example("retry", "retry", {"/credentials": creds}, resource_url=url)
    require_done(out, "the Slurm job")
    require(out["attempt"] == "1" and out["backend_state"] == "COMPLETED", f"the Slurm job's outputs {out}")
    require_slurm_completed(url, creds, "v0.0.40", out["job_id"])


@check("examples/array/kfp_pipeline.py on the suite's Slurm 22.05: 100 tasks DONE, no retry")
def _():
    url, creds = env("BRIDGE_TEST_SLURM_URL", "BRIDGE_TEST_SLURM_CREDS")
    _, outs = run_example("array", "array", {"/credentials": creds}, resource_url=url)
    require(len(outs) == 1, f"{len(outs)} bridge-job tasks ran, want the array alone (nothing failed to retry)")
    require_done(outs[0], "the array")
    require(outs[0]["array_counts"] == "DONE=100" and outs[0]["array_failed"] == "", f"the array's outputs {outs[0]}")


@check("examples/array/kfp_pipeline.py past Slurm 22.05's MaxArraySize (990-1009, chunks of 10): two native arrays, 20 tasks DONE")
def _():
    url, creds = env("BRIDGE_TEST_SLURM_URL", "BRIDGE_TEST_SLURM_CREDS")
    _, outs = run_example("array", "array-split", {"/credentials": creds}, resource_url=url, array="990-1009%10/10")
    require(len(outs) == 1, f"{len(outs)} bridge-job tasks ran, want the array alone (nothing failed to retry)")
    require_done(outs[0], "the split array")
    require(outs[0]["array_counts"] == "DONE=20" and outs[0]["array_failed"] == "", f"the split array's outputs {outs[0]}")
    chunks = outs[0]["job_id"].split("+")
    # Indexes past the limit run shifted (the wrapper adds the chunk's
    # offset back): without /10 the 20 tasks would be one array at @990.
    require([c.partition("@")[2] for c in chunks] == ["990", "1000"], f"job_id {outs[0]['job_id']!r}, want two chunks, from indexes 990 and 1000")


@check("examples/htcondor/kfp_pipeline.py on the suite's HTCondor over SSH: DONE, exit code 0")
def _():
    url, creds = env("BRIDGE_TEST_CONDOR_SSH_URL", "BRIDGE_TEST_CONDOR_SSH_CREDS")
    _, [out] = run_example("htcondor", "htcondor", {"/credentials": creds}, resource_url=url)
    require_done(out, "the HTCondor job")
    require(out["job_exit_code"] == "0", f"the HTCondor job's outputs {out}")


@check("examples/ray/kfp_pipeline.py on the suite's Ray: DONE")
def _():
    url, creds = env("BRIDGE_TEST_RAY_URL", "BRIDGE_TEST_RAY_CREDS_DIR")
    # runtime_env's pip needs a package index; the suite has none.
    _, [out] = run_example("ray", "ray", {"/credentials": creds}, resource_url=url,
                           job_properties=json.dumps({"entrypoint_num_cpus": 1}))
    require_done(out, "the Ray job")
    require(out["backend_state"] == "SUCCEEDED", f"the Ray job's outputs {out}")


@check("examples/placement/kfp_pipeline.py on the suite's Slurm 22.05 (hpc-a) and 24.11 (hpc-b): DONE, report says where")
def _():
    url_a, creds_a, url_b, creds_b = env("BRIDGE_TEST_SLURM_URL", "BRIDGE_TEST_SLURM_CREDS",
                                         "BRIDGE_TEST_SLURM2411_URL", "BRIDGE_TEST_SLURM2411_CREDS")
    # The site's values: the clusters' URLs and partitions that exist on the suite's Slurms.
    targets = json.loads(load("examples/placement/kfp_pipeline.py", "placement_targets").TARGETS)
    targets[0]["jobproperties"]["partition"] = "short"
    targets[1]["resourceURL"], targets[1]["jobproperties"]["partition"] = url_b, "debug"
    mounts = {"/credentials": creds_a, targets[1]["credentials"]: creds_b}
    root, [out] = run_example("placement", "placement", mounts, resource_url=url_a, targets=json.dumps(targets))
    require_done(out, "the placed job")
    require(out["target"] in ("hpc-a", "hpc-b"), f"target {out['target']!r}, want hpc-a or hpc-b ({out})")
    [said] = outputs_of(root, "report", "ran_on")
    require(said["ran_on"] == out["target"], f"report says {said['ran_on']!r}, the job's target is {out['target']!r}")
    # The job is the chosen cluster's, in that target's partition.
    url, creds, version, partition = {"hpc-a": (url_a, creds_a, "v0.0.38", "short"),
                                      "hpc-b": (url_b, creds_b, "v0.0.40", "debug")}[out["target"]]
    job = require_slurm_completed(url, creds, version, out["job_id"])
    require(job["partition"] == partition, f"{out['target']}'s job {out['job_id']} ran in {job['partition']!r}, want {partition!r}")



def slurm_send(url, creds, method, path, body=None):
    """One request with a JSON body to a slurmrestd, as slurm_get; the answer's JSON."""
    read = lambda name: open(os.path.join(creds, name)).read().strip()  # noqa: E731
    req = urllib.request.Request(url + path, method=method, data=None if body is None else json.dumps(body).encode(),
                                 headers={"X-SLURM-USER-NAME": read("username"), "X-SLURM-USER-TOKEN": read("token"),
                                          "Content-Type": "application/json"})
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(req, timeout=30) as r:
        return json.load(r)


@contextlib.contextmanager
def slurm_sleepers(url, creds, version, name, partition, n, hold=False):
    """n one-CPU jobs of ten minutes' sleep in partition (held, or running
    within two minutes), cancelled on the way out; yields their ids."""
    limit = 10 if version == "v0.0.38" else {"set": True, "number": 10}
    env = {"PATH": "/bin:/usr/bin"} if version == "v0.0.38" else ["PATH=/bin:/usr/bin"]
    ids = []
    try:
        for i in range(n):
            job = {"name": f"{name}-{i}", "partition": partition, "time_limit": limit, "cpus_per_task": 1,
                   "current_working_directory": "/tmp", "environment": env, "hold": hold}
            ids.append(str(slurm_send(url, creds, "POST", f"/slurm/{version}/job/submit",
                                      {"script": "#!/bin/sh\nsleep 600\n", "job": job})["job_id"]))
        deadline = time.monotonic() + 120
        while not hold and not all(slurm_state(url, creds, version, i) == "RUNNING" for i in ids):
            require(time.monotonic() < deadline, f"{name}: Slurm jobs {ids} not RUNNING within 2 min")
            time.sleep(0.5)
        yield ids
    finally:
        for i in ids:
            with contextlib.suppress(Exception):
                slurm_send(url, creds, "DELETE", f"/slurm/{version}/job/{i}")


def slurm_state(url, creds, version, job_id):
    """A job's state as one word (v0.0.38 writes a string, later a list)."""
    [job] = slurm_get(url, creds, f"/slurm/{version}/job/{job_id}")["jobs"]
    state = job["job_state"]
    return state if isinstance(state, str) else state[0]


def follow_record(state, when_placed):
    """A thread reading the records of the state directory state every half
    second: when_placed() once one names a placement; .placement and .moves
    are the last status.placement and status.moves seen (cleanup deletes the
    record at the end)."""
    import threading

    class Follower(threading.Thread):
        placement, moves, stop = None, [], threading.Event()

        def run(self):
            placed = False
            while not self.stop.wait(0.5):
                for d, _, files in os.walk(state):
                    for f in files:
                        if not f.endswith("-bridge-cm.json"):
                            continue
                        with contextlib.suppress(OSError, ValueError):
                            data = json.load(open(os.path.join(d, f))).get("data", {})
                            if data.get("status.placement"):
                                self.placement = json.loads(data["status.placement"])
                            if data.get("status.placement") and not placed:
                                placed = True
                                when_placed()
                            if data.get("status.moves"):
                                self.moves = json.loads(data["status.moves"])
    t = Follower(daemon=True)
    t.start()
    return t


@check("examples/replace/kfp_pipeline.py: placed on a filled Slurm 22.05 (hpc-a), moved after replace_after to 24.11 (hpc-b), DONE there; the job left on hpc-a never ran")
def _():
    url_a, creds_a, url_b, creds_b = env("BRIDGE_TEST_SLURM_URL", "BRIDGE_TEST_SLURM_CREDS",
                                         "BRIDGE_TEST_SLURM2411_URL", "BRIDGE_TEST_SLURM2411_CREDS")
    targets = json.loads(load("examples/replace/kfp_pipeline.py", "replace_targets").TARGETS)
    targets[0]["jobproperties"]["partition"] = "short"
    targets[1]["resourceURL"], targets[1]["jobproperties"]["partition"] = url_b, "debug"
    mounts = {"/credentials": creds_a, targets[1]["credentials"]: creds_b}
    # hpc-a's short (two CPUs) busy with two sleepers, and a held job waiting
    # in hpc-b's debug, so that neither starts the job now: `ordered` places
    # it on hpc-a. Once placed, the held job goes: hpc-b would start it now.
    with slurm_sleepers(url_a, creds_a, "v0.0.38", "kfp-replace-filler", "short", 2), \
         slurm_sleepers(url_b, creds_b, "v0.0.40", "kfp-replace-held", "debug", 1, hold=True) as [held]:
        follower = follow_record(os.path.join(WORK, "replace-state"),
                                 lambda: slurm_send(url_b, creds_b, "DELETE", f"/slurm/v0.0.40/job/{held}"))
        try:
            root, [out] = run_example("replace", "replace", mounts, resource_url=url_a, targets=json.dumps(targets),
                                      replace_after="10s")
        finally:
            follower.stop.set()
            follower.join()
    require_done(out, "the moved job")
    require(out["target"] == "hpc-b", f"target {out['target']!r}, want hpc-b ({out})")
    [said] = outputs_of(root, "report", "ran_on")
    require(said["ran_on"] == "hpc-b", f"report says {said['ran_on']!r}, want hpc-b")
    job = require_slurm_completed(url_b, creds_b, "v0.0.40", out["job_id"])
    require(job["partition"] == "debug", f"hpc-b's job {out['job_id']} ran in {job['partition']!r}, want debug")
    moves = follower.moves
    require(len(moves) == 1 and moves[0]["target"] == "hpc-a" and moves[0]["to"] == "hpc-b",
            f"the record's status.moves {moves}, want one move from hpc-a to hpc-b")
    [left] = slurm_get(url_a, creds_a, f"/slurm/v0.0.38/job/{moves[0]['id']}")["jobs"]
    require(left["job_state"] == "CANCELLED" and left["start_time"] == left["end_time"],
            f"hpc-a's job {moves[0]['id']} is {left['job_state']} (start {left['start_time']}, end {left['end_time']}), want CANCELLED, never started")


@check("examples/spread/kfp_pipeline.py: 8 tasks spread over Slurm 22.05 (hpc-a) and 24.11 (hpc-b) by what each can start now, one native array on each, DONE=8")
def _():
    url_a, creds_a, url_b, creds_b = env("BRIDGE_TEST_SLURM_URL", "BRIDGE_TEST_SLURM_CREDS",
                                         "BRIDGE_TEST_SLURM2411_URL", "BRIDGE_TEST_SLURM2411_CREDS")
    targets = json.loads(load("examples/spread/kfp_pipeline.py", "spread_targets").TARGETS)
    # Partition short on both (at most two CPUs each): when both can start
    # a task now, the shares are within 1:2 of each other, so each gets some.
    targets[0]["jobproperties"]["partition"] = "short"
    targets[1]["resourceURL"], targets[1]["jobproperties"]["partition"] = url_b, "short"
    mounts = {"/credentials": creds_a, targets[1]["credentials"]: creds_b}
    follower = follow_record(os.path.join(WORK, "spread-state"), lambda: None)
    try:
        root, [out] = run_example("spread", "spread", mounts, resource_url=url_a, targets=json.dumps(targets), array="0-7")
    finally:
        follower.stop.set()
        follower.join()
    require_done(out, "the spread array")
    require(out["array_counts"] == "DONE=8" and out["array_failed"] == "", f"the spread array's outputs {out}")
    placed = follower.placement
    require(placed and placed["policy"] == "spread", f"the record's status.placement {placed}, want the spread policy's")
    shares = placed.get("shares") or [{"target": placed["target"], "tasks": 8}]
    # Both could start a task now: each must get a share (the issue's "in proportion to what each can start now").
    free = {p["target"]: p.get("freeCPUs", 0) for p in placed["probes"]}
    if all(free.get(t, 0) > 0 for t in ("hpc-a", "hpc-b")):
        require(len(shares) == 2, f"both clusters could start tasks ({free}) and the shares are {shares}")
    require(out["target"] == ",".join(s["target"] for s in shares), f"target {out['target']!r}, the record's shares {shares}")
    [said] = outputs_of(root, "report", "ran_on")
    require(said["ran_on"] == out["target"], f"report says {said['ran_on']!r}, the array's target is {out['target']!r}")
    # Each share ran on its own cluster as one native array in short, every task COMPLETED.
    ids = {}
    for chunk in out["job_id"].split("+"):
        target, _, raw = chunk.partition("@")[0].rpartition(":")
        ids[target or placed["target"]] = raw
    require(sorted(ids) == sorted(s["target"] for s in shares), f"job_id {out['job_id']!r}, the record's shares {shares}")
    where = {"hpc-a": (url_a, creds_a, "v0.0.38"), "hpc-b": (url_b, creds_b, "v0.0.40")}
    for s in shares:
        url, creds, version = where[s["target"]]
        jobs = slurm_get(url, creds, f"/slurm/{version}/job/{ids[s['target']]}")["jobs"]
        states = sorted({str(j["job_state"]) for j in jobs})
        parts = sorted({j["partition"] for j in jobs})
        require(len(jobs) == s["tasks"] and states in (["COMPLETED"], ["['COMPLETED']"]) and parts == ["short"],
                f"{s['target']}'s array {ids[s['target']]}: {len(jobs)} tasks {states} in {parts}, want {s['tasks']} COMPLETED in short")
    say(f"     spread: job_id {out['job_id']}, shares {[(s['target'], s['tasks']) for s in shares]}, free CPUs {free}")


@contextlib.contextmanager
def fake(which):
    """hack/fakes' fake `which`, on loopback: its URL and credentials dir."""
    [fakes] = env("BRIDGE_FAKES")
    creds = os.path.join(WORK, f"{which}-credentials")
    p = subprocess.Popen([fakes, which, "--addr", "127.0.0.1:0", "--dir", creds, "--run-for", "1s"],
                         stdout=subprocess.PIPE, text=True)
    try:
        found = {}
        for line in p.stdout:
            if line.startswith("export "):
                k, _, v = line[len("export "):].strip().partition("=")
                found[k] = v
            if "BRIDGE_FAKE_CREDENTIALS" in found:
                break
        require("BRIDGE_FAKE_URL" in found, f"the {which} fake printed no URL (exit {p.poll()})")
        yield found["BRIDGE_FAKE_URL"], found["BRIDGE_FAKE_CREDENTIALS"]
    finally:
        p.terminate()
        p.wait(timeout=30)


@check("examples/lsf/kfp_pipeline.py on the LSF fake (hack/fakes lsf): DONE")
def _():
    with fake("lsf") as (url, creds):
        _, [out] = run_example("lsf", "lsf", {"/credentials": creds}, resource_url=url)
    require_done(out, "the LSF job")


def s3_request(method, path, endpoint, access, secret):
    """One AWS SigV4-signed, path-style request to the suite's S3 (plain
    HTTP on loopback, no proxy); returns the status code."""
    amz = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    scope = f"{amz[:8]}/us-east-1/s3/aws4_request"
    empty = hashlib.sha256(b"").hexdigest()
    headers = {"host": endpoint, "x-amz-content-sha256": empty, "x-amz-date": amz}
    signed = ";".join(sorted(headers))
    canonical = "\n".join([method, path, "", *(f"{k}:{headers[k]}" for k in sorted(headers)), "", signed, empty])
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key = ("AWS4" + secret).encode()
    for part in scope.split("/"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    sig = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    headers["authorization"] = f"AWS4-HMAC-SHA256 Credential={access}/{scope}, SignedHeaders={signed}, Signature={sig}"
    req = urllib.request.Request(f"http://{endpoint}{path}", method=method, headers=headers)
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(req, timeout=30) as r:
        return r.status


@check("examples/quantum/kfp_pipeline.py on the Quantum fake (hack/fakes quantum): DONE, results in the suite's S3")
def _():
    endpoint, access, secret, s3creds = env("BRIDGE_TEST_S3_ENDPOINT", "BRIDGE_TEST_S3_ACCESS_KEY",
                                            "BRIDGE_TEST_S3_SECRET_KEY", "BRIDGE_TEST_S3_CREDS_DIR")
    bucket = "kfp-local-quantum-" + os.urandom(4).hex()
    s3_request("PUT", f"/{bucket}", endpoint, access, secret)
    keys = []
    try:
        with fake("quantum") as (url, creds):
            _, [out] = run_example("quantum", "quantum", {"/credentials": creds, "/s3credentials": s3creds},
                                   resource_url=url, s3_endpoint=endpoint, s3_secure=False, s3_upload_bucket=bucket)
        require_done(out, "the Quantum job")
        locations = out["outputs"].split()
        require(len(locations) >= 2, f"outputs {out['outputs']!r}: want results and metrics in {bucket}")
        for loc in locations:
            b, _, key = loc.removeprefix("s3://").partition("/")
            require(b == bucket, f"output {loc} is not in {bucket}")
            keys.append(key)
            require(s3_request("HEAD", f"/{bucket}/{key}", endpoint, access, secret) == 200, f"{loc} is not in S3")
    finally:
        # The suite's S3 is shared: leave no bucket behind (best effort).
        with contextlib.suppress(OSError):
            for key in keys:
                s3_request("DELETE", f"/{bucket}/{key}", endpoint, access, secret)
            s3_request("DELETE", f"/{bucket}", endpoint, access, secret)

# 4. One component called alone, as another user than the caller and the
#    image (DockerRunner(user=...)): its home is not its own, so the record
#    goes to $TMPDIR.
@check("bridge-job alone as uid 4242 (DockerRunner(user=...)): state in $TMPDIR, outputs read back")
def _():
    bridge_job = components.load_component_from_file(os.path.join(ROOT, "components", "bridge-job.yaml"))
    root = os.path.join(WORK, "other-user")
    os.makedirs(root, mode=0o700)
    os.chown(root, 4242, 4242)
    local.init(runner=local.DockerRunner(user="4242:4242"), pipeline_root=root)
    task = bridge_job(job_name="kfp-local-other-user", backend="local", script="echo hi\n", update_interval=1)
    require(task.outputs["status"] == "DONE", f"status {task.outputs['status']!r} ({task.outputs})")
    [d] = [d for d, _, _ in os.walk(root) if os.path.basename(d) == "bridge-job"]
    st = os.stat(os.path.join(d, "job_id"))
    require(st.st_uid == 4242, f"job_id written by uid {st.st_uid}, want 4242")


# 5. Every shipped pipeline ran here (a new one without a check fails; the
#    ledger of examples/run_test.go names this file for each).
@check("every examples/*/kfp_pipeline.py ran under kfp.local")
def _():
    import glob
    shipped = {os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "examples", "*", "kfp_pipeline.py"))}
    skipped = [n for n, e in results if isinstance(e, Skip)]
    require(shipped, "no examples/*/kfp_pipeline.py found")
    if os.environ.get("KFP_LOCAL_ONLY") or skipped:
        raise Skip("some checks were not run")
    require(shipped <= ran, f"no check runs {sorted(shipped - ran)}: add one to hack/kfp_local.py")


passed = sum(1 for _, e in results if e is None)
skipped = sum(1 for _, e in results if isinstance(e, Skip))
failed = len(results) - passed - skipped
say(f"kfp-local: {passed} passed, {failed} failed, {skipped} skipped")
if failed or not passed:
    sys.exit(1)
