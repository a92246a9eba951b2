// Command sagebox runs SageMaker's PyTorch workflow on your own machine: a
// server that speaks the SageMaker, CloudWatch Logs and S3 APIs, a model
// server for inference scripts, and a CLI to train and inspect jobs.
//
// main only wires things: every subcommand lives in its own file, and the
// packages under internal/ do the work.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// env is how commands read the environment, so tests can supply their own.
type env struct {
	getenv func(string) string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
}

// run executes the command line args and returns the process exit code.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := &env{getenv: getenv, stdin: stdin, stdout: stdout, stderr: stderr}
	root := newRootCmd(e)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.ExecuteContext(ctx); err != nil {
		if ee, ok := err.(exitError); ok {
			if ee.msg != "" {
				fmt.Fprintln(stderr, "sagebox:", ee.msg)
			}
			return ee.code
		}
		fmt.Fprintln(stderr, "sagebox:", err)
		return 1
	}
	return 0
}

// exitError ends the process with a specific code (a failed training job
// exits 2, for example) after printing msg, if any.
type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string { return e.msg }

func newRootCmd(e *env) *cobra.Command {
	root := &cobra.Command{
		Use:           "sagebox",
		Short:         "SageMaker's PyTorch workflow on your own machine",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(
		newServerCmd(e),
		newTrainCmd(e),
		newJobsCmd(e),
		newDeployCmd(e),
		newInvokeCmd(e),
		newEndpointsCmd(e),
		newModelServerCmd(e.getenv),
		newShimCmd(),
		newStageCmd(e),
		newCollectCmd(e),
	)
	return root
}
