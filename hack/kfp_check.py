"""The KFP half of the proof that users' building blocks work: run by
hack/kfp-check.sh with the real, pinned kfp SDK. Usage: kfp_check.py ROOT."""
import glob
import importlib.util
import os
import sys
import tempfile
import traceback

import yaml
from kfp import compiler, components

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
results = []  # (name, error or None)


def check(name):
    def wrap(fn):
        try:
            fn()
            results.append((name, None))
            print(f"ok   {name}")
        except Exception as e:  # noqa: BLE001 - every failure is reported
            results.append((name, e))
            print(f"FAIL {name}: {e}")
            traceback.print_exc(limit=3)
        return fn
    return wrap


def require(cond, msg):
    if not cond:
        raise AssertionError(msg)


# 1. Every component loads, as a container component whose inputs are all
#    parameters (a missing or unknown type would make an artifact).
for path in sorted(glob.glob(os.path.join(ROOT, "components", "*.yaml"))):
    rel = os.path.relpath(path, ROOT)

    @check(f"load {rel}")
    def _(path=path):
        comp = components.load_component_from_file(path)
        spec = comp.component_spec
        c = spec.implementation.container
        require(c is not None, "not a container component")
        require(c.command[0] == "/bridge-runner", f"command is {c.command}")
        require("job_name" in spec.inputs, "no job_name input")
        for name, inp in spec.inputs.items():
            require(inp.type == "String", f"input {name} has type {inp.type!r}, want String (a parameter)")
        for name, out in (spec.outputs or {}).items():
            require(out.type == "String", f"output {name} has type {out.type!r}, want String (a parameter)")
        args = " ".join(str(a) for a in c.args)
        require("--job-name" in args and "{{$.inputs.parameters['job_name']}}" in args,
                "--job-name is not given the job_name input")


# 2. Every example pipeline compiles, and the compiled IR runs bridge-runner
#    with the credentials Secret mounted where the binary reads it.
for path in sorted(glob.glob(os.path.join(ROOT, "examples", "*", "kfp_pipeline.py"))):
    backend = os.path.basename(os.path.dirname(path))
    rel = os.path.relpath(path, ROOT)

    @check(f"compile {rel}")
    def _(path=path, backend=backend):
        spec = importlib.util.spec_from_file_location(f"example_{backend}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "pipeline.yaml")
            compiler.Compiler().compile(mod.pipeline, out)
            with open(out) as f:
                docs = list(yaml.safe_load_all(f))
        ir = docs[0]
        platform = docs[1]["platforms"]["kubernetes"]["deploymentSpec"]["executors"] if len(docs) > 1 else {}
        executors = ir["deploymentSpec"]["executors"]
        require(executors, "no executors")
        commands = set()
        for name, ex in executors.items():
            c = ex["container"]
            require(c["command"][0] == "/bridge-runner", f"{name}: command {c['command']}")
            commands.add(c["command"][1])
            args = c["args"]
            i = args.index("--job-name")
            require(args[i + 1] == "{{$.inputs.parameters['job_name']}}", f"{name}: --job-name is {args[i + 1]}")
            i = args.index("--credentials-dir")
            mounts = {m["mountPath"] for m in platform.get(name, {}).get("secretAsVolume", [])}
            require(args[i + 1] in mounts, f"{name}: no Secret is mounted at {args[i + 1]} (mounts: {sorted(mounts)})")
        require(commands == {"invoke", "cleanup"}, f"the pipeline runs {sorted(commands)}, want invoke and cleanup")
        tasks = {}
        def walk(dag):
            for t, task in dag.get("tasks", {}).items():
                tasks[t] = task
        walk(ir["root"]["dag"])
        for comp in ir["components"].values():
            if "dag" in comp:
                walk(comp["dag"])
        job = tasks.get("bridge-job")
        require(job is not None, f"no bridge-job task (tasks: {sorted(tasks)})")
        require(not job.get("cachingOptions", {}).get("enableCache"), "bridge-job is cached: a cached step would not run the job")
        backend_value = job["inputs"]["parameters"]["backend"]["runtimeValue"]["constant"]
        require(backend_value == backend, f"backend is {backend_value!r}, want {backend!r}")
        s3 = job["inputs"]["parameters"].get("s3_endpoint", {}).get("runtimeValue", {}).get("constant", "")
        if s3:
            mounts = {m["mountPath"] for m in platform.get(job["componentRef"]["name"].replace("comp-", "exec-", 1), {}).get("secretAsVolume", [])}
            require("/s3credentials" in mounts, f"the job uses S3 ({s3}) but no Secret is mounted at /s3credentials")
        exit_tasks = [t for t, task in tasks.items() if task.get("triggerPolicy", {}).get("strategy") == "ALL_UPSTREAM_TASKS_COMPLETED"]
        require(exit_tasks == ["bridge-cleanup"], f"the exit handler tasks are {exit_tasks}, want [bridge-cleanup]")


passed = sum(1 for _, e in results if e is None)
failed = len(results) - passed
print(f"kfp-check: {passed} passed, {failed} failed")
if failed or not results:
    sys.exit(1)
