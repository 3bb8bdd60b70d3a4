package slurm

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/bridge-runner/bridge-runner/backends"
)

// stageOutMinutes is the stage-out job's time limit: it only copies files.
const stageOutMinutes = 10

// StageOut implements backends.StageOuter. slurmrestd cannot read files, so
// after the job ended a small job is submitted beside it, in its working
// directory, partition, account and QOS, that PUTs each file (and the job's
// standard output) to its presigned URL with curl. The URLs travel in the
// stage-out job's environment, never in its script nor on a command line
// (curl reads each from its standard input); no S3 key reaches the
// cluster. The stage-out job exits 1 if an upload failed; a missing file is
// only reported on its stderr, which goes nowhere: the runner asks S3 which
// objects arrived.
func (b *Backend) StageOut(ctx context.Context, id string, uploads []backends.Upload, logURL string) (string, error) {
	j, err := b.getJob(ctx, id)
	if err != nil {
		return "", err
	}
	env := map[string]string{}
	var lines []string
	for i, u := range uploads {
		if !curlConfigSafe(u.URL) {
			return "", fmt.Errorf("the stage-out URL of %s cannot be written in a curl config file", u.Path)
		}
		name := "BRIDGE_URL_" + strconv.Itoa(i)
		env[name] = u.URL
		lines = append(lines, "put "+shellQuote(u.Path)+` "$`+name+`"`)
	}
	if logURL != "" {
		if !curlConfigSafe(logURL) {
			return "", errors.New("the stage-out URL of the job's output cannot be written in a curl config file")
		}
		env["BRIDGE_LOG_URL"] = logURL
		lines = append(lines, "put "+shellQuote(outputPath(j, id))+` "$BRIDGE_LOG_URL"`)
	}
	props := map[string]any{
		"name":            "stageout-" + id,
		"standard_output": "/dev/null",
		"standard_error":  "/dev/null",
		"time_limit":      stageOutMinutes,
		"environment":     env,
	}
	for k, v := range map[string]string{"current_working_directory": j.WorkingDir, "partition": j.Partition,
		"account": j.Account, "qos": j.QOS} {
		if v != "" {
			props[k] = v
		}
	}
	if _, ok := props["current_working_directory"]; !ok {
		props["current_working_directory"] = DefaultWorkingDirectory
	}
	raw, err := json.Marshal(props)
	if err != nil {
		return "", err
	}
	key := j.Comment
	if key == "" {
		key = "br-" + id
	}
	return b.Submit(ctx, backends.Job{Key: key + "-stageout", Name: "stageout", Script: stageOutScript(id, lines), Properties: raw})
}

func stageOutScript(id string, puts []string) string {
	return `#!/bin/sh
# bridge-runner stage-out of Slurm job ` + id + `: PUT each output to its
# presigned URL (from the environment); exit 1 if an upload failed.
rc=0
put() {
	if [ ! -f "$1" ]; then
		echo "bridge-runner stage-out: $1: not found" >&2
		return 0
	fi
	# The URL reaches curl on its standard input (printf is built into
	# sh), never on its command line, which other users can read.
	printf 'url = "%s"\n' "$2" | curl -fsS --retry 3 --retry-delay 1 -K - -T "$1" >/dev/null || {
		echo "bridge-runner stage-out: $1: upload failed" >&2
		rc=1
	}
}
` + strings.Join(puts, "\n") + `
exit $rc
`
}

// outputPath is where the job's standard output went: its standard_output
// with the filename patterns Slurm expands (22.05 reports them unexpanded),
// or Slurm's default slurm-<id>.out (slurm-<array id>_<index>.out for an
// array's task).
func outputPath(j *jobInfo, id string) string {
	p := j.StandardOutput
	if p == "" && isTask(j) {
		p = "slurm-%A_%a.out"
	}
	if p == "" {
		return "slurm-" + id + ".out"
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] != '%' || i+1 == len(p) {
			b.WriteByte(p[i])
			continue
		}
		i++
		switch p[i] {
		case 'j': // an array task's own id
			b.WriteString(cmp.Or(j.id(), id))
		case 'A':
			b.WriteString(cmp.Or(j.baseID(), id))
		case 'a':
			if n, ok := number(j.ArrayTaskID); ok {
				b.WriteString(strconv.FormatInt(n, 10))
			} else {
				b.WriteString("%a")
			}
		case 'u':
			b.WriteString(j.UserName)
		case 'x':
			b.WriteString(j.Name)
		case '%':
			b.WriteByte('%')
		default: // patterns of steps and nodes (%s, %t, %N, ...) are left as they are
			b.WriteByte('%')
			b.WriteByte(p[i])
		}
	}
	return path.Clean(b.String())
}

var _ backends.StageOuter = (*Backend)(nil)
