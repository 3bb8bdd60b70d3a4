"""One job array spread over two Slurm clusters (KFP).

Compile it (kfp 2.x with kfp-kubernetes) and upload the YAML:

    python examples/spread/kfp_pipeline.py bridge-spread.yaml

Placement `spread` probes both clusters and divides the array's tasks among
them in proportion to how many each can start now (free CPUs over one task's
CPUs; when neither can start any, by how soon each drains what it has). Each
cluster gets a contiguous run of the indexes and runs it as one native array
(split past its own MaxArraySize as one cluster would); each task still sees
its own index of the whole array in BRIDGE_TASK_INDEX. The task has one
record and one set of outputs: status, array_counts (DONE=200) and
array_failed over all the tasks, job_id listing each cluster's array
(123@0+hpc-b:456@120), and target naming the clusters that got tasks
(hpc-a,hpc-b; one name when one cluster could start them all). Spreading
needs an array (without one the task exits 2, naming placement) and backends
whose arrays take an offset (Slurm).

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
def report(target: str, counts: str, ran_on: dsl.OutputPath(str)):
    """Says where the tasks ran and how they ended, in the components' own image (its /bin/sh)."""
    return dsl.ContainerSpec(
        image=bridge_job.component_spec.implementation.container.image,
        command=["/bin/sh", "-c", 'echo "the tasks ran on $0: $1"; mkdir -p "$(dirname "$2")"; printf %s "$0" >"$2"'],
        args=[target, counts, ran_on],
    )


def mount_credentials(task, secret_a: str, secret_b: str):
    kubernetes.use_secret_as_volume(task, secret_name=secret_a, mount_path="/credentials")
    kubernetes.use_secret_as_volume(task, secret_name=secret_b, mount_path="/targets/hpc-b")


@dsl.pipeline(name="bridge-spread", description="A Slurm job array spread over two clusters by what each can start now.")
def pipeline(
    resource_url: str = 'https://slurm-a.example.org:6820',  # cluster A, the job's own
    targets: str = TARGETS,
    array: str = '0-199',  # the tasks' indexes; each cluster gets a contiguous run of them
    secret_a: str = 'slurm-credentials',
    secret_b: str = 'slurm-b-credentials',
):
    job_name = dsl.PIPELINE_JOB_ID_PLACEHOLDER
    done = cleanup(job_name=job_name)
    done.set_caching_options(False)
    mount_credentials(done, secret_a, secret_b)  # cleanup cancels the tasks on both clusters
    with dsl.ExitHandler(done):
        job = bridge_job(
            job_name=job_name,
            backend='slurm',
            resource_url=resource_url,
            targets=targets,
            placement='spread',
            array=array,
            job_properties='{"time_limit":10,"current_working_directory":"/tmp"}',
            script='#!/bin/sh\necho "task $BRIDGE_TASK_INDEX on $(hostname) in partition $SLURM_JOB_PARTITION"\n',
        )
        job.set_caching_options(False)
        mount_credentials(job, secret_a, secret_b)
        report(target=job.outputs['target'], counts=job.outputs['array_counts'])


if __name__ == "__main__":
    compiler.Compiler().compile(pipeline, sys.argv[1] if len(sys.argv) > 1 else "bridge-spread.yaml")
