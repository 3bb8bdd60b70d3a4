"""Run a job on a Slurm cluster through slurmrestd from Kubeflow Pipelines.

Compile it (kfp 2.x with kfp-kubernetes) and upload the YAML:

    python examples/slurm/kfp_pipeline.py bridge-slurm.yaml

The pipeline loads the components from components/, mounts the credentials
Secret (examples/slurm/secret.yaml) with kfp-kubernetes, and cleans up in an
exit handler whatever happens. hack/kfp-check.sh compiles it in the tests.
"""
import json
import pathlib
import sys

from kfp import compiler, components, dsl, kubernetes

COMPONENTS = pathlib.Path(__file__).resolve().parents[2] / "components"
bridge_job = components.load_component_from_file(str(COMPONENTS / "bridge-job.yaml"))
cleanup = components.load_component_from_file(str(COMPONENTS / "cleanup.yaml"))

SCRIPT = '#!/bin/bash\nsrun hostname\n'
JOB_PROPERTIES = {'partition': 'debug', 'nodes': 1, 'time_limit': 30, 'current_working_directory': '/scratch/bridge'}


@dsl.pipeline(name="bridge-slurm", description="A bridge job on slurm.")
def pipeline(
    resource_url: str = 'https://slurm.example.org:6820',
    credentials_secret: str = 'slurm-credentials',
    job_properties: str = json.dumps(JOB_PROPERTIES),  # your partition and a directory that exists there
):
    # One record and one remote job per run: name the job after the run.
    job_name = dsl.PIPELINE_JOB_ID_PLACEHOLDER
    done = cleanup(job_name=job_name)
    kubernetes.use_secret_as_volume(done, secret_name=credentials_secret, mount_path="/credentials")
    with dsl.ExitHandler(done):
        job = bridge_job(
            job_name=job_name,
            backend='slurm',
            resource_url=resource_url,
            script=SCRIPT,
            job_properties=job_properties,
        )
        job.set_caching_options(False)  # a cached step would not run the job
        kubernetes.use_secret_as_volume(job, secret_name=credentials_secret, mount_path="/credentials")


if __name__ == "__main__":
    compiler.Compiler().compile(pipeline, sys.argv[1] if len(sys.argv) > 1 else "bridge-slurm.yaml")
