package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/spf13/cobra"
)

// endpointLogGroupPrefix is where endpoint instances' logs go, as on SageMaker.
const endpointLogGroupPrefix = "/aws/sagemaker/Endpoints/"

// invokeOptions are the flags of `sagebox invoke`.
type invokeOptions struct {
	endpoint         string
	body             string
	output           string
	contentType      string
	accept           string
	targetVariant    string
	customAttributes string
}

func newInvokeCmd(e *env) *cobra.Command {
	var o invokeOptions
	cmd := &cobra.Command{
		Use:   "invoke ENDPOINT",
		Short: "Send one request to an endpoint (InvokeEndpoint) and print the answer",
		Example: `  sagebox invoke digits --content-type text/csv --body rows.csv
  echo '[[0.1, 0.2]]' | sagebox invoke my-endpoint --content-type application/json
  sagebox invoke style-mosaic --content-type image/jpeg --body cat.jpg --output out.json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runInvoke(cmd.Context(), e, args[0], &o)
		},
	}
	f := cmd.Flags()
	addEndpointFlag(cmd, &o.endpoint)
	f.StringVarP(&o.body, "body", "b", "-", "file with the request body (- reads stdin)")
	f.StringVarP(&o.output, "output", "o", "-", "file the answer is written to (- is stdout)")
	f.StringVarP(&o.contentType, "content-type", "t", "application/json", "Content-Type of the request")
	f.StringVarP(&o.accept, "accept", "a", "", "Accept: the answer's content type (default: the model's choice)")
	f.StringVar(&o.targetVariant, "target-variant", "", "send the request to this production variant")
	f.StringVar(&o.customAttributes, "custom-attributes", "", "X-Amzn-SageMaker-Custom-Attributes")
	return cmd
}

func runInvoke(ctx context.Context, e *env, name string, o *invokeOptions) error {
	var body []byte
	var err error
	if o.body == "-" {
		body, err = io.ReadAll(e.stdin)
	} else {
		body, err = os.ReadFile(o.body)
	}
	if err != nil {
		return fmt.Errorf("read the request body: %w", err)
	}
	c, err := newClients(e, o.endpoint)
	if err != nil {
		return err
	}
	in := &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String(name), Body: body, ContentType: aws.String(o.contentType)}
	if o.accept != "" {
		in.Accept = aws.String(o.accept)
	}
	if o.targetVariant != "" {
		in.TargetVariant = aws.String(o.targetVariant)
	}
	if o.customAttributes != "" {
		in.CustomAttributes = aws.String(o.customAttributes)
	}
	out, err := c.rt.InvokeEndpoint(ctx, in)
	if err != nil {
		return c.explain(ctx, fmt.Errorf("invoke %s: %w", name, err))
	}
	fmt.Fprintf(e.stderr, "%s from variant %s\n", aws.ToString(out.ContentType), aws.ToString(out.InvokedProductionVariant))
	if o.output == "-" {
		_, err = e.stdout.Write(out.Body)
		if err == nil && len(out.Body) > 0 && out.Body[len(out.Body)-1] != '\n' && isText(aws.ToString(out.ContentType)) {
			_, err = io.WriteString(e.stdout, "\n")
		}
		return err
	}
	return os.WriteFile(o.output, out.Body, 0o644)
}

func isText(contentType string) bool {
	return strings.HasPrefix(contentType, "text/") || strings.Contains(contentType, "json")
}

func newEndpointsCmd(e *env) *cobra.Command {
	var endpoint string
	cmd := &cobra.Command{
		Use:   "endpoints",
		Short: "List, inspect, update, delete and tail endpoints",
	}
	cmd.PersistentFlags().StringVar(&endpoint, "endpoint", "", "sagebox server URL (default $SAGEBOX_ENDPOINT or "+defaultEndpoint+")")
	cmd.AddCommand(newEndpointsLsCmd(e, &endpoint), newEndpointsDescribeCmd(e, &endpoint), newEndpointsUpdateCmd(e, &endpoint),
		newEndpointsDeleteCmd(e, &endpoint), newEndpointsLogsCmd(e, &endpoint))
	return cmd
}

func newEndpointsLsCmd(e *env, endpoint *string) *cobra.Command {
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List endpoints, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, err := newClients(e, *endpoint)
			if err != nil {
				return err
			}
			var eps []smtypes.EndpointSummary
			p := sagemaker.NewListEndpointsPaginator(c.sm, &sagemaker.ListEndpointsInput{})
			for p.HasMorePages() {
				page, err := p.NextPage(ctx)
				if err != nil {
					return c.explain(ctx, fmt.Errorf("list endpoints: %w", err))
				}
				eps = append(eps, page.Endpoints...)
			}
			if jsonOut {
				return printJSON(e, eps)
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tSTATUS\tCREATED\tMODIFIED")
			for _, ep := range eps {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", aws.ToString(ep.EndpointName), ep.EndpointStatus,
					aws.ToTime(ep.CreationTime).Local().Format("2006-01-02 15:04:05"), aws.ToTime(ep.LastModifiedTime).Local().Format("2006-01-02 15:04:05"))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	return cmd
}

func printJSON(e *env, v any) error {
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func newEndpointsDescribeCmd(e *env, endpoint *string) *cobra.Command {
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "describe ENDPOINT",
		Short: "Show an endpoint and its variants",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, err := newClients(e, *endpoint)
			if err != nil {
				return err
			}
			d, err := c.sm.DescribeEndpoint(ctx, &sagemaker.DescribeEndpointInput{EndpointName: aws.String(args[0])})
			if err != nil {
				return c.explain(ctx, fmt.Errorf("describe %s: %w", args[0], err))
			}
			if jsonOut {
				return printJSON(e, d)
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintf(tw, "Name:\t%s\nARN:\t%s\nStatus:\t%s\nConfig:\t%s\nCreated:\t%s\n", aws.ToString(d.EndpointName), aws.ToString(d.EndpointArn),
				d.EndpointStatus, aws.ToString(d.EndpointConfigName), aws.ToTime(d.CreationTime).Local().Format(time.RFC3339))
			if r := aws.ToString(d.FailureReason); r != "" {
				fmt.Fprintf(tw, "Failure:\t%s\n", r)
			}
			tw.Flush()
			if len(d.ProductionVariants) > 0 {
				tw = tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "VARIANT\tWEIGHT\tINSTANCES")
				for _, v := range d.ProductionVariants {
					fmt.Fprintf(tw, "%s\t%g (desired %g)\t%d (desired %d)\n", aws.ToString(v.VariantName), aws.ToFloat32(v.CurrentWeight),
						aws.ToFloat32(v.DesiredWeight), aws.ToInt32(v.CurrentInstanceCount), aws.ToInt32(v.DesiredInstanceCount))
				}
				tw.Flush()
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	return cmd
}

func newEndpointsUpdateCmd(e *env, endpoint *string) *cobra.Command {
	var (
		config  string
		variant string
		weight  float64
		count   int
		noWait  bool
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "update ENDPOINT",
		Short: "Move an endpoint to another endpoint config, or change a variant's weight or instance count in place",
		Long: `With --config, UpdateEndpoint: the new fleet is brought up, traffic moves to it,
then the old fleet drains. With --variant and --weight and/or --instance-count,
UpdateEndpointWeightsAndCapacities: the variant keeps its model and changes in place.
Waits until the endpoint is InService again.`,
		Example: `  sagebox endpoints update digits --config digits-v2
  sagebox endpoints update digits --variant AllTraffic --instance-count 2`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			name := args[0]
			flags := cmd.Flags()
			inPlace := flags.Changed("weight") || flags.Changed("instance-count")
			if (config == "") == !inPlace {
				return errors.New("give --config, or --variant with --weight and/or --instance-count")
			}
			c, err := newClients(e, *endpoint)
			if err != nil {
				return err
			}
			if config != "" {
				_, err = c.sm.UpdateEndpoint(ctx, &sagemaker.UpdateEndpointInput{EndpointName: aws.String(name), EndpointConfigName: aws.String(config)})
			} else {
				if variant == "" {
					return errors.New("--weight and --instance-count need --variant")
				}
				d := smtypes.DesiredWeightAndCapacity{VariantName: aws.String(variant)}
				if flags.Changed("weight") {
					d.DesiredWeight = aws.Float32(float32(weight))
				}
				if flags.Changed("instance-count") {
					d.DesiredInstanceCount = aws.Int32(int32(count))
				}
				_, err = c.sm.UpdateEndpointWeightsAndCapacities(ctx, &sagemaker.UpdateEndpointWeightsAndCapacitiesInput{
					EndpointName: aws.String(name), DesiredWeightsAndCapacities: []smtypes.DesiredWeightAndCapacity{d}})
			}
			if err != nil {
				return c.explain(ctx, fmt.Errorf("update %s: %w", name, err))
			}
			fmt.Fprintf(e.stderr, "Updating endpoint %s\n", name)
			if noWait {
				return nil
			}
			if err := waitInService(ctx, e, c, name, timeout); err != nil {
				return err
			}
			fmt.Fprintf(e.stderr, "Endpoint %s is InService\n", name)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&config, "config", "", "endpoint config to move to (UpdateEndpoint)")
	f.StringVar(&variant, "variant", "", "variant to change in place")
	f.Float64Var(&weight, "weight", 1, "the variant's new weight")
	f.IntVar(&count, "instance-count", 1, "the variant's new instance count")
	f.BoolVar(&noWait, "no-wait", false, "do not wait for InService")
	f.DurationVar(&timeout, "timeout", 15*time.Minute, "how long to wait for InService")
	return cmd
}

func newEndpointsDeleteCmd(e *env, endpoint *string) *cobra.Command {
	var keep bool
	cmd := &cobra.Command{
		Use:   "delete ENDPOINT",
		Short: "Delete an endpoint, and (unless --keep-config) its endpoint config and models",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			name := args[0]
			c, err := newClients(e, *endpoint)
			if err != nil {
				return err
			}
			d, err := c.sm.DescribeEndpoint(ctx, &sagemaker.DescribeEndpointInput{EndpointName: aws.String(name)})
			if err != nil {
				return c.explain(ctx, fmt.Errorf("delete %s: %w", name, err))
			}
			var models []string
			configName := aws.ToString(d.EndpointConfigName)
			if !keep {
				// As the SDK's Predictor.delete_endpoint + delete_model do: the
				// config's models first, then the config, then the endpoint.
				if cfg, err := c.sm.DescribeEndpointConfig(ctx, &sagemaker.DescribeEndpointConfigInput{EndpointConfigName: aws.String(configName)}); err == nil {
					for _, v := range cfg.ProductionVariants {
						models = append(models, aws.ToString(v.ModelName))
					}
					if _, err := c.sm.DeleteEndpointConfig(ctx, &sagemaker.DeleteEndpointConfigInput{EndpointConfigName: aws.String(configName)}); err != nil {
						return c.explain(ctx, fmt.Errorf("delete endpoint config %s: %w", configName, err))
					}
				}
			}
			if _, err := c.sm.DeleteEndpoint(ctx, &sagemaker.DeleteEndpointInput{EndpointName: aws.String(name)}); err != nil {
				return c.explain(ctx, fmt.Errorf("delete %s: %w", name, err))
			}
			for _, m := range models {
				if _, err := c.sm.DeleteModel(ctx, &sagemaker.DeleteModelInput{ModelName: aws.String(m)}); err != nil && !strings.Contains(err.Error(), "Could not find") {
					return c.explain(ctx, fmt.Errorf("delete model %s: %w", m, err))
				}
			}
			fmt.Fprintf(e.stderr, "Deleted endpoint %s\n", name)
			return nil
		},
	}
	cmd.Flags().BoolVar(&keep, "keep-config", false, "keep the endpoint config and its models")
	return cmd
}

func newEndpointsLogsCmd(e *env, endpoint *string) *cobra.Command {
	var follow bool
	cmd := &cobra.Command{
		Use:   "logs ENDPOINT",
		Short: "Print an endpoint's instance logs, each line prefixed with <variant>/<instance> (-f to keep following)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, err := newClients(e, *endpoint)
			if err != nil {
				return err
			}
			return followEndpointLogs(ctx, e, c, args[0], follow)
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep streaming new lines until interrupted")
	return cmd
}

// followEndpointLogs prints every stream of the endpoint's log group and,
// with follow, keeps polling for new lines and new streams.
func followEndpointLogs(ctx context.Context, e *env, c *clients, name string, follow bool) error {
	group := endpointLogGroupPrefix + name
	tokens := map[string]*string{}
	for {
		var streams []string
		var next *string
		for {
			resp, err := c.logs.DescribeLogStreams(ctx, &cloudwatchlogs.DescribeLogStreamsInput{LogGroupName: aws.String(group), NextToken: next})
			if err != nil {
				if strings.Contains(err.Error(), "ResourceNotFound") && follow {
					break // no instance has logged yet
				}
				if strings.Contains(err.Error(), "ResourceNotFound") {
					return fmt.Errorf("endpoint %s has no logs (log group %s does not exist)", name, group)
				}
				return c.explain(ctx, fmt.Errorf("list log streams of %s: %w", name, err))
			}
			for _, s := range resp.LogStreams {
				streams = append(streams, aws.ToString(s.LogStreamName))
			}
			if resp.NextToken == nil {
				break
			}
			next = resp.NextToken
		}
		sort.Strings(streams)
		for _, s := range streams {
			for {
				resp, err := c.logs.GetLogEvents(ctx, &cloudwatchlogs.GetLogEventsInput{
					LogGroupName: aws.String(group), LogStreamName: aws.String(s), StartFromHead: aws.Bool(true), NextToken: tokens[s]})
				if err != nil {
					return c.explain(ctx, fmt.Errorf("read log stream %s: %w", s, err))
				}
				tokens[s] = resp.NextForwardToken
				if len(resp.Events) == 0 {
					break
				}
				for _, ev := range resp.Events {
					fmt.Fprintf(e.stdout, "[%s] %s\n", s, strings.TrimRight(aws.ToString(ev.Message), "\n"))
				}
			}
		}
		if !follow {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}
