"""Retry a bridge job after an infrastructure failure in Kubeflow Pipelines.

Compile it (kfp 2.x with kfp-kubernetes) and upload the YAML:

    python examples/retry/kfp_pipeline.py bridge-retry.yaml

KFP's set_retry retries every failure of a task; it cannot choose by exit
code. bridge-runner chooses instead: with resubmit='infrastructure' (the
default) a retry after exit 5 (the infrastructure failed the job: Slurm
NODE_FAIL, BOOT_FAIL, PREEMPTED, ...) submits a new attempt of the job under
the same record, exactly once, while a retry after exit 1 (the job's own
failure or its time limit) only re-attaches to the ended job and fails again
at once, submitting nothing. exit_zero must stay False: it turns every final
state, exit 5 included, into success, and then nothing is retried.

Caching is off for every bridge-runner task: a cached task would not run (or
clean up) the job but replay an earlier run. hack/kfp-check.sh compiles it in
the tests.
"""
import pathlib
import sys

from kfp import compiler, components, dsl, kubernetes

COMPONENTS = pathlib.Path(__file__).resolve().parents[2] / "components"
bridge_job = components.load_component_from_file(str(COMPONENTS / "bridge-job.yaml"))
cleanup = components.load_component_from_file(str(COMPONENTS / "cleanup.yaml"))

SCRIPT = '#!/bin/bash\nsrun hostname\n'


@dsl.pipeline(name="bridge-retry", description="Retry a bridge job only after infrastructure failures.")
def pipeline(resource_url: str = 'https://slurm.example.org:6820', credentials_secret: str = 'slurm-credentials'):
    job_name = dsl.PIPELINE_JOB_ID_PLACEHOLDER  # one record per run; attempts live in it
    done = cleanup(job_name=job_name)
    done.set_caching_options(False)
    kubernetes.use_secret_as_volume(done, secret_name=credentials_secret, mount_path="/credentials")
    with dsl.ExitHandler(done):
        job = bridge_job(
            job_name=job_name,
            backend='slurm',
            resource_url=resource_url,
            job_properties='{"partition":"debug","nodes":1,"time_limit":30,"requeue":false}',
            script=SCRIPT,
            resubmit='infrastructure',
        )
        job.set_caching_options(False)
        job.set_retry(num_retries=3)
        kubernetes.use_secret_as_volume(job, secret_name=credentials_secret, mount_path="/credentials")


if __name__ == "__main__":
    compiler.Compiler().compile(pipeline, sys.argv[1] if len(sys.argv) > 1 else "bridge-retry.yaml")
