#!/usr/bin/env bash
# hack/noise.sh start|stop|status: keep other users' typical load on the
# shared real services while tests run, so that a test which assumes a
# service idle fails here as it would in CI, where three lanes share them.
#
# start, on each running Slurm (22.05, 24.11, 26.05, with and without
# slurmdbd; over its REST API):
#   - a job pending for its begin time (now+1hour) in each partition
#     (22.05 then answers sbatch --test-only with the year 3047);
#   - a 1-CPU sleeper running in debug;
#   - every few seconds a 1-CPU job of 3 s in debug;
# on each HTCondor (23.9, 25; over its login sshd): a held job and every few
# seconds a 1-CPU job of 3 s; on each Ray (with and without auth): a job
# that sleeps. Every job is named bridge-noise (Ray: bridge-noise-*), and no
# job asks for more than one CPU, so a test's own job always finds CPUs
# free (at most two of a Slurm node's 8 and of an HTCondor's 2 busy at once).
# stop ends the loop and cancels every job named so; status lists them.
#
# It reads the services' env files as hack/services.sh writes them; a
# service that is not running is left out. BRIDGE_NOISE_PERIOD (seconds,
# default 5) spaces the short jobs; BRIDGE_NOISE_NAME (default bridge-noise)
# names an instance's jobs, BRIDGE_NOISE_DIR holds its loop's pid and log.
set -euo pipefail
# shellcheck source=hack/lib.sh
source "$(dirname "$0")/lib.sh"
# jq reads the services' JSON; a fresh machine may lack it (and curl).
need_cmd jq || { echo "noise: could not install jq" >&2; exit 1; }
need_cmd curl || { echo "noise: could not install curl" >&2; exit 1; }

NAME=${BRIDGE_NOISE_NAME:-bridge-noise} # one instance's jobs: stop cancels only its own
DIR=${BRIDGE_NOISE_DIR:-/tmp/bridge-runner-noise}
PERIOD=${BRIDGE_NOISE_PERIOD:-5}

# slurms: "label url token api-version" of each Slurm with an env file.
slurms() {
  local spec label dir pre ver
  for spec in slurm:SLURM:v0.0.38 slurmdbd:SLURMDBD:v0.0.38 slurm2411:SLURM2411:v0.0.41 \
    slurm2411dbd:SLURM2411DBD:v0.0.41 slurm2605:SLURM2605:v0.0.44 slurm2605-nometrics:SLURM2605:v0.0.44; do
    IFS=: read -r label pre ver <<<"$spec"
    dir=/tmp/bridge-runner-$label
    [ -f "$dir/env" ] || continue
    # shellcheck disable=SC1091
    (. "$dir/env" && eval echo "$label" "\$BRIDGE_TEST_${pre}_URL" "\$BRIDGE_TEST_${pre}_TOKEN" "$ver")
  done
}

# slurm_api URL TOKEN METHOD PATH [BODY]: one REST call, its JSON on stdout.
slurm_api() {
  local body=()
  [ $# -ge 5 ] && body=(-H 'Content-Type: application/json' --data "$5")
  curl -sS --max-time 15 -X "$3" -H "X-SLURM-USER-NAME: bridge" -H "X-SLURM-USER-TOKEN: $2" "${body[@]}" "$1$4"
}

# slurm_submit URL TOKEN VER PARTITION SECONDS [BEGIN]: a 1-CPU job named
# bridge-noise that sleeps SECONDS; with BEGIN (epoch), held until then.
slurm_submit() {
  local url=$1 tok=$2 ver=$3 part=$4 secs=$5 begin=${6:-} job
  job=$(jq -nc --arg n "$NAME" --arg p "$part" --arg s "#!/bin/sh
sleep $secs
" '{name: $n, partition: $p, script: $s, current_working_directory: "/tmp", cpus_per_task: 1}')
  if [ "$ver" = v0.0.38 ]; then
    # v0.0.38: the script beside the job, environment as a map, begin as sbatch reads it.
    job=$(jq -c --arg b "${begin:+now+1hour}" '{script: .script, job: (del(.script) + {environment: {PATH: "/bin:/usr/bin"}}
      + (if $b == "" then {} else {begin_time: $b} end))}' <<<"$job")
  else
    job=$(jq -c --arg b "$begin" '{job: (. + {environment: ["PATH=/bin:/usr/bin"]}
      + (if $b == "" then {} else {begin_time: {set: true, number: ($b | tonumber)}} end))}' <<<"$job")
  fi
  slurm_api "$url" "$tok" POST "/slurm/$ver/job/submit" "$job" | jq -r '.job_id // ("error: " + (.errors | tostring))'
}

# condors: "label port creds-dir" of each HTCondor with an env file.
condors() {
  local label pre
  for label in htcondor htcondor25; do
    [ -f "/tmp/bridge-runner-$label/env" ] || continue
    pre=CONDOR
    [ "$label" = htcondor25 ] && pre=CONDOR25
    # shellcheck disable=SC1091
    (. "/tmp/bridge-runner-$label/env" && eval echo "$label" "\${BRIDGE_TEST_${pre}_SSH_ADDR##*:}" "\$BRIDGE_TEST_${pre}_SSH_CREDS")
  done
}

# condor_ssh PORT CREDS CMD: run CMD on the pool's login node (it reads
# stdin: callers in a read loop give it /dev/null).
condor_ssh() {
  ssh -i "$2/ssh-privatekey" -o UserKnownHostsFile="$2/known_hosts" -o BatchMode=yes \
    -o ConnectTimeout=10 -p "$1" bridgessh@127.0.0.1 "$3"
}

# condor_submit_noise PORT CREDS SECONDS HOLD: a 1-CPU job that sleeps.
condor_submit_noise() {
  printf 'universe = vanilla\nexecutable = /bin/sleep\narguments = %s\ntransfer_executable = false\nshould_transfer_files = NO\nbatch_name = %s\nrequest_cpus = 1\nhold = %s\nqueue\n' \
    "$3" "$NAME" "$4" | condor_ssh "$1" "$2" 'condor_submit -terse -'
}

# rays: "label url token-file" of each Ray with an env file.
rays() {
  local label
  for label in ray ray-auth; do
    [ -f "/tmp/bridge-runner-$label/env" ] || continue
    # shellcheck disable=SC1091
    (. "/tmp/bridge-runner-$label/env" && echo "$label" "$BRIDGE_TEST_RAY_URL" "$BRIDGE_TEST_RAY_CREDS_DIR/token")
  done
}

# ray_api URL TOKEN-FILE METHOD PATH [BODY]
ray_api() {
  local hdr=() body=()
  [ -s "$2" ] && hdr=(-H "Authorization: Bearer $(tr -d '\n' <"$2")")
  [ $# -ge 5 ] && body=(-H 'Content-Type: application/json' --data "$5")
  curl -sS --max-time 15 -X "$3" "${hdr[@]}" "${body[@]}" "$1$4"
}

start_long() {
  local label url tok ver part begin
  begin=$(($(date +%s) + 3600))
  while read -r label url tok ver; do
    for part in $(slurm_api "$url" "$tok" GET "/slurm/$ver/partitions" | jq -r '.partitions[].name'); do
      echo "$label: begin-held in $part: $(slurm_submit "$url" "$tok" "$ver" "$part" 60 "$begin")"
    done
    echo "$label: sleeper in debug: $(slurm_submit "$url" "$tok" "$ver" debug 86400)"
  done < <(slurms)
  while read -r label port creds; do
    echo "$label: held job: $(condor_submit_noise "$port" "$creds" 60 true)"
  done < <(condors)
  ray_long
}

# ray_long: on each Ray without a bridge-noise job alive, a job that sleeps
# (no CPU reserved: the test cluster has one, which a test's job needs).
# The loop calls it again: Ray's memory monitor can kill the job when the
# machine runs short of memory.
ray_long() {
  local label url tok
  while read -r label url tok; do
    if [ -z "$(ray_api "$url" "$tok" GET /api/jobs/ | jq -r --arg n "$NAME-" \
      '.[] | select((.submission_id // "") | startswith($n)) | select(.status == "PENDING" or .status == "RUNNING") | .submission_id')" ]; then
      echo "$label: long job: $(ray_api "$url" "$tok" POST /api/jobs/ \
        "{\"entrypoint\":\"sleep 86400\",\"submission_id\":\"$NAME-$(date +%s)-$RANDOM\"}")"
    fi
  done < <(rays)
}

# short_loop: a short job on each Slurm and HTCondor every PERIOD seconds
# (with jitter, so that lanes do not beat in step), until stopped.
short_loop() {
  local label url tok ver port creds i=0
  while :; do
    i=$((i + 1))
    [ $((i % 12)) = 0 ] && ray_long
    while read -r label url tok ver; do
      slurm_submit "$url" "$tok" "$ver" debug 3 >/dev/null || true
    done < <(slurms)
    while read -r label port creds; do
      condor_submit_noise "$port" "$creds" 3 false >/dev/null 2>&1 || true
    done < <(condors)
    sleep "$PERIOD.$((RANDOM % 10))"
  done
}

stop_all() {
  local label url tok ver port creds id
  if [ -f "$DIR/loop.pid" ]; then
    kill -- "-$(cat "$DIR/loop.pid")" 2>/dev/null || true
    rm -f "$DIR/loop.pid"
  fi
  while read -r label url tok ver; do
    for id in $(slurm_api "$url" "$tok" GET "/slurm/$ver/jobs" | jq -r --arg n "$NAME" \
      '.jobs[] | select(.name == $n) | select([.job_state] | flatten | any(. == "PENDING" or . == "RUNNING")) | .job_id'); do
      slurm_api "$url" "$tok" DELETE "/slurm/$ver/job/$id" >/dev/null && echo "$label: cancelled $id"
    done
  done < <(slurms)
  while read -r label port creds; do
    condor_ssh "$port" "$creds" "condor_rm -constraint 'JobBatchName == \"$NAME\"'" </dev/null 2>&1 | sed "s/^/$label: /" || true
  done < <(condors)
  while read -r label url tok; do
    for id in $(ray_api "$url" "$tok" GET /api/jobs/ | jq -r --arg n "$NAME-" \
      '.[] | select((.submission_id // "") | startswith($n)) | select(.status == "PENDING" or .status == "RUNNING") | .submission_id'); do
      ray_api "$url" "$tok" POST "/api/jobs/$id/stop" >/dev/null && echo "$label: stopped $id"
    done
  done < <(rays)
}

status() {
  local label url tok ver port creds
  while read -r label url tok ver; do
    echo "$label: $(slurm_api "$url" "$tok" GET "/slurm/$ver/jobs" | jq -c --arg n "$NAME" \
      '[.jobs[] | select(.name == $n) | {job_id, partition, state: ([.job_state] | flatten | join(","))} | select(.state == "PENDING" or .state == "RUNNING")]')"
  done < <(slurms)
  while read -r label port creds; do
    echo "$label: $(condor_ssh "$port" "$creds" "condor_q -constraint 'JobBatchName == \"$NAME\"' -af ClusterId JobStatus" </dev/null | tr '\n' ' ')"
  done < <(condors)
  while read -r label url tok; do
    echo "$label: $(ray_api "$url" "$tok" GET /api/jobs/ | jq -c --arg n "$NAME-" '[.[] | select((.submission_id // "") | startswith($n)) | {submission_id, status}]')"
  done < <(rays)
}

case ${1:-} in
start)
  mkdir -p "$DIR"
  if [ -f "$DIR/loop.pid" ] && kill -0 "$(cat "$DIR/loop.pid")" 2>/dev/null; then
    echo "noise: already running (pid $(cat "$DIR/loop.pid"))" >&2
    exit 1
  fi
  start_long
  setsid bash -c "$(declare -f slurms slurm_api slurm_submit condors condor_ssh condor_submit_noise rays ray_api ray_long short_loop)
    NAME=$NAME PERIOD=$PERIOD; short_loop" >"$DIR/loop.log" 2>&1 &
  echo $! >"$DIR/loop.pid"
  echo "noise: short jobs every ${PERIOD}s (pid $(cat "$DIR/loop.pid")); hack/noise.sh stop cancels all"
  ;;
stop) stop_all ;;
status) status ;;
*)
  echo "usage: hack/noise.sh start|stop|status" >&2
  exit 2
  ;;
esac
