"""Branch on a bridge job's outcome in Kubeflow Pipelines.

Compile it (kfp 2.x with kfp-kubernetes) and upload the YAML:

    python examples/branching/kfp_pipeline.py bridge-branching.yaml

KFP publishes a task's outputs only when it exits 0. exit_zero=True makes the
bridge job's task exit 0 whatever the job's final state (DONE, FAILED, KILLED,
UNKNOWN), so its outputs always exist and dsl.If picks the branch by its
status. Only invalid input and temporary failures still fail the task.

Inputs take Python values of their types: update_interval an int,
s3_secure and exit_zero bools. Caching is off for every bridge-runner task: a
cached task would not run (or clean up) the job but replay an earlier run.
hack/kfp-check.sh compiles it in the tests.
"""
import pathlib
import sys

from kfp import compiler, components, dsl, kubernetes

COMPONENTS = pathlib.Path(__file__).resolve().parents[2] / "components"
bridge_job = components.load_component_from_file(str(COMPONENTS / "bridge-job.yaml"))
cleanup = components.load_component_from_file(str(COMPONENTS / "cleanup.yaml"))

SCRIPT = 'echo "this job fails on purpose"\nexit 3\n'


@dsl.component
def report(job_id: str, status: str, message: str):
    """What the pipeline does after a job that did not end DONE."""
    print(f"bridge job {job_id} ended {status}: {message}")


@dsl.pipeline(name="bridge-branching", description="Branch on a bridge job's status.")
def pipeline(credentials_secret: str = 'local-credentials'):
    job_name = dsl.PIPELINE_JOB_ID_PLACEHOLDER  # one record and one job per run
    done = cleanup(job_name=job_name)
    done.set_caching_options(False)
    kubernetes.use_secret_as_volume(done, secret_name=credentials_secret, mount_path="/credentials")
    with dsl.ExitHandler(done):
        job = bridge_job(
            job_name=job_name,
            backend='local',
            script=SCRIPT,
            update_interval=5,
            s3_secure=False,
            exit_zero=True,
        )
        job.set_caching_options(False)
        kubernetes.use_secret_as_volume(job, secret_name=credentials_secret, mount_path="/credentials")
        with dsl.If(job.outputs['status'] != 'DONE'):
            report(job_id=job.outputs['job_id'], status=job.outputs['status'], message=job.outputs['message'])


if __name__ == "__main__":
    compiler.Compiler().compile(pipeline, sys.argv[1] if len(sys.argv) > 1 else "bridge-branching.yaml")
