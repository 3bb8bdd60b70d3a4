"""Run a job on an HTCondor pool, through its submit host over SSH, from Kubeflow Pipelines.

Compile it (kfp 2.x with kfp-kubernetes) and upload the YAML:

    python examples/htcondor/kfp_pipeline.py bridge-htcondor.yaml

The pipeline loads the components from components/, mounts the credentials
Secret (examples/htcondor/secret.yaml) with kfp-kubernetes, and cleans up in an
exit handler whatever happens. hack/kfp-check.sh compiles it in the tests.
"""
import json
import pathlib
import sys

from kfp import compiler, components, dsl, kubernetes

COMPONENTS = pathlib.Path(__file__).resolve().parents[2] / "components"
bridge_job = components.load_component_from_file(str(COMPONENTS / "bridge-job.yaml"))
cleanup = components.load_component_from_file(str(COMPONENTS / "cleanup.yaml"))

SCRIPT = '#!/bin/bash\nhostname\n'
JOB_PROPERTIES = {'request_cpus': 1, 'request_memory': '1GB', '+ProjectName': 'bridge'}


@dsl.pipeline(name="bridge-htcondor", description="A bridge job on htcondor.")
def pipeline(
    resource_url: str = 'ssh://alice@submit.example.org:22',
    credentials_secret: str = 'htcondor-credentials',
):
    # One record and one remote job per run: name the job after the run.
    job_name = dsl.PIPELINE_JOB_ID_PLACEHOLDER
    done = cleanup(job_name=job_name)
    kubernetes.use_secret_as_volume(done, secret_name=credentials_secret, mount_path="/credentials")
    with dsl.ExitHandler(done):
        job = bridge_job(
            job_name=job_name,
            backend='htcondor',
            resource_url=resource_url,
            script=SCRIPT,
            job_properties=json.dumps(JOB_PROPERTIES),
        )
        job.set_caching_options(False)  # a cached step would not run the job
        kubernetes.use_secret_as_volume(job, secret_name=credentials_secret, mount_path="/credentials")


if __name__ == "__main__":
    compiler.Compiler().compile(pipeline, sys.argv[1] if len(sys.argv) > 1 else "bridge-htcondor.yaml")
