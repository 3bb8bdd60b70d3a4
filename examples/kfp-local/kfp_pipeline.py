"""Try a pipeline on your machine with KFP's local runner before a cluster runs it.

    pip install kfp docker      # kfp 2.17 (hack/kfp-requirements.txt pins what the tests use)
    python examples/kfp-local/kfp_pipeline.py [PIPELINE_ROOT]

kfp.local's DockerRunner runs each task of the pipeline in a container of the
components' image (ghcr.io/bridge-runner/bridge-runner:<tag>, present in your
Docker or pulled), here with the local backend: the job is a shell script run in
the task's own container. The shipped components run unchanged; what the local
runner needs is said where it happens below. The pipeline's outputs (the job's
status, message, id and exit code) are printed as one JSON line at the end.

The same pipeline compiles for a cluster (hack/kfp-check.sh compiles it), and
hack/kfp-local.sh runs it here under a real Docker daemon in the tests. Any
backend works the same way under kfp.local as long as the containers reach it
and its credentials: docker_runner() below gives the host's network and mounts
credential directories (hack/kfp-local.sh runs every shipped pipeline with it).
"""
import json
import os
import pathlib
import sys
from typing import Dict, NamedTuple, Optional

from kfp import components, dsl, local

COMPONENTS = pathlib.Path(__file__).resolve().parents[2] / "components"
bridge_job = components.load_component_from_file(str(COMPONENTS / "bridge-job.yaml"))
cleanup = components.load_component_from_file(str(COMPONENTS / "cleanup.yaml"))

# One line: kfp 2.17 copies a pipeline input's default into the comment
# header of the compiled YAML, where a newline breaks the file.
SCRIPT = 'echo "hello from $BRIDGE_JOB_NAME"'

Outputs = NamedTuple("Outputs", status=str, message=str, job_id=str, job_exit_code=str)


@dsl.pipeline(name="bridge-kfp-local", description="A bridge job on the local backend, for kfp.local.")
def pipeline(script: str = SCRIPT) -> Outputs:
    job_name = dsl.PIPELINE_JOB_ID_PLACEHOLDER  # one record and one job per run
    # exit_zero: the task succeeds whatever the job's final state, so its
    # outputs exist and the pipeline returns them. A pipeline's outputs cannot
    # come from inside a dsl.ExitHandler, so cleanup follows the job instead
    # (examples/local/kfp_pipeline.py, with its ExitHandler, runs under
    # kfp.local as well, without outputs of its own).
    job = bridge_job(job_name=job_name, backend="local", script=script, update_interval=1, exit_zero=True)
    job.set_caching_options(False)  # a cached step would not run the job
    done = cleanup(job_name=job_name).after(job)
    done.set_caching_options(False)
    return Outputs(
        status=job.outputs["status"],
        message=job.outputs["message"],
        job_id=job.outputs["job_id"],
        job_exit_code=job.outputs["job_exit_code"],
    )


def docker_runner(mounts: Optional[Dict[str, str]] = None, state_dir: Optional[str] = None) -> local.DockerRunner:
    """kfp.local's DockerRunner as a bridge pipeline needs it on your machine.

    user: the tasks run as you, not as the image's user (uid 65532). They
    write their outputs into the pipeline root, which Docker mounts at the
    same path, and read your credentials: as you, your own 0700 folder
    works, the outputs are yours, and nobody else needs any permission on
    it. (The image's home is not yours, so invoke keeps the job's record in
    the container's $TMPDIR, gone with the container.)
    network_mode="host": a backend on your machine answers at 127.0.0.1,
    which in a container's own network would be the container itself.
    mounts: {path in the container: directory on your machine}, each bound
    read-only, e.g. {"/credentials": "/home/you/slurm-credentials"} where a
    cluster pipeline mounts a Secret with kfp-kubernetes (which kfp.local
    leaves out). DockerRunner refuses `volumes=`: it sets those itself.
    entrypoint=[]: a component's command replaces the image's ENTRYPOINT, as
    on a cluster (kfp.local would pass it to the ENTRYPOINT as arguments,
    which a container component on the components' image, /bin/sh, needs).
    state_dir: a directory of yours where the tasks keep the jobs' records
    (XDG_STATE_HOME), as a cluster keeps them in ConfigMaps: cleanup then
    finds the job's record (cancels an unfinished job, deletes the record).
    Without it each task's record is in its own container, gone with it.
    """
    import docker  # kfp.local's DockerRunner needs it installed anyway

    binds = [docker.types.Mount(target=target, source=os.path.abspath(source), type="bind", read_only=True)
             for target, source in (mounts or {}).items()]
    environment = {}
    if state_dir:
        binds.append(docker.types.Mount(target=STATE, source=os.path.abspath(state_dir), type="bind"))
        environment["XDG_STATE_HOME"] = STATE
    return local.DockerRunner(user=f"{os.getuid()}:{os.getgid()}", network_mode="host", mounts=binds,
                              entrypoint=[], environment=environment)


STATE = "/bridge-state"  # where docker_runner mounts state_dir in the containers


def run(pipeline_root: str, **arguments) -> dict:
    """Runs the pipeline under kfp.local with its outputs under pipeline_root
    (made yours alone if it does not exist) and returns its outputs."""
    root = os.path.abspath(pipeline_root)
    os.makedirs(root, mode=0o700, exist_ok=True)
    local.init(runner=docker_runner(), pipeline_root=root)
    return dict(pipeline(**arguments).outputs)


if __name__ == "__main__":
    print(json.dumps(run(sys.argv[1] if len(sys.argv) > 1 else "local_outputs"), sort_keys=True))
