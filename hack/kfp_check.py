"""The KFP half of the proof that users' building blocks work: run by
hack/kfp-check.sh with the real, pinned kfp SDK. Usage: kfp_check.py ROOT."""
import glob
import importlib.util
import os
import re
import subprocess
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


# The inputs that are not strings, so that pipelines pass Python values
# (record.Field.Type and record.InvokeInputs in Go say the same).
TYPED = {"update_interval": "Integer", "s3_secure": "Boolean", "s3_create_bucket": "Boolean", "exit_zero": "Boolean"}

# 1. Every component loads, as a container component whose inputs are all
#    parameters of the declared types (a missing or unknown type would make
#    an artifact), and says how to turn caching off.
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
            want = TYPED.get(name, "String")
            require(inp.type == want, f"input {name} has type {inp.type!r}, want {want} (a parameter)")
        require("set_caching_options(False)" in spec.description, "the description does not say how to turn caching off")
        for name, out in (spec.outputs or {}).items():
            require(out.type == "String", f"output {name} has type {out.type!r}, want String (a parameter)")
        args = " ".join(str(a) for a in c.args)
        require("--job-name" in args and "{{$.inputs.parameters['job_name']}}" in args,
                "--job-name is not given the job_name input")


def compile_example(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "pipeline.yaml")
        compiler.Compiler().compile(mod.pipeline, out)
        with open(out) as f:
            return list(yaml.safe_load_all(f))


def all_tasks(ir):
    tasks = {}
    for dag in [ir["root"]["dag"]] + [c["dag"] for c in ir["components"].values() if "dag" in c]:
        tasks.update(dag.get("tasks", {}))
    return tasks


# 2. Every backend's example pipeline compiles, and the compiled IR runs
#    bridge-runner with the credentials Secret mounted where the binary reads it.
for path in sorted(glob.glob(os.path.join(ROOT, "examples", "*", "kfp_pipeline.py"))):
    backend = os.path.basename(os.path.dirname(path))
    if not os.path.exists(os.path.join(os.path.dirname(path), "job.yaml")):
        continue  # not a backend's example (see 3.)
    rel = os.path.relpath(path, ROOT)

    @check(f"compile {rel}")
    def _(path=path, backend=backend):
        docs = compile_example(path, f"example_{backend}")
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
        # A constant or a pipeline parameter (examples/quantum's, for kfp.local).
        s3 = job["inputs"]["parameters"].get("s3_endpoint")
        if s3:
            mounts = {m["mountPath"] for m in platform.get(job["componentRef"]["name"].replace("comp-", "exec-", 1), {}).get("secretAsVolume", [])}
            require("/s3credentials" in mounts, f"the job uses S3 ({s3}) but no Secret is mounted at /s3credentials")
        exit_tasks = [t for t, task in tasks.items() if task.get("triggerPolicy", {}).get("strategy") == "ALL_UPSTREAM_TASKS_COMPLETED"]
        require(exit_tasks == ["bridge-cleanup"], f"the exit handler tasks are {exit_tasks}, want [bridge-cleanup]")


# 3. The branching example: a pipeline that passes Python values (an int and
#    bools) to the typed inputs and branches on the job's status compiles,
#    with exit_zero on, caching off, and the branch conditioned on status.
@check("compile examples/branching/kfp_pipeline.py (typed arguments, dsl.If on status)")
def _():
    ir = compile_example(os.path.join(ROOT, "examples", "branching", "kfp_pipeline.py"), "example_branching")[0]
    tasks = all_tasks(ir)
    job = tasks.get("bridge-job")
    require(job is not None, f"no bridge-job task (tasks: {sorted(tasks)})")
    params = job["inputs"]["parameters"]
    const = lambda n: params[n]["runtimeValue"]["constant"]
    require(const("update_interval") == 5, f"update_interval is {const('update_interval')!r}, want the int 5")
    require(const("s3_secure") is False and const("exit_zero") is True,
            f"s3_secure {const('s3_secure')!r}, exit_zero {const('exit_zero')!r}: want the bools False, True")
    for name in ("bridge-job", "bridge-cleanup"):
        require(not tasks[name].get("cachingOptions", {}).get("enableCache"), f"{name} is cached")
    conds = [t["triggerPolicy"]["condition"] for t in tasks.values() if t.get("triggerPolicy", {}).get("condition")]
    require(any("status" in c and "DONE" in c for c in conds), f"no task is conditioned on the job's status (conditions: {conds})")


# 4. The kfp.local example (hack/kfp-local.sh runs it under Docker) compiles
#    for a cluster too: the job and its cleanup, caching off, its outputs the
#    pipeline's.
@check("compile examples/kfp-local/kfp_pipeline.py (pipeline outputs from the job)")
def _():
    ir = compile_example(os.path.join(ROOT, "examples", "kfp-local", "kfp_pipeline.py"), "example_kfp_local")[0]
    tasks = all_tasks(ir)
    require(set(tasks) == {"bridge-job", "bridge-cleanup"}, f"tasks {sorted(tasks)}")
    for name, task in tasks.items():
        require(not task.get("cachingOptions", {}).get("enableCache"), f"{name} is cached")
    outs = ir["root"]["dag"]["outputs"]["parameters"]
    require(set(outs) == {"status", "message", "job_id", "job_exit_code"}, f"pipeline outputs {sorted(outs)}")
    for name, o in outs.items():
        sel = o["valueFromParameter"]
        require(sel["producerSubtask"] == "bridge-job" and sel["outputParameterKey"] == name, f"output {name} comes from {sel}")


# 5. The loop example: dsl.ExitHandler inside dsl.ParallelFor does not
#    compile, so each item runs a sub-pipeline that holds the ExitHandler:
#    the loop iterates over that sub-pipeline, whose cleanup runs whatever
#    happens, and each item's job name carries the item.
@check("compile examples/loop/kfp_pipeline.py (ParallelFor over a sub-pipeline with an ExitHandler)")
def _():
    ir = compile_example(os.path.join(ROOT, "examples", "loop", "kfp_pipeline.py"), "example_loop")[0]
    comps = ir["components"]
    loops = [t for t in ir["root"]["dag"]["tasks"].values() if "parameterIterator" in t]
    require(len(loops) == 1, f"{len(loops)} loops in the root DAG, want 1")
    body = comps[loops[0]["componentRef"]["name"]]["dag"]["tasks"]
    require(len(body) == 1, f"the loop body has tasks {sorted(body)}, want the sub-pipeline alone")
    [(_, sub)] = body.items()
    # The sub-pipeline gets the item, and names the job after the run and it.
    ins = sub["inputs"]["parameters"]
    require("loop-item" in ins["item"].get("componentInputParameter", ""), f"the sub-pipeline gets {ins}: not the item")
    sub_dag = comps[sub["componentRef"]["name"]]["dag"]["tasks"]
    exits = [t for t, task in sub_dag.items() if task.get("triggerPolicy", {}).get("strategy") == "ALL_UPSTREAM_TASKS_COMPLETED"]
    require(exits == ["bridge-cleanup"], f"the sub-pipeline's exit tasks are {exits}, want [bridge-cleanup]")
    handler = [t for t in sub_dag.values() if t["componentRef"]["name"].startswith("comp-exit-handler")]
    require(len(handler) == 1, "the sub-pipeline has no exit handler group")
    inner = comps[handler[0]["componentRef"]["name"]]["dag"]["tasks"]
    require("bridge-job" in inner, f"the exit handler holds {sorted(inner)}, not the bridge job")
    name = inner["bridge-job"]["inputs"]["parameters"]["job_name"]["runtimeValue"]["constant"]
    require("{{$.pipeline_job_uuid}}-" in name and "item']}}" in name, f"the item's job name is {name!r}: not per item")


# 5b. The array example: the array is the pipeline's parameter, the array's
#     task exits 0 (exit_zero) so that its
#     outputs exist, and a retry runs, conditioned on array_failed, with the
#     first task's array_failed as its array, in a sub-pipeline with a
#     cleanup of its own.
@check("compile examples/array/kfp_pipeline.py (a retry of only the failed tasks)")
def _():
    ir = compile_example(os.path.join(ROOT, "examples", "array", "kfp_pipeline.py"), "example_array")[0]
    dags = [ir["root"]["dag"]] + [c["dag"] for c in ir["components"].values() if "dag" in c]
    every = [(name, task) for dag in dags for name, task in dag.get("tasks", {}).items()]
    # The array is the pipeline's own parameter (so that a user gives one
    # past the cluster's limit whole), by default 100 tasks, 10 at once.
    # (The retry's sub-pipeline names its own parameter array too: the
    # first task is the one with exit_zero.)
    first = [t for n, t in every if n == "bridge-job" and "exit_zero" in t["inputs"]["parameters"]
             and t["inputs"]["parameters"].get("array", {}).get("componentInputParameter") in ("array", "pipelinechannel--array")]
    require(len(first) == 1, "no bridge-job takes the pipeline's array parameter as its array")
    default = ir["root"]["inputDefinitions"]["parameters"].get("array", {}).get("defaultValue")
    require(default == "0-99%10", f"the pipeline's array defaults to {default!r}, want '0-99%10'")
    params = first[0]["inputs"]["parameters"]
    require(params["exit_zero"]["runtimeValue"]["constant"] is True, "exit_zero is not on: a FAILED array would have no outputs")
    conds = [t["triggerPolicy"]["condition"] for _, t in every if t.get("triggerPolicy", {}).get("condition")]
    require(any("array_failed" in c for c in conds), f"no task is conditioned on array_failed (conditions: {conds})")
    # The output reaches the retry through the condition's pipeline channel.
    channel = "pipelinechannel--bridge-job-array_failed"
    calls = [t for _, t in every if t.get("inputs", {}).get("parameters", {}).get("array", {}).get("componentInputParameter") == channel]
    require(len(calls) == 1, f"no task takes {channel} as its array")
    feeds = [t["inputs"]["parameters"][channel]["taskOutputParameter"] for _, t in every
             if "taskOutputParameter" in t.get("inputs", {}).get("parameters", {}).get(channel, {})]
    require(feeds and all(f.get("producerTask") == "bridge-job" and f.get("outputParameterKey") == "array_failed" for f in feeds),
            f"{channel} comes from {feeds}, not bridge-job's array_failed")
    retry = ir["components"][calls[0]["componentRef"]["name"]]["dag"]["tasks"]
    exits = [t for t, task in retry.items() if task.get("triggerPolicy", {}).get("strategy") == "ALL_UPSTREAM_TASKS_COMPLETED"]
    require(exits == ["bridge-cleanup"], f"the retry's exit tasks are {exits}, want its own cleanup")


# 5c. The placement example: one bridge-job with two targets, the second
#     naming its own credentials directory, which is mounted from its own
#     Secret in both the job's and the cleanup's pod; the target output is
#     read downstream.
@check("compile examples/placement/kfp_pipeline.py (two clusters, each with its own credentials)")
def _():
    import json
    docs = compile_example(os.path.join(ROOT, "examples", "placement", "kfp_pipeline.py"), "example_placement")
    ir, platform = docs[0], docs[1]["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    tasks = {}
    for dag in [ir["root"]["dag"]] + [c["dag"] for c in ir["components"].values() if "dag" in c]:
        tasks.update(dag.get("tasks", {}))
    params = tasks["bridge-job"]["inputs"]["parameters"]
    # targets: a pipeline parameter (the site's clusters) whose default is the example's.
    require("componentInputParameter" in params["targets"], f"targets is {params['targets']}, want the pipeline's parameter")
    targets = json.loads(ir["root"]["inputDefinitions"]["parameters"]["targets"]["defaultValue"])
    require([t["name"] for t in targets] == ["hpc-a", "hpc-b"], f"targets are {targets}")
    require(params["placement"]["runtimeValue"]["constant"] == "earliest-start", f"placement is {params['placement']}")
    for name in ("exec-bridge-job", "exec-bridge-cleanup"):
        mounts = {m["mountPath"] for m in platform.get(name, {}).get("secretAsVolume", [])}
        require({"/credentials", targets[1]["credentials"]} <= mounts, f"{name} mounts {sorted(mounts)}")
    feeds = [t["inputs"]["parameters"]["target"]["taskOutputParameter"] for n, t in tasks.items()
             if "taskOutputParameter" in t.get("inputs", {}).get("parameters", {}).get("target", {})]
    require(feeds and feeds[0]["producerTask"] == "bridge-job" and feeds[0]["outputParameterKey"] == "target",
            f"the target output feeds {feeds}")


# 5d. The re-placement example: the placement example's two clusters, each
#     with its own credentials in both the job's and the cleanup's pod, the
#     ordered policy, and replace_after a pipeline parameter fed to the job.
@check("compile examples/replace/kfp_pipeline.py (ordered placement, replace_after)")
def _():
    import json
    docs = compile_example(os.path.join(ROOT, "examples", "replace", "kfp_pipeline.py"), "example_replace")
    ir, platform = docs[0], docs[1]["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    tasks = {}
    for dag in [ir["root"]["dag"]] + [c["dag"] for c in ir["components"].values() if "dag" in c]:
        tasks.update(dag.get("tasks", {}))
    params = tasks["bridge-job"]["inputs"]["parameters"]
    pipeline_params = ir["root"]["inputDefinitions"]["parameters"]
    # Inside the exit handler's sub-DAG the parameter comes as pipelinechannel--replace_after.
    require(params["replace_after"].get("componentInputParameter", "").endswith("replace_after"),
            f"replace_after is {params['replace_after']}, want the pipeline's parameter")
    require(pipeline_params["replace_after"]["defaultValue"] == "15m", f"replace_after's default is {pipeline_params['replace_after']}")
    require(params["placement"]["runtimeValue"]["constant"] == "ordered", f"placement is {params['placement']}")
    targets = json.loads(pipeline_params["targets"]["defaultValue"])
    require([t["name"] for t in targets] == ["hpc-a", "hpc-b"], f"targets are {targets}")
    for name in ("exec-bridge-job", "exec-bridge-cleanup"):
        mounts = {m["mountPath"] for m in platform.get(name, {}).get("secretAsVolume", [])}
        require({"/credentials", targets[1]["credentials"]} <= mounts, f"{name} mounts {sorted(mounts)}")


# 5e. The spread example: the placement example's two clusters, each with
#     its own credentials in both the job's and the cleanup's pod, the
#     spread policy, and the array a pipeline parameter fed to the job; the
#     target and array_counts outputs are read downstream.
@check("compile examples/spread/kfp_pipeline.py (spread placement, the array a parameter)")
def _():
    import json
    docs = compile_example(os.path.join(ROOT, "examples", "spread", "kfp_pipeline.py"), "example_spread")
    ir, platform = docs[0], docs[1]["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    tasks = {}
    for dag in [ir["root"]["dag"]] + [c["dag"] for c in ir["components"].values() if "dag" in c]:
        tasks.update(dag.get("tasks", {}))
    params = tasks["bridge-job"]["inputs"]["parameters"]
    pipeline_params = ir["root"]["inputDefinitions"]["parameters"]
    require(params["placement"]["runtimeValue"]["constant"] == "spread", f"placement is {params['placement']}")
    # Inside the exit handler's sub-DAG the parameter comes as pipelinechannel--array.
    require(params["array"].get("componentInputParameter", "").endswith("array"), f"array is {params['array']}, want the pipeline's parameter")
    require(pipeline_params["array"]["defaultValue"] == "0-199", f"array's default is {pipeline_params['array']}")
    targets = json.loads(pipeline_params["targets"]["defaultValue"])
    require([t["name"] for t in targets] == ["hpc-a", "hpc-b"], f"targets are {targets}")
    for name in ("exec-bridge-job", "exec-bridge-cleanup"):
        mounts = {m["mountPath"] for m in platform.get(name, {}).get("secretAsVolume", [])}
        require({"/credentials", targets[1]["credentials"]} <= mounts, f"{name} mounts {sorted(mounts)}")
    read = {(f["producerTask"], f["outputParameterKey"]) for t in tasks.values()
            for p in t.get("inputs", {}).get("parameters", {}).values()
            for f in [p.get("taskOutputParameter", {})] if f}
    require({("bridge-job", "target"), ("bridge-job", "array_counts")} <= read, f"outputs read downstream: {sorted(read)}")


# 6. The README's compile commands (`python examples/<x>/kfp_pipeline.py
#    FILE.yaml`), run as a user runs them, from the top of the tree.
# (README.md and docs/, where the guides moved them.)
readme_text = ""
for path in [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True)):
    with open(path) as f:
        readme_text += f.read() + "\n"
readme_compiles = re.findall(r"`python (examples/[a-z0-9-]+/kfp_pipeline\.py) ([\w.-]+\.yaml)`", readme_text)
if not readme_compiles:
    results.append(("the README's compile commands", AssertionError("none found")))
for script, out_name in readme_compiles:
    @check(f"the README's `python {script} {out_name}`")
    def _(script=script, out_name=out_name):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, out_name)
            r = subprocess.run([sys.executable, script, out], cwd=ROOT, capture_output=True, text=True, timeout=300)
            require(r.returncode == 0, f"exit {r.returncode}: {r.stderr[-2000:]}")
            with open(out) as f:
                ir = list(yaml.safe_load_all(f))[0]
            require(ir["pipelineInfo"]["name"] and ir["deploymentSpec"]["executors"], "the compiled file has no pipeline")


passed = sum(1 for _, e in results if e is None)
failed = len(results) - passed
print(f"kfp-check: {passed} passed, {failed} failed")
if failed or not results:
    sys.exit(1)
