package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"
)

// flagGroupKey annotates a flag with the group its command's help lists it
// under.
const flagGroupKey = "bridge-runner/group"

// The flag groups of the step commands' help, in the order shown.
const (
	groupJob       = "Job"
	groupRecord    = "Record"
	groupBackend   = "Backend"
	groupStaging   = "Staging (S3)"
	groupOutputs   = "Outputs and logs"
	groupBehaviour = "Behaviour"
)

var flagGroups = []string{groupJob, groupRecord, groupBackend, groupStaging, groupOutputs, groupBehaviour}

// groupOf is the group of each flag of invoke, create-configmap and
// cleanup: one table, so a new flag without a group fails
// TestEveryFlagHasAGroup rather than landing in a heap of its own.
func groupOf(name string) string {
	switch {
	case strings.HasPrefix(name, "s3-"), name == "additional-data":
		return groupStaging
	case strings.HasPrefix(name, "output-"):
		return groupOutputs
	}
	switch name {
	case "script", "script-location", "script-metadata", "script-extra-location", "job-parameters", "job-properties",
		"array", "targets", "placement", "replace-after", "update-interval", "pending-limit":
		return groupJob
	case "job-name", "configmap", "namespace", "kubeconfig", "state-dir", "store", "status-keys":
		return groupRecord
	case "backend", "resource-url", "resource-secret", "credentials-dir", "ca-file", "insecure-skip-tls-verify",
		"watcher", "max-requests-per-second", "cluster":
		return groupBackend
	case "termination-log", "follow-logs", "log-interval", "log-dir", "log-task":
		return groupOutputs
	case "grace-period", "submit-lease", "retry-budget", "resubmit", "exit-zero", "wait", "force", "any-owner":
		return groupBehaviour
	}
	return ""
}

// groupFlags annotates every flag of cmd with its group and gives cmd the
// grouped help.
func groupFlags(cmd *cobra.Command) {
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if g := groupOf(f.Name); g != "" {
			_ = cmd.Flags().SetAnnotation(f.Name, flagGroupKey, []string{g})
		}
	})
	wrappedHelp(cmd)
}

// wrappedHelp gives cmd the help wrapped to the terminal.
func wrappedHelp(cmd *cobra.Command) {
	cmd.SetHelpFunc(func(c *cobra.Command, _ []string) { writeHelp(c.OutOrStdout(), c, terminalWidth()) })
}

// terminalWidth is the width help is wrapped to: $COLUMNS, else the
// terminal's, else 80.
func terminalWidth() int {
	if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n >= 40 {
		return n
	}
	if w, _, err := term.GetSize(int(os.Stdout.Fd())); err == nil && w >= 40 {
		return w
	}
	return 80
}

// writeHelp writes a step command's help as a person reads it: what it
// does, how to call it, examples, then the flags by group, the
// credential files each backend reads and the exit codes.
func writeHelp(w io.Writer, c *cobra.Command, width int) {
	fmt.Fprintf(w, "%s\n\nUsage:\n", wrap(c.Short, width, ""))
	if c.Runnable() {
		fmt.Fprintf(w, "  %s\n", c.UseLine())
	}
	if c.HasAvailableSubCommands() {
		fmt.Fprintf(w, "  %s [command]\n", c.CommandPath())
	}
	if len(c.Aliases) > 0 {
		fmt.Fprintf(w, "\nAliases:\n  %s\n", strings.Join(append([]string{c.Name()}, c.Aliases...), ", "))
	}
	if c.Example != "" {
		fmt.Fprintf(w, "\nExamples:\n%s\n", c.Example)
	}
	if c.Long != "" {
		fmt.Fprintf(w, "\n%s\n", wrap(c.Long, width, ""))
	}
	if c.HasAvailableSubCommands() {
		fmt.Fprintf(w, "\nCommands:\n%s", commandList(c, width))
	}
	grouped := false
	for _, g := range flagGroups {
		fs := pflag.NewFlagSet(g, pflag.ContinueOnError)
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if v := f.Annotations[flagGroupKey]; len(v) == 1 && v[0] == g {
				fs.AddFlag(f)
			}
		})
		if fs.HasFlags() {
			grouped = true
			fmt.Fprintf(w, "\n%s flags:\n%s", g, fs.FlagUsagesWrapped(width-1))
		}
	}
	other := pflag.NewFlagSet("other", pflag.ContinueOnError)
	c.LocalFlags().VisitAll(func(f *pflag.Flag) {
		if f.Annotations[flagGroupKey] == nil {
			other.AddFlag(f)
		}
	})
	other.AddFlagSet(c.InheritedFlags())
	title := "Other flags"
	if !grouped {
		title = "Flags"
	}
	fmt.Fprintf(w, "\n%s:\n%s", title, other.FlagUsagesWrapped(width-1))
	if c.Annotations[helpCredentials] != "" {
		fmt.Fprintf(w, "\n%s", credentialsHelp)
		if c.Flags().Lookup("s3-credentials-dir") != nil {
			fmt.Fprint(w, s3CredentialsHelp)
		}
	}
	if c.Annotations[helpExitCodes] != "" {
		fmt.Fprintf(w, "\n%s\n", exitCodesHelp)
	}
	if c.HasAvailableSubCommands() {
		fmt.Fprintf(w, "\n%s\n", wrap(fmt.Sprintf("Use \"%s [command] --help\" for more information about a command.", c.CommandPath()), width, ""))
	}
	if !grouped {
		return
	}
	fmt.Fprintf(w, "\n%s\n", wrap("Every flag can also be given as an environment variable: BRIDGE_ and the flag's name in upper case with - as _ (--resource-url is BRIDGE_RESOURCE_URL); a flag on the command line wins.", width, ""))
}

// helpCredentials marks the commands that reach a backend: their help lists
// the credential files. helpExitCodes marks invoke, whose help lists the
// exit codes of a job's outcomes.
const (
	helpCredentials = "bridge-runner/help-credentials"
	helpExitCodes   = "bridge-runner/help-exit-codes"
)

const credentialsHelp = `Credential files: in --credentials-dir (default /credentials, where a pod
mounts the Secret), one file per key:
  slurm (REST)    username, token (a JWT from scontrol token; or password)
  slurm over SSH  ssh-privatekey, known_hosts; optional ssh-certificate,
  and htcondor    ssh-passphrase; jumpN-known_hosts, jumpN-ssh-privatekey
                  for the jump hosts
  lsf             username, password
  ray             token, only when the dashboard wants one
  quantum         crn, apikey; optional iam_url
  local           none
`

// s3CredentialsHelp ends credentialsHelp for the commands that stage
// through S3 (cleanup does not: it names no S3 flag).
const s3CredentialsHelp = `  S3 staging      accesskey, secretkey in --s3-credentials-dir (/s3credentials)
`

const exitCodesHelp = `Exit codes:
  0   DONE
  1   FAILED: the job's own failure
  2   invalid input or configuration; nothing was submitted
  3   KILLED: kill flag, SIGTERM, cleanup, or cancelled remotely
  4   UNKNOWN: lost track of the job
  5   FAILED by the infrastructure (node failure, preemption); a retry
      submits a new attempt
  75  temporary failure after the retry budget; a retry re-attaches`

// commandList is c's commands, one a line, each with its description
// wrapped under itself (cobra's list ran past 100 columns).
func commandList(c *cobra.Command, width int) string {
	var subs []*cobra.Command
	pad := 0
	for _, sub := range c.Commands() {
		if sub.IsAvailableCommand() || sub.Name() == "help" {
			subs = append(subs, sub)
			pad = max(pad, len(sub.Name()))
		}
	}
	var b strings.Builder
	hang := strings.Repeat(" ", 2+pad+1)
	for _, sub := range subs {
		short := strings.ReplaceAll(wrap(sub.Short, width-len(hang), ""), "\n", "\n"+hang)
		fmt.Fprintf(&b, "  %-*s %s\n", pad, sub.Name(), short)
	}
	return b.String()
}

// wrap fills text's paragraphs to width, keeping lines that start with a
// space (examples, tables) as they are.
func wrap(text string, width int, indent string) string {
	var out []string
	for _, para := range strings.Split(text, "\n\n") {
		lines := strings.Split(para, "\n")
		if strings.HasPrefix(lines[0], " ") {
			out = append(out, para)
			continue
		}
		var b strings.Builder
		col := 0
		for _, word := range strings.Fields(para) {
			if col > 0 && col+1+len(word) > width {
				b.WriteString("\n")
				col = 0
			}
			if col == 0 {
				b.WriteString(indent)
				col = len(indent)
			} else {
				b.WriteString(" ")
				col++
			}
			b.WriteString(word)
			col += len(word)
		}
		out = append(out, b.String())
	}
	return strings.Join(out, "\n\n")
}
