package main

import (
	"github.com/spf13/cobra"

	"github.com/sagebox/sagebox/internal/proc"
)

// newShimCmd is the hidden "exec-shim" subcommand: internal/proc's process
// supervisor (proc.RunSupervisor). Training hosts run under it detached,
// so a job survives the server; model-server workers run under it
// attached, so nothing a worker forks outlives the model server. The name
// is kept from older binaries, whose running jobs a new server re-adopts.
//
//	sagebox exec-shim --dir STATE_DIR --run ID -- COMMAND [ARG...]
//	sagebox exec-shim --attached --parent PID -- COMMAND [ARG...]
//
// Flags are not parsed by cobra: everything goes to RunSupervisor verbatim,
// so the command's own flags are never mistaken for ours.
func newShimCmd() *cobra.Command {
	return &cobra.Command{
		Use:                "exec-shim " + proc.SupervisorUsage,
		Short:              "Supervise a process: its group, its exit, everything it forks (internal)",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if code := proc.RunSupervisor(cmd.Context(), args); code != 0 {
				return exitError{code: code}
			}
			return nil
		},
	}
}
