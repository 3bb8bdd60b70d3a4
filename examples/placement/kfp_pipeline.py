"""One job, two Slurm clusters: it runs where it starts soonest (KFP).

Compile it (kfp 2.x with kfp-kubernetes) and upload the YAML:

    python examples/placement/kfp_pipeline.py bridge-placement.yaml

Before submitting, invoke probes both clusters (partition, free CPUs,
pending jobs: a few read-only requests each), the placement policy picks one
(earliest-start: where the job starts now, else the smaller backlog per CPU)
and records the choice with the figures before the submit, so a retried task
never submits to the other. The task's output `target` names the cluster.

Credentials stay with their cluster: cluster A's Secret is the task's own
(/credentials, for the job's resource_url), cluster B's is mounted at
/targets/hpc-b and its target names that directory.
"""
import json
import pathlib
import sys

from kfp import compiler, components, dsl, kubernetes

COMPONENTS = pathlib.Path(__file__).resolve().parents[2] / "components"
bridge_job = components.load_component_from_file(str(COMPONENTS / "bridge-job.yaml"))
cleanup = components.load_component_from_file(str(COMPONENTS / "cleanup.yaml"))

TARGETS = json.dumps([
    {"name": "hpc-a", "jobproperties": {"partition": "batch"}},
    {"name": "hpc-b", "resourceURL": "https://slurm-b.example.org:6820",
     "credentials": "/targets/hpc-b", "jobproperties": {"partition": "compute"}},
])


@dsl.container_component
def report(target: str, ran_on: dsl.OutputPath(str)):
    """Says where the job ran. It runs in the components' own image (its
    /bin/sh): no other image to pull, no package index at run time, so it
    runs wherever the bridge job does (kfp.local on a machine without
    network access included)."""
    return dsl.ContainerSpec(
        image=bridge_job.component_spec.implementation.container.image,
        command=["/bin/sh", "-c", 'echo "the job ran on $0"; mkdir -p "$(dirname "$1")"; printf %s "$0" >"$1"'],
        args=[target, ran_on],
    )


def mount_credentials(task, secret_a: str, secret_b: str):
    kubernetes.use_secret_as_volume(task, secret_name=secret_a, mount_path="/credentials")
    kubernetes.use_secret_as_volume(task, secret_name=secret_b, mount_path="/targets/hpc-b")


@dsl.pipeline(name="bridge-placement", description="A Slurm job on whichever of two clusters starts it first.")
def pipeline(
    resource_url: str = 'https://slurm-a.example.org:6820',  # cluster A, the job's own
    targets: str = TARGETS,
    secret_a: str = 'slurm-credentials',
    secret_b: str = 'slurm-b-credentials',
):
    job_name = dsl.PIPELINE_JOB_ID_PLACEHOLDER
    done = cleanup(job_name=job_name)
    done.set_caching_options(False)
    mount_credentials(done, secret_a, secret_b)  # cleanup cancels where the job was placed
    with dsl.ExitHandler(done):
        job = bridge_job(
            job_name=job_name,
            backend='slurm',
            resource_url=resource_url,
            targets=targets,
            placement='earliest-start',
            job_properties='{"time_limit":10,"current_working_directory":"/tmp"}',
            script='#!/bin/sh\necho "running on $(hostname) in partition $SLURM_JOB_PARTITION"\n',
        )
        job.set_caching_options(False)
        mount_credentials(job, secret_a, secret_b)
        report(target=job.outputs['target'])


if __name__ == "__main__":
    compiler.Compiler().compile(pipeline, sys.argv[1] if len(sys.argv) > 1 else "bridge-placement.yaml")
