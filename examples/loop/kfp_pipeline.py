"""One bridge job per item of a loop in Kubeflow Pipelines, each cleaned up.

Compile it (kfp 2.x with kfp-kubernetes) and upload the YAML:

    python examples/loop/kfp_pipeline.py bridge-loop.yaml

KFP does not compile a dsl.ExitHandler inside a dsl.ParallelFor, so the
per-item job and its cleanup are a pipeline of their own (one_job), with the
ExitHandler inside it, and the loop calls that sub-pipeline: every item's
record goes, and its unfinished job is cancelled, whatever happens to it.
Every item needs its own job name: the run id is the same for all of them,
so the item is added to it (invoke refuses a record that another task
already invoked, exit 2). The name is made inside the sub-pipeline, from
its input item: kfp.local (2.17) gives a loop item in an f-string of the
loop's own body as "null" (one name for every item), and a run id passed
into the sub-pipeline now and then unresolved. The jobs run on the local backend; for a real
system pass backend, resource_url and job_properties as in examples/slurm.
hack/kfp-check.sh compiles it in the tests.
"""
import pathlib
import sys

from kfp import compiler, components, dsl, kubernetes

COMPONENTS = pathlib.Path(__file__).resolve().parents[2] / "components"
bridge_job = components.load_component_from_file(str(COMPONENTS / "bridge-job.yaml"))
cleanup = components.load_component_from_file(str(COMPONENTS / "cleanup.yaml"))

SCRIPT = 'echo "one job of the loop: $BRIDGE_JOB_NAME"'


@dsl.pipeline(name="bridge-one-job", description="One bridge job, cleaned up whatever happens.")
def one_job(item: str, script: str, credentials_secret: str):
    job_name = f"{dsl.PIPELINE_JOB_ID_PLACEHOLDER}-{item}"
    done = cleanup(job_name=job_name)
    done.set_caching_options(False)
    kubernetes.use_secret_as_volume(done, secret_name=credentials_secret, mount_path="/credentials")
    with dsl.ExitHandler(done):
        job = bridge_job(job_name=job_name, backend="local", script=script)
        job.set_caching_options(False)  # a cached step would not run the job
        kubernetes.use_secret_as_volume(job, secret_name=credentials_secret, mount_path="/credentials")


@dsl.pipeline(name="bridge-loop", description="One bridge job per item, each cleaned up.")
def pipeline(credentials_secret: str = "local-credentials", script: str = SCRIPT):
    with dsl.ParallelFor(items=["a", "b", "c", "d"]) as item:
        one = one_job(
            item=item,
            script=script,
            credentials_secret=credentials_secret,
        )
        one.set_caching_options(False)


if __name__ == "__main__":
    compiler.Compiler().compile(pipeline, sys.argv[1] if len(sys.argv) > 1 else "bridge-loop.yaml")
