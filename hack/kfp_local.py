"""The kfp.local half of hack/kfp-local.sh: runs pipelines made of the shipped
components with the real, pinned KFP SDK's DockerRunner against the Docker
daemon that DOCKER_HOST names, and checks what they return and write.
Usage: kfp_local.py ROOT WORKDIR. Prints "kfp-local: N passed, M failed"."""
import importlib.util
import os
import sys
import traceback

from kfp import components, local

ROOT = os.path.abspath(sys.argv[1])
WORK = os.path.abspath(sys.argv[2])
IMAGE_UID = 65532  # the image's user (Dockerfile: USER 65532:65532)
results = []


def check(name):
    def wrap(fn):
        try:
            fn()
            results.append((name, None))
            print(f"ok   {name}", flush=True)
        except Exception as e:  # noqa: BLE001 - every failure is reported
            results.append((name, e))
            print(f"FAIL {name}: {e}", flush=True)
            traceback.print_exc(limit=4)
        return fn
    return wrap


def require(cond, msg):
    if not cond:
        raise AssertionError(msg)


def load(rel, name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, rel))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def task_dirs(root, task):
    """The task directories kfp.local made for task under root."""
    return [os.path.join(root, run, task) for run in sorted(os.listdir(root))
            if os.path.isdir(os.path.join(root, run, task))]


example = load("examples/kfp-local/kfp_pipeline.py", "kfp_local_example")


# 1. The example as a user runs it, as the image's non-root user: the
#    pipeline's outputs come back, the files are the image user's, in
#    directories the pipeline root's owner can remove.
@check("examples/kfp-local: a DONE job's outputs read back, written by uid 65532")
def _():
    root = example.open_pipeline_root(os.path.join(WORK, "example"))
    local.init(runner=local.DockerRunner(), pipeline_root=root)
    out = example.pipeline().outputs
    require(out["status"] == "DONE", f"status {out['status']!r}, want DONE ({out})")
    require(out["job_exit_code"] == "0", f"job_exit_code {out['job_exit_code']!r}")
    require(out["message"] == "the job exited 0", f"message {out['message']!r}")
    require(out["job_id"].startswith("br-"), f"job_id {out['job_id']!r}")
    [d] = task_dirs(root, "bridge-job")
    st = os.stat(os.path.join(d, "status"))
    require(st.st_uid == IMAGE_UID, f"status written by uid {st.st_uid}, want the image's {IMAGE_UID}")
    with open(os.path.join(d, "status")) as f:
        require(f.read() == "DONE", "the status file is not DONE without a newline")
    for p in (os.path.dirname(d), d):
        mode = os.stat(p).st_mode & 0o777
        require(mode == 0o777, f"{p} is {oct(mode)}: the pipeline root's owner could not remove it")


@check("examples/kfp-local: a failing job is FAILED with its exit code (exit_zero)")
def _():
    root = example.open_pipeline_root(os.path.join(WORK, "failing"))
    local.init(runner=local.DockerRunner(), pipeline_root=root)
    out = example.pipeline(script="echo about to fail >&2; exit 3").outputs
    require(out["status"] == "FAILED", f"status {out['status']!r}, want FAILED ({out})")
    require(out["job_exit_code"] == "3", f"job_exit_code {out['job_exit_code']!r}, want 3")
    require(len(task_dirs(root, "bridge-job")) == 1, "no bridge-job task directory")


# 1b. The README's command for it, run as the README gives it (the pipeline
#     root moved into the work directory): one JSON line of outputs.
@check("the README's `python examples/kfp-local/kfp_pipeline.py ROOT` prints the job's outputs")
def _():
    import json
    import re
    import subprocess
    with open(os.path.join(ROOT, "README.md")) as f:
        m = re.search(r"^python (examples/kfp-local/kfp_pipeline\.py) (\S+)$", f.read(), re.M)
    require(m is not None, "the README gives no `python examples/kfp-local/kfp_pipeline.py ROOT` command")
    out = subprocess.run([sys.executable, m.group(1), os.path.join(WORK, "readme")], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    require(out.returncode == 0, f"exit {out.returncode}: {out.stderr[-2000:]}")
    got = json.loads(out.stdout.strip().splitlines()[-1])
    require(got.get("status") == "DONE" and got.get("job_exit_code") == "0", f"the command printed {got}")


# 2. The cluster example, unchanged (dsl.ExitHandler, kfp-kubernetes Secret
#    mounts, which the local runner leaves out): it succeeds, and its job's
#    outputs are in the pipeline root.
@check("examples/local/kfp_pipeline.py (ExitHandler, Secret mounts) runs unchanged under kfp.local")
def _():
    mod = load("examples/local/kfp_pipeline.py", "kfp_cluster_example")
    root = example.open_pipeline_root(os.path.join(WORK, "cluster-example"))
    local.init(runner=local.DockerRunner(), pipeline_root=root)
    mod.pipeline()
    [d] = task_dirs(root, "bridge-job")
    with open(os.path.join(d, "status")) as f:
        require(f.read() == "DONE", "the job is not DONE")


# 3. One component called alone, the container run as another user than the
#    image's (DockerRunner(user=...), the other way a Linux user gets outputs
#    they own): its home is not its own, so the record goes to $TMPDIR.
@check("bridge-job alone as uid 4242 (DockerRunner(user=...)): state in $TMPDIR, outputs read back")
def _():
    bridge_job = components.load_component_from_file(os.path.join(ROOT, "components", "bridge-job.yaml"))
    root = example.open_pipeline_root(os.path.join(WORK, "other-user"))
    local.init(runner=local.DockerRunner(user="4242:4242"), pipeline_root=root)
    task = bridge_job(job_name="kfp-local-other-user", backend="local", script="echo hi\n", update_interval=1)
    require(task.outputs["status"] == "DONE", f"status {task.outputs['status']!r} ({task.outputs})")
    [d] = task_dirs(root, "bridge-job")
    st = os.stat(os.path.join(d, "job_id"))
    require(st.st_uid == 4242, f"job_id written by uid {st.st_uid}, want 4242")


passed = sum(1 for _, e in results if e is None)
failed = len(results) - passed
print(f"kfp-local: {passed} passed, {failed} failed")
if failed or not results:
    sys.exit(1)
