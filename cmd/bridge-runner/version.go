package main

import (
	"encoding/json"
	"fmt"
	"runtime"

	"github.com/spf13/cobra"
)

func (a *app) newVersionCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "version",
		Short:   "Print the version",
		Long:    "version prints bridge-runner's version, commit, Go version and built-in backends.",
		Example: "  bridge-runner version\n  bridge-runner version -o json",
		Args:    noArgs,
		RunE: func(*cobra.Command, []string) error {
			info := map[string]any{"version": versionString(), "commit": commit, "go": runtime.Version(), "backends": a.registry.Names()}
			switch output {
			case "json":
				b, _ := json.Marshal(info)
				fmt.Fprintln(a.stdout, string(b))
			case "", "text":
				fmt.Fprintf(a.stdout, "bridge-runner %s (commit %s, %s, backends %v)\n", versionString(), orNone(commit), runtime.Version(), a.registry.Names())
			default:
				return usageError{fmt.Errorf("-o: %q is not a format; use text or json", output)}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
