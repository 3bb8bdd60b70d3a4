"""One job, two Slurm clusters: it moves when it waits too long (KFP).

Compile it (kfp 2.x with kfp-kubernetes) and upload the YAML:

    python examples/replace/kfp_pipeline.py bridge-replace.yaml

Placement `ordered` prefers hpc-a (say, the group's own allocation): the job
goes there unless hpc-a would make it wait while hpc-b starts it now. If it
still waits on hpc-a after replace_after (15 minutes here) while hpc-b would
start it now, invoke moves it, exactly once: it records the move, asks hpc-a
to cancel the job only if it never started (a hold, a read that says PENDING,
then the cancel), and only on that confirmation submits it to hpc-b under the
same record. A job that started meanwhile stays where it is. The task's
output `target` names the cluster it ran on; `bridge-runner status -o wide`
shows the move (MOVES), and the record's status.moves keeps the job left
behind, with Slurm's word that it never ran.

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
    """Says where the job ran, in the components' own image (its /bin/sh)."""
    return dsl.ContainerSpec(
        image=bridge_job.component_spec.implementation.container.image,
        command=["/bin/sh", "-c", 'echo "the job ran on $0"; mkdir -p "$(dirname "$1")"; printf %s "$0" >"$1"'],
        args=[target, ran_on],
    )


def mount_credentials(task, secret_a: str, secret_b: str):
    kubernetes.use_secret_as_volume(task, secret_name=secret_a, mount_path="/credentials")
    kubernetes.use_secret_as_volume(task, secret_name=secret_b, mount_path="/targets/hpc-b")


@dsl.pipeline(name="bridge-replace", description="A Slurm job that moves to a second cluster when it waits too long on its first.")
def pipeline(
    resource_url: str = 'https://slurm-a.example.org:6820',  # cluster A, the job's own
    targets: str = TARGETS,
    replace_after: str = '15m',  # how long the job may wait before it moves (1s to 168h)
    secret_a: str = 'slurm-credentials',
    secret_b: str = 'slurm-b-credentials',
):
    job_name = dsl.PIPELINE_JOB_ID_PLACEHOLDER
    done = cleanup(job_name=job_name)
    done.set_caching_options(False)
    mount_credentials(done, secret_a, secret_b)  # cleanup cancels where the job is now
    with dsl.ExitHandler(done):
        job = bridge_job(
            job_name=job_name,
            backend='slurm',
            resource_url=resource_url,
            targets=targets,
            placement='ordered',
            replace_after=replace_after,
            job_properties='{"time_limit":10,"current_working_directory":"/tmp"}',
            script='#!/bin/sh\necho "running on $(hostname) in partition $SLURM_JOB_PARTITION"\n',
        )
        job.set_caching_options(False)
        mount_credentials(job, secret_a, secret_b)
        report(target=job.outputs['target'])


if __name__ == "__main__":
    compiler.Compiler().compile(pipeline, sys.argv[1] if len(sys.argv) > 1 else "bridge-replace.yaml")
