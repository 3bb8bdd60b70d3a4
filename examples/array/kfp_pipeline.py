"""A job array on Slurm in Kubeflow Pipelines, then a retry of only the tasks
that did not end DONE.

Compile it (kfp 2.x with kfp-kubernetes) and upload the YAML:

    python examples/array/kfp_pipeline.py bridge-array.yaml

One task runs 100 Slurm array tasks (at most 10 at once) as one job: one
submission, one record, one status query per poll for all of them; each sees
its index in BRIDGE_TASK_INDEX. exit_zero=True makes the task exit 0 whatever
the array's end, so its outputs exist: status, array_counts (DONE=97
FAILED=3) and array_failed (the indexes that did not end DONE, as ranges).
When array_failed is not empty, a second bridge job runs with it as its
array: only those tasks again, under a job name and a cleanup of its own. hack/kfp-check.sh compiles it in the tests.

An array past the cluster's limit on one array (Slurm's MaxArraySize: 1,001
by default, so indexes 0-1000) is given whole, e.g. array='0-4999%100': the
task splits it into several native arrays under its one record (its job_id
lists them, 123@0+124@1001) and still gives one status, one array_counts and
one array_failed over all of them.
"""
import pathlib
import sys

from kfp import compiler, components, dsl, kubernetes

COMPONENTS = pathlib.Path(__file__).resolve().parents[2] / "components"
bridge_job = components.load_component_from_file(str(COMPONENTS / "bridge-job.yaml"))
cleanup = components.load_component_from_file(str(COMPONENTS / "cleanup.yaml"))

SCRIPT = '#!/bin/sh\necho "task $BRIDGE_TASK_INDEX on $(hostname)"\n'
PROPERTIES = '{"partition":"debug","time_limit":10,"current_working_directory":"/tmp"}'
URL = 'https://slurm.example.org:6820'


@dsl.pipeline(name="bridge-array-retry", description="Some tasks of an array again, cleaned up whatever happens.")
def retry_tasks(job_name: str, array: str, resource_url: str, credentials_secret: str):
    done = cleanup(job_name=job_name)
    done.set_caching_options(False)
    kubernetes.use_secret_as_volume(done, secret_name=credentials_secret, mount_path="/credentials")
    with dsl.ExitHandler(done):
        retry = bridge_job(
            job_name=job_name,
            backend='slurm',
            resource_url=resource_url,
            job_properties=PROPERTIES,
            script=SCRIPT,
            array=array,
        )
        retry.set_caching_options(False)
        kubernetes.use_secret_as_volume(retry, secret_name=credentials_secret, mount_path="/credentials")


@dsl.pipeline(name="bridge-array", description="A Slurm job array, then a retry of its failed tasks.")
def pipeline(resource_url: str = URL, credentials_secret: str = 'slurm-credentials', array: str = '0-99%10'):
    job_name = dsl.PIPELINE_JOB_ID_PLACEHOLDER  # one record and one array per run
    done = cleanup(job_name=job_name)
    done.set_caching_options(False)
    kubernetes.use_secret_as_volume(done, secret_name=credentials_secret, mount_path="/credentials")
    with dsl.ExitHandler(done):
        tasks = bridge_job(
            job_name=job_name,
            backend='slurm',
            resource_url=resource_url,
            job_properties=PROPERTIES,
            script=SCRIPT,
            array=array,
            exit_zero=True,
        )
        tasks.set_caching_options(False)
        kubernetes.use_secret_as_volume(tasks, secret_name=credentials_secret, mount_path="/credentials")
        # A record is one array's, once: the retry has a job name (and a
        # cleanup) of its own, in a sub-pipeline (KFP takes one ExitHandler
        # per pipeline).
        with dsl.If(tasks.outputs['array_failed'] != ''):
            again = retry_tasks(job_name=f'{job_name}-retry', array=tasks.outputs['array_failed'],
                                resource_url=resource_url, credentials_secret=credentials_secret)
            again.set_caching_options(False)


if __name__ == "__main__":
    compiler.Compiler().compile(pipeline, sys.argv[1] if len(sys.argv) > 1 else "bridge-array.yaml")
