package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

type createOptions struct {
	store storeOptions
	spec  record.Spec
	// tls verifies the backend when the resourceURL is probed to tell
	// which system it is (a Ray dashboard answers /api/version).
	tls backendOptions
}

func (a *app) newCreateCmd() *cobra.Command {
	o := &createOptions{}
	cmd := &cobra.Command{
		Use:   "create-configmap",
		Short: "Validate the job description and write it to the ConfigMap <job-name>-bridge-cm",
		Long: `create-configmap checks the job description and writes it to the record that
invoke and cleanup use: the ConfigMap <job-name>-bridge-cm (keys compatible with
IBM's Bridge Operator), or a file with --state-dir.

It is idempotent: an existing record with the same description is fine (a retried
step does no harm), one with a different description is an error (exit 2) that
names the keys that differ.`,
		Example: `  bridge-runner create-configmap --job-name sim-42 --backend slurm \
    --resource-url https://slurm.example.org:6820 --script "$(cat job.sh)" \
    --job-properties '{"partition":"debug","time_limit":30}'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			code, err := a.runCreate(cmd, o)
			if err != nil {
				a.log.Error("create-configmap failed", "err", err)
			}
			return exitError{code}
		},
	}
	o.store.addFlags(cmd.Flags())
	o.tls.addTLSFlags(cmd.Flags())
	specFlags(cmd.Flags(), &o.spec)
	_ = cmd.RegisterFlagCompletionFunc("backend", a.completeBackends)
	groupFlags(cmd)
	return cmd
}

func (a *app) runCreate(cmd *cobra.Command, o *createOptions) (int, error) {
	if err := checkScriptFlag(cmd, &o.spec); err != nil {
		return exitCode(nil, err), err
	}
	hc, err := runner.NewHTTPClient(o.tls.CAFile, o.tls.Insecure)
	if err != nil {
		return exitCode(nil, err), err
	}
	if err := a.chooseBackend(cmd, &o.spec, hc); err != nil {
		return exitCode(nil, err), err
	}
	if _, err := o.spec.Parse(); err != nil {
		return exitCode(nil, err), err
	}
	store, err := o.store.build(a)
	if err != nil {
		return exitCode(nil, err), err
	}
	a.recordOwner(cmd, store)
	rec, err := runner.EnsureRecord(cmd.Context(), store, o.spec, defaultRetryBudget)
	if err != nil {
		return exitCode(nil, err), err
	}
	a.log.Info("job description recorded", "record", store.Describe())
	out, _ := json.Marshal(map[string]string{"record": store.Describe(), "uid": rec.UID, "key": runner.IdempotencyKey(rec.UID)})
	fmt.Fprintln(a.stdout, string(out))
	return ExitDone, nil
}
