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
backend works the same way under kfp.local as long as the containers reach it.
"""
import json
import os
import pathlib
import sys
from typing import NamedTuple

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


def open_pipeline_root(path: str) -> str:
    """The image runs as its own non-root user (uid 65532), not as you, and
    writes the task outputs into the pipeline root, which Docker mounts into
    the container at the same path. So the pipeline root is opened to every
    user; directories the tasks create beneath it take its permissions, so
    that you can remove them. (Or run the image as yourself:
    local.DockerRunner(user=f"{os.getuid()}:{os.getgid()}").)"""
    root = os.path.abspath(path)
    os.makedirs(root, exist_ok=True)
    os.chmod(root, 0o777)
    return root


if __name__ == "__main__":
    root = open_pipeline_root(sys.argv[1] if len(sys.argv) > 1 else "local_outputs")
    local.init(runner=local.DockerRunner(), pipeline_root=root)
    run = pipeline()
    print(json.dumps(run.outputs, sort_keys=True))
