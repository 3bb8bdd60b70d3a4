package main

import (
	"errors"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/bridge-runner/bridge-runner/record"
)

// maxGrace bounds --grace-period: cancelling a job never needs longer.
const maxGrace = time.Hour

// durationLimits bound every duration flag: a negative, overflowing or
// absurd value is a typo that would otherwise surface as a hang or as a
// step that stops at once.
var durationLimits = map[string][2]time.Duration{
	"grace-period": {time.Second, maxGrace},
	"submit-lease": {time.Second, time.Hour},
	"retry-budget": {time.Second, 7 * 24 * time.Hour},
	"wait":         {0, time.Hour},
}

// checkDurations refuses duration flags outside their limits (exit 2).
func checkDurations(cmd *cobra.Command) error {
	var errs []error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		lim, ok := durationLimits[f.Name]
		if !ok || f.Value.Type() != "duration" {
			return
		}
		d, err := cmd.Flags().GetDuration(f.Name)
		if err == nil {
			err = record.CheckDuration(f.Name, d, lim[0], lim[1])
		}
		if err != nil {
			errs = append(errs, err)
		}
	})
	return errors.Join(errs...)
}
