package main

import (
	"github.com/spf13/cobra"

	"github.com/sagebox/sagebox/internal/training"
)

// newShimCmd is the hidden "exec-shim" subcommand: the process that sits
// between the server and a training host's process so the job survives the
// server (see training.RunShim). The runner starts it as
//
//	sagebox exec-shim --dir STATE_DIR -- COMMAND [ARG...]
//
// Flags are not parsed by cobra: everything goes to RunShim verbatim, so
// the training command's own flags are never mistaken for ours.
func newShimCmd() *cobra.Command {
	return &cobra.Command{
		Use:                "exec-shim --dir STATE_DIR -- COMMAND [ARG...]",
		Short:              "Run a training process detached from the server (internal)",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if code := training.RunShim(cmd.Context(), args); code != 0 {
				return exitError{code: code}
			}
			return nil
		},
	}
}
