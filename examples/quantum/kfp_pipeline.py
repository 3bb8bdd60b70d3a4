"""Run a job on the IBM Quantum Compute service (Qiskit Runtime sampler); results uploaded to S3 from Kubeflow Pipelines.

Compile it (kfp 2.x with kfp-kubernetes) and upload the YAML:

    python examples/quantum/kfp_pipeline.py bridge-quantum.yaml

The pipeline loads the components from components/, mounts the credentials
Secret (examples/quantum/secret.yaml) with kfp-kubernetes, and cleans up in an
exit handler whatever happens. hack/kfp-check.sh compiles it in the tests.
"""
import json
import pathlib
import sys

from kfp import compiler, components, dsl, kubernetes

COMPONENTS = pathlib.Path(__file__).resolve().parents[2] / "components"
bridge_job = components.load_component_from_file(str(COMPONENTS / "bridge-job.yaml"))
cleanup = components.load_component_from_file(str(COMPONENTS / "cleanup.yaml"))

SCRIPT = 'OPENQASM 3.0;\ninclude "stdgates.inc";\nbit[2] c;\nqubit[2] q;\nh q[0];\ncx q[0], q[1];\nc = measure q;\n'
JOB_PROPERTIES = {'program_id': 'sampler', 'backend': 'ibm_torino', 'shots': 1024}


@dsl.pipeline(name="bridge-quantum", description="A bridge job on quantum.")
def pipeline(
    resource_url: str = 'https://quantum.cloud.ibm.com/api/v1',
    credentials_secret: str = 'quantum-credentials',
    s3_credentials_secret: str = 'quantum-s3-credentials',
    s3_endpoint: str = 's3.example.org:443',
    s3_secure: bool = True,
    s3_upload_bucket: str = 'quantum-results',
):
    # One record and one remote job per run: name the job after the run.
    job_name = dsl.PIPELINE_JOB_ID_PLACEHOLDER
    done = cleanup(job_name=job_name)
    kubernetes.use_secret_as_volume(done, secret_name=credentials_secret, mount_path="/credentials")
    with dsl.ExitHandler(done):
        job = bridge_job(
            job_name=job_name,
            backend='quantum',
            resource_url=resource_url,
            script=SCRIPT,
            job_properties=json.dumps(JOB_PROPERTIES),
            s3_endpoint=s3_endpoint,
            s3_secure=s3_secure,
            s3_upload_bucket=s3_upload_bucket,
            s3_upload_files='results,metrics',
        )
        job.set_caching_options(False)  # a cached step would not run the job
        kubernetes.use_secret_as_volume(job, secret_name=credentials_secret, mount_path="/credentials")
        kubernetes.use_secret_as_volume(job, secret_name=s3_credentials_secret, mount_path='/s3credentials')


if __name__ == "__main__":
    compiler.Compiler().compile(pipeline, sys.argv[1] if len(sys.argv) > 1 else "bridge-quantum.yaml")
