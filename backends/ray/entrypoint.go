package ray

import (
	"encoding/json"
	"fmt"
	"strings"
)

// How the script reaches the Ray job (the design in one place).
//
// Ray's Jobs REST API takes an entrypoint, a shell command line that the job
// supervisor runs with `/bin/sh -c` on the cluster, and a runtime_env. It has
// no way to upload a file except working_dir packages (a zip uploaded through
// PUT /api/packages and referenced as gcs://...), which would tie us to a
// Ray-internal protocol and its size limits.
//
// So no text that comes from the job description is ever put into the
// entrypoint. The entrypoint is constant text plus the interpreter's name,
// each shell-quoted, under umask 077 (the job's files are its owner's):
//
//	umask 077 && 'python' -u -c 'import os;exec(os.environ.pop("BRIDGE_BOOTSTRAP"))'
//
// and everything else travels as runtime_env.env_vars, which Ray hands to
// the driver as plain environment variables (no shell, no parsing):
//
//	BRIDGE_BOOTSTRAP      the bootstrap below (constant Python)
//	BRIDGE_SCRIPT         the inline (or S3) script's text
//	BRIDGE_SCRIPT_PATH    the path on the cluster (scriptLocation remote)
//	BRIDGE_ARGS           jobproperties.args as a JSON array of strings
//	BRIDGE_JOB_PARAMETERS jobdata.jobParameters (JSON), as for every backend
//	BRIDGE_SCRIPT_METADATA jobdata.scriptMetadata (JSON)
//	BRIDGE_JOB_NAME, BRIDGE_JOB_KEY
//
// (The bootstrap is in the environment rather than in the entrypoint only
// because Ray prints the entrypoint into the job's log, "Running entrypoint
// for job ...": a one-liner keeps the step's log readable.)
//
// The bootstrap sets sys.argv from BRIDGE_ARGS and runs the script as
// __main__: a path with runpy.run_path (as `python path` would, the script's
// directory first on sys.path), inline text with exec() of code compiled
// under the name "<bridge-script>" and registered with linecache, and an
// excepthook that prints tracebacks through the traceback module (the
// interpreter's own printer reads source lines only from files) without
// the bootstrap's frames, so tracebacks show the script's own lines. Its exit status is the driver's:
// sys.exit(n) and uncaught exceptions behave as with `python script.py`.
// `-u` makes the driver's output unbuffered so that its lines reach Ray's
// log file, and so ReadLogs, as they are printed.
//
// The price: Linux limits one environment string to 128 KiB
// (MAX_ARG_STRLEN), so an inline script, the parameters and the metadata
// must each stay below maxEnvValue; Validate says so and points to
// scriptLocation remote or runtime_env.working_dir for larger code. And the
// script's text is in the environment of the job's workers when the script
// calls ray.init() (runtime_env.env_vars apply to the whole job); the
// bootstrap removes it from the driver's own os.environ, so the driver's
// child processes do not inherit it.
//
// jobproperties.entrypoint replaces all this with the user's own shell
// command, taken verbatim (it is theirs to quote); the same variables are
// set, e.g. {"entrypoint": "bash -c \"$BRIDGE_SCRIPT\""} for a shell script.

// bootstrap is the constant Python program that runs the script. Keep it
// valid for Python 3.8+.
const bootstrap = `import json,os,sys,traceback
def _hook(t,v,b):
    while b is not None and b.tb_frame.f_code.co_filename=="<string>":
        b=b.tb_next
    traceback.print_exception(t,v,b)
sys.excepthook=_hook
a=json.loads(os.environ.pop("BRIDGE_ARGS","") or "[]")
p=os.environ.get("BRIDGE_SCRIPT_PATH","")
if p:
    import runpy
    sys.argv=[p]+a
    sys.path[0]=os.path.dirname(os.path.abspath(p))
    runpy.run_path(p,run_name="__main__")
else:
    import linecache
    s=os.environ.pop("BRIDGE_SCRIPT")
    n="<bridge-script>"
    linecache.cache[n]=(len(s),None,s.splitlines(True),n)
    sys.argv=[n]+a
    exec(compile(s,n,"exec"),{"__name__":"__main__","__builtins__":__builtins__})
`

// maxEnvValue is the largest value we put in one environment variable:
// Linux's MAX_ARG_STRLEN (32 pages = 128 KiB, including "NAME=" and the
// terminating NUL) with room to spare.
const maxEnvValue = 120 << 10

// Environment variables the backend sets; jobproperties may not set them.
const (
	envBootstrap  = "BRIDGE_BOOTSTRAP"
	envScript     = "BRIDGE_SCRIPT"
	envScriptPath = "BRIDGE_SCRIPT_PATH"
	envArgs       = "BRIDGE_ARGS"
	envParameters = "BRIDGE_JOB_PARAMETERS"
	envMetadata   = "BRIDGE_SCRIPT_METADATA"
	envJobName    = "BRIDGE_JOB_NAME"
	envJobKey     = "BRIDGE_JOB_KEY"
)

var reservedEnv = []string{envBootstrap, envScript, envScriptPath, envArgs, envParameters, envMetadata, envJobName, envJobKey}

// shellQuote quotes s for POSIX sh as one single-quoted word; a single
// quote inside becomes: close the quotes, a backslash-escaped quote, reopen.
// Every other byte is literal inside single quotes, so the shell sees s
// exactly, whatever it contains.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// entrypoint builds the command line for the job: the bootstrap run by
// python, or the user's own command. Either runs with umask 077: Ray's job
// supervisor gives the driver its raylet's umask (022), so what the job
// writes would be readable by every user of the node. (Ray's own files,
// the driver's log among them, are Ray's: written server side, not ours
// to set.)
func entrypoint(p Properties) string {
	const private = "umask 077 && "
	if p.Entrypoint != "" {
		return private + p.Entrypoint
	}
	py := p.Python
	if py == "" {
		py = "python"
	}
	return private + shellQuote(py) + " -u -c " + shellQuote(`import os;exec(os.environ.pop("`+envBootstrap+`"))`)
}

// envVars returns the variables that carry the job to the bootstrap.
func envVars(jobName, key, script, scriptPath string, args []string, params, meta json.RawMessage) (map[string]string, error) {
	env := map[string]string{envJobName: jobName, envJobKey: key, envBootstrap: bootstrap}
	switch {
	case scriptPath != "":
		env[envScriptPath] = scriptPath
	case script != "":
		env[envScript] = script
	}
	if len(args) > 0 {
		b, err := json.Marshal(args)
		if err != nil {
			return nil, err
		}
		env[envArgs] = string(b)
	}
	if len(params) > 0 {
		env[envParameters] = string(params)
	}
	if len(meta) > 0 {
		env[envMetadata] = string(meta)
	}
	for k, v := range env {
		if len(v) > maxEnvValue {
			return nil, fmt.Errorf("%s would be %d bytes; Linux limits one environment variable to 128 KiB", k, len(v))
		}
		if strings.IndexByte(v, 0) >= 0 {
			return nil, fmt.Errorf("%s contains a NUL byte, which no environment variable can carry", k)
		}
	}
	return env, nil
}
