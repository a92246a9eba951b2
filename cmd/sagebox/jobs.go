package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/spf13/cobra"
)

func newJobsCmd(e *env) *cobra.Command {
	var endpoint string
	cmd := &cobra.Command{
		Use:   "jobs",
		Short: "List, inspect, stop and tail training jobs",
	}
	cmd.PersistentFlags().StringVar(&endpoint, "endpoint", "", "sagebox server URL (default $SAGEBOX_ENDPOINT or "+defaultEndpoint+")")
	cmd.AddCommand(newJobsLsCmd(e, &endpoint), newJobsDescribeCmd(e, &endpoint), newJobsStopCmd(e, &endpoint), newJobsLogsCmd(e, &endpoint))
	return cmd
}

func newJobsLsCmd(e *env, endpoint *string) *cobra.Command {
	var (
		jsonOut bool
		status  string
		name    string
		max     int
	)
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List training jobs, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, err := newClients(e, *endpoint)
			if err != nil {
				return err
			}
			in := &sagemaker.ListTrainingJobsInput{SortBy: smtypes.SortByCreationTime, SortOrder: smtypes.SortOrderDescending}
			if status != "" {
				in.StatusEquals = smtypes.TrainingJobStatus(status)
			}
			if name != "" {
				in.NameContains = aws.String(name)
			}
			var jobs []smtypes.TrainingJobSummary
			p := sagemaker.NewListTrainingJobsPaginator(c.sm, in)
			for p.HasMorePages() && (max <= 0 || len(jobs) < max) {
				page, err := p.NextPage(ctx)
				if err != nil {
					return c.explain(ctx, fmt.Errorf("list training jobs: %w", err))
				}
				jobs = append(jobs, page.TrainingJobSummaries...)
			}
			if max > 0 && len(jobs) > max {
				jobs = jobs[:max]
			}
			if jsonOut {
				enc := json.NewEncoder(e.stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(jobs)
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tSTATUS\tCREATED\tDURATION")
			for _, j := range jobs {
				created := aws.ToTime(j.CreationTime)
				end := time.Now()
				if j.TrainingEndTime != nil {
					end = *j.TrainingEndTime
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", aws.ToString(j.TrainingJobName), j.TrainingJobStatus,
					created.Local().Format("2006-01-02 15:04:05"), end.Sub(created).Round(time.Second))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	cmd.Flags().StringVar(&status, "status", "", "only jobs in this status (InProgress, Completed, Failed, Stopping, Stopped)")
	cmd.Flags().StringVar(&name, "name-contains", "", "only jobs whose name contains this")
	cmd.Flags().IntVar(&max, "max", 50, "at most this many jobs (0: all)")
	return cmd
}

func newJobsDescribeCmd(e *env, endpoint *string) *cobra.Command {
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "describe JOB",
		Short: "Show a training job",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, err := newClients(e, *endpoint)
			if err != nil {
				return err
			}
			d, err := c.sm.DescribeTrainingJob(ctx, &sagemaker.DescribeTrainingJobInput{TrainingJobName: aws.String(args[0])})
			if err != nil {
				return c.explain(ctx, fmt.Errorf("describe %s: %w", args[0], err))
			}
			if jsonOut {
				enc := json.NewEncoder(e.stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(d)
			}
			printJob(e, d)
			return nil
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	return cmd
}

func printJob(e *env, d *sagemaker.DescribeTrainingJobOutput) {
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s:\t%s\n", k, v)
		}
	}
	row("Name", aws.ToString(d.TrainingJobName))
	row("ARN", aws.ToString(d.TrainingJobArn))
	row("Status", fmt.Sprintf("%s (%s)", d.TrainingJobStatus, d.SecondaryStatus))
	row("Created", aws.ToTime(d.CreationTime).Local().Format(time.RFC3339))
	if d.TrainingTimeInSeconds != nil {
		row("Training time", fmt.Sprintf("%ds", aws.ToInt32(d.TrainingTimeInSeconds)))
	}
	if d.ResourceConfig != nil {
		row("Instances", fmt.Sprint(aws.ToInt32(d.ResourceConfig.InstanceCount)))
	}
	if d.ModelArtifacts != nil {
		row("Model", aws.ToString(d.ModelArtifacts.S3ModelArtifacts))
	}
	row("Failure", aws.ToString(d.FailureReason))
	for _, m := range d.FinalMetricDataList {
		row("Metric "+aws.ToString(m.MetricName), fmt.Sprint(aws.ToFloat32(m.Value)))
	}
	tw.Flush()
	if len(d.SecondaryStatusTransitions) > 0 {
		fmt.Fprintln(e.stdout, "Transitions:")
		for _, t := range d.SecondaryStatusTransitions {
			fmt.Fprintf(e.stdout, "  %s  %-20s %s\n", aws.ToTime(t.StartTime).Local().Format("15:04:05"), t.Status, strings.TrimSpace(aws.ToString(t.StatusMessage)))
		}
	}
}

func newJobsStopCmd(e *env, endpoint *string) *cobra.Command {
	return &cobra.Command{
		Use:   "stop JOB",
		Short: "Stop a running training job (SIGTERM, then SIGKILL after the grace period)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, err := newClients(e, *endpoint)
			if err != nil {
				return err
			}
			if _, err := c.sm.StopTrainingJob(ctx, &sagemaker.StopTrainingJobInput{TrainingJobName: aws.String(args[0])}); err != nil {
				return c.explain(ctx, fmt.Errorf("stop %s: %w", args[0], err))
			}
			fmt.Fprintf(e.stderr, "Stopping %s\n", args[0])
			return nil
		},
	}
}

func newJobsLogsCmd(e *env, endpoint *string) *cobra.Command {
	var follow bool
	cmd := &cobra.Command{
		Use:   "logs JOB",
		Short: "Print a training job's logs (-f to follow until it ends)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClients(e, *endpoint)
			if err != nil {
				return err
			}
			err = followJob(cmd.Context(), e, c, args[0], followOptions{logs: true, wait: follow})
			if !follow {
				if _, ok := err.(exitError); ok {
					return nil // the job's outcome is not the command's
				}
			}
			return err
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep streaming until the job ends")
	return cmd
}
