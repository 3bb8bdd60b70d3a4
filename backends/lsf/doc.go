// Package lsf runs jobs on IBM Spectrum LSF through the web services of LSF
// Application Center (PAC), the API IBM's Bridge Operator used.
//
// resourceURL is Application Center's base URL, e.g. https://host:8443 (the
// samples' form) or https://host:8443/platform; a URL without a path gets
// /platform. TLS, including a CA bundle (--ca-file), is the runner's HTTP
// client's. Every request carries a per-request timeout (RequestTimeout).
//
// # Authentication
//
// Credentials: the Secret's username (or user) and password (or pass), re-read
// at every logon. Logon is POST ws/logon with the XML body
// <User><name>..</name><pass>..</pass></User>, built with encoding/xml so the
// password is escaped. The token is sent on every request as the cookie
// platform_token=<token with every " replaced by #quote#>. It is renewed
// before the expiry embedded in it (user"2015-12-08T14:35:51Z"..., read as an
// expiry; if the embedded time is not in the future it is read as the logon
// time and the token is renewed after 55 minutes, under the 60-minute idle
// release), and at once whenever a request is refused for authentication
// (HTTP 401 or 403, or an error message about the token): the request is then
// sent once more with a new token, and a second refusal is backends.ErrAuth.
//
// # Jobs
//
// Submit is POST ws/jobs/submit, multipart/mixed, for the application named by
// jobproperties' app (default "generic"): an AppName part, a data part that
// is itself multipart/mixed with one <AppParam> XML sub-part per parameter,
// then one application/octet-stream part per file. jobproperties is validated
// strictly; its keys, with the IBM Bridge Operator sample keys as aliases:
//
//	queue           QUEUE           (alias Queue)
//	jobName         JOB_NAME        (alias JOB_NAME); always prefixed with the idempotency key
//	outputFile      OUTPUT_FILE     (alias OutputFileName, OUTPUT_FILE)
//	errorFile       ERROR_FILE      (alias ErrorFileName, ERROR_FILE)
//	runLimitHour    RUNLIMITHOUR    (alias RunLimitHour, RUNLIMITHOUR), integer >= 0
//	runLimitMinute  RUNLIMITMINUTE  (alias RunLimitMinute, RUNLIMITMINUTE), 0-59
//	extraParams     EXTRA_PARAMS    raw bsub options (alias EXTRA_PARAMS)
//	numNodes        adds "-nnodes N" to EXTRA_PARAMS as the Bridge Operator did (aliases numnodes, NodesNumber)
//	app             the application (AppName), default generic (alias AppName)
//	params          object of further application parameters, ID -> value
//
// The script: a remote path (scriptLocation=remote) is COMMANDTORUN itself;
// an inline or S3 script is uploaded as the file <key>.sh and run from the
// job's working directory (directly when it starts with #!, else with
// /bin/sh). jobdata.jobParameters and jobdata.scriptMetadata, when given, are
// uploaded beside it as bridge-parameters.json and bridge-metadata.json, and
// jobdata.additionalData files (the backend is an InputStager) under their
// base names. Each file is a <type>file</type> parameter whose value is
// "<name>,upload", as the Bridge Operator sent it.
//
// Idempotency: the job name (JOB_NAME) is "<key>" or "<key>-<jobName>".
// FindByKey asks GET ws/jobs?jobname=<key>* ("Get basic job information",
// which also lists DONE and EXIT jobs until CLEAN_PERIOD) and keeps the jobs
// whose name is the key or starts with "<key>-"; a job that left mbatchd is
// not found, so adoption works for jobs younger than CLEAN_PERIOD.
//
// Status is GET ws/jobs/{id} (JSON requested; XML is decoded too); when that
// answers 404 (the job left mbatchd) it falls back to GET
// ws/jobhistory?ids={id}, whose text is read as bhist's ("Done successfully",
// "Completed <exit>", "<KILL>", "Exited with exit code N"). States:
//
//	PEND, WAIT (chunk job), PROV (provisioning)  PENDING
//	RUN                                          RUNNING
//	PSUSP, USUSP, SSUSP                          SUSPENDED
//	DONE                                         DONE
//	EXIT                                         KILLED when exitInfo says the owner or an
//	                                             administrator killed it (TERM_OWNER, TERM_ADMIN,
//	                                             TERM_FORCE_*, TERM_REQUEUE_*; or the numbers 8, 9,
//	                                             10, 11, 14, 15), when the history shows <KILL>, or
//	                                             when exit code 130 (bkill's SIGINT) comes without
//	                                             exit information; else FAILED with the exit code
//	                                             and exitInfo (e.g. TERM_RUNLIMIT) as the reason
//	ZOMBI (killed while its host was unreachable) KILLED
//	UNKWN (mbatchd lost contact with sbatchd)    UNKNOWN
//
// StatusMany (backends.StatusBatcher) reads many jobs with one request:
// GET ws/jobs/{id1},{id2},… ("Get detailed job information by job ID",
// https://www.ibm.com/docs/en/slac/10.2.0?topic=jobs-get-detailed-job-information-by-job-id-get),
// at most 100 ids a request (a longer list is split, keeping the request
// line far under Tomcat's 8 KB), each listed job mapped as above. A job not
// listed (unknown, or gone from mbatchd, whose history only Status reads),
// or listed with a state not in the table, is left out; a 404 (none listed)
// is an empty answer.
//
// Cancel: POST ws/jobs/kill with the form ids=ID (the JACS client's call);
// if the server does not serve it (404/405), POST ws/userCmd with
// <UserCmd><cmd>bkill ID</cmd></UserCmd> (the Bridge Operator's call), and
// that choice is kept. A refused kill of a job that has already ended is not
// an error.
//
// FetchOutput (s3upload.files) is POST ws/jobfiles/download/{id} with the
// body dir=<path>; a relative path is taken from the job's working directory
// (cwd). A multipart/mixed answer is unpacked (the part named after the file,
// else the first part); any other answer is the file itself.
//
// ProbeLoad (backends.LoadProber) is one POST ws/queues/getfullinfo with
// names=all (load.go): the job's queue's numPend and numRun, and no fit for
// a closed or inactive queue; the cluster's agent makes that request once
// for every step (MeasureLoad, LoadFrom).
//
// Errors: 401/403 are authentication (see above); 400 and 422 on submit are
// backends.ErrInvalid naming jobproperties; 429, 5xx and transport failures
// are backends.ErrTransient; error bodies <error><message>..</message></error>
// and {"message":".."} are reported by their message.
//
// # Job arrays
//
// SubmitArray submits one LSF job array: JOB_NAME is "<name>[<elements>]%M"
// (bsub -J's syntax). LSF numbers elements from 1 and refuses 0, so array
// index i is always element i+1 (an array key 0-999 is elements 1-1000):
// the command runs through <key>-task.sh, uploaded with the job, which sets
// BRIDGE_TASK_INDEX=$((LSB_JOBINDEX - 1)) in the job's own shell (a command
// line would also be expanded by the application's submit script, where
// LSB_JOBINDEX is not set) and then runs the single job's command. The
// array's id is the job id: ArrayStatus is one GET ws/jobs/{id}, whose
// entries are the elements, "<id>[<element>]" (or a separate jobIndex);
// Status of the id folds them, Cancel kills them all (the kill call with the
// array's id, as bkill <id> does), FindByKey maps an element to its array.
// Once the array has left mbatchd its elements are not found (the job
// history is read for single jobs only). LSF takes an array specification
// of at most 255 characters (refused before sending, naming the array key)
// and elements up to MAX_JOB_ARRAY_SIZE, 1000 by default (a refusal names
// the array key and that limit): 0-999 fits a default cluster.
//
// # Unverified
//
// Application Center cannot run here: this backend is tested against a fake
// (internal/fakelsf) that follows the reference's description of the protocol.
// Not confirmed from a primary source, and handled tolerantly:
//   - the JSON key casing ("job" or "Job", "pseudoJob"), whether one element
//     arrives as an object or an array of one, and whether ids are numbers or
//     strings: all are accepted;
//   - the submit answer's shape ({"id":N}, {"id":"N"} or <job><id>N</id></job>);
//   - the kill endpoints (neither is in the 10.2 documentation);
//   - the meaning of the time in the token, and how an expired token is refused;
//   - exitStatus as an exit code (a value above 255 that is a multiple of 256
//     is read as a wait status), the names and numbers of exitInfo, and the
//     time formats (RFC 3339, "2006-01-02 15:04:05", ctime-like, epoch);
//   - the jobhistory text and the download answer's part names;
//   - the parameter id of file parameters (the file's name, as the Bridge
//     Operator sent it);
//   - the JSON of ws/queues/getfullinfo (read as the jobs' mapping, "queue"
//     an object or an array) and its status field (read as bqueues'
//     "Open:Active" words or as qStatus bits);
//   - how ws/jobs/{id} writes an array's elements ("<id>[<n>]", as bjobs
//     does, or a separate index field): both are read.
package lsf
