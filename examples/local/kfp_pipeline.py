"""Run a job on a process on the pod itself (no remote system: try the templates out) from Kubeflow Pipelines.

Compile it (kfp 2.x with kfp-kubernetes) and upload the YAML:

    python examples/local/kfp_pipeline.py bridge-local.yaml

The pipeline loads the components from components/, mounts the credentials
Secret (examples/local/secret.yaml) with kfp-kubernetes, and cleans up in an
exit handler whatever happens. hack/kfp-check.sh compiles it in the tests.
"""
import json
import pathlib
import sys

from kfp import compiler, components, dsl, kubernetes

COMPONENTS = pathlib.Path(__file__).resolve().parents[2] / "components"
bridge_job = components.load_component_from_file(str(COMPONENTS / "bridge-job.yaml"))
cleanup = components.load_component_from_file(str(COMPONENTS / "cleanup.yaml"))

SCRIPT = 'echo "hello from $BRIDGE_JOB_NAME"\nsleep 2\necho done\n'


@dsl.pipeline(name="bridge-local", description="A bridge job on local.")
def pipeline(
    credentials_secret: str = 'local-credentials',
):
    # One record and one remote job per run: name the job after the run.
    job_name = dsl.PIPELINE_JOB_ID_PLACEHOLDER
    done = cleanup(job_name=job_name)
    kubernetes.use_secret_as_volume(done, secret_name=credentials_secret, mount_path="/credentials")
    with dsl.ExitHandler(done):
        job = bridge_job(
            job_name=job_name,
            backend='local',
            script=SCRIPT,
        )
        job.set_caching_options(False)  # a cached step would not run the job
        kubernetes.use_secret_as_volume(job, secret_name=credentials_secret, mount_path="/credentials")


if __name__ == "__main__":
    compiler.Compiler().compile(pipeline, sys.argv[1] if len(sys.argv) > 1 else "bridge-local.yaml")
