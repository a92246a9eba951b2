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
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
)

const trainingLogGroup = "/aws/sagemaker/TrainingJobs"

type followOptions struct {
	logs    bool // print log lines
	jsonOut bool // print the final Describe as JSON
	wait    bool // keep going until the job ends (logs -f, train)
}

// statusLine draws a one-line live status at the bottom of a terminal.
type statusLine struct {
	w     io.Writer
	tty   bool
	shown bool
}

func newStatusLine(w io.Writer) *statusLine {
	f, ok := w.(*os.File)
	tty := false
	if ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	return &statusLine{w: w, tty: tty}
}

func (s *statusLine) clear() {
	if s.tty && s.shown {
		fmt.Fprint(s.w, "\r\033[K")
		s.shown = false
	}
}

func (s *statusLine) draw(text string) {
	if !s.tty {
		return
	}
	fmt.Fprint(s.w, "\r\033[K"+text)
	s.shown = true
}

// logFollower tails every log stream of one job.
type logFollower struct {
	c      *clients
	job    string
	tokens map[string]*string
	// hosts: the job has several hosts, so every line is prefixed with its
	// host's name, even before the other hosts' streams exist.
	hosts bool
}

// line is one thing to print: a log event or a status transition.
type line struct {
	at   time.Time
	text string
	err  bool // status lines go to stderr
}

// poll returns the new events of every stream.
func (f *logFollower) poll(ctx context.Context) ([]line, error) {
	var streams []string
	var next *string
	for {
		resp, err := f.c.logs.DescribeLogStreams(ctx, &cloudwatchlogs.DescribeLogStreamsInput{
			LogGroupName:        aws.String(trainingLogGroup),
			LogStreamNamePrefix: aws.String(f.job + "/"),
			NextToken:           next,
		})
		if err != nil {
			if strings.Contains(err.Error(), "ResourceNotFound") {
				return nil, nil // no log group yet
			}
			return nil, err
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
	var lines []line
	for _, s := range streams {
		for {
			resp, err := f.c.logs.GetLogEvents(ctx, &cloudwatchlogs.GetLogEventsInput{
				LogGroupName:  aws.String(trainingLogGroup),
				LogStreamName: aws.String(s),
				StartFromHead: aws.Bool(true),
				NextToken:     f.tokens[s],
			})
			if err != nil {
				return nil, err
			}
			f.tokens[s] = resp.NextForwardToken
			if len(resp.Events) == 0 {
				break
			}
			prefix := ""
			if f.hosts || len(streams) > 1 {
				prefix = "[" + hostOfStream(f.job, s) + "] "
			}
			for _, ev := range resp.Events {
				lines = append(lines, line{at: time.UnixMilli(aws.ToInt64(ev.Timestamp)), text: prefix + aws.ToString(ev.Message)})
			}
		}
	}
	return lines, nil
}

// hostOfStream is the host name in a training log stream's name
// "<job>/algo-2-1772366400": "algo-2".
func hostOfStream(job, stream string) string {
	host := strings.TrimPrefix(stream, job+"/")
	if i := strings.LastIndex(host, "-"); i > 0 {
		host = host[:i]
	}
	return host
}

// print writes lines in time order (stable, so a stream keeps its order):
// log lines to out, status lines to errOut.
func printLines(lines []line, out, errOut io.Writer, status *statusLine) {
	if len(lines) == 0 {
		return
	}
	status.clear()
	sort.SliceStable(lines, func(i, j int) bool { return lines[i].at.Before(lines[j].at) })
	for _, l := range lines {
		if l.err {
			fmt.Fprintln(errOut, l.text)
		} else {
			fmt.Fprintln(out, l.text)
		}
	}
}

// followJob streams a job's logs and status until it ends (or, without
// wait, prints what is there now), then reports the outcome through the
// exit code: 0 Completed, 2 Failed, 3 Stopped.
func followJob(ctx context.Context, e *env, c *clients, name string, o followOptions) error {
	status := newStatusLine(e.stderr)
	defer status.clear()
	lf := &logFollower{c: c, job: name, tokens: map[string]*string{}}
	start := time.Now()
	lastSecondary := ""
	lastTransitions := 0
	var desc *sagemaker.DescribeTrainingJobOutput
	for {
		d, err := c.sm.DescribeTrainingJob(ctx, &sagemaker.DescribeTrainingJobInput{TrainingJobName: aws.String(name)})
		if err != nil {
			if errors.Is(ctx.Err(), context.Canceled) {
				return detached(name)
			}
			return c.explain(ctx, fmt.Errorf("describe %s: %w", name, err))
		}
		desc = d
		lf.hosts = d.ResourceConfig != nil && aws.ToInt32(d.ResourceConfig.InstanceCount) > 1
		var lines []line
		for _, t := range d.SecondaryStatusTransitions[min(lastTransitions, len(d.SecondaryStatusTransitions)):] {
			at := aws.ToTime(t.StartTime)
			lines = append(lines, line{at: at, err: true, text: fmt.Sprintf("%s %s: %s", at.Local().Format("15:04:05"), t.Status, aws.ToString(t.StatusMessage))})
		}
		lastTransitions = len(d.SecondaryStatusTransitions)
		lastSecondary = string(d.SecondaryStatus)
		if o.logs {
			logLines, err := lf.poll(ctx)
			if err != nil {
				if errors.Is(ctx.Err(), context.Canceled) {
					return detached(name)
				}
				return c.explain(ctx, err)
			}
			lines = append(lines, logLines...)
		}
		printLines(lines, e.stdout, e.stderr, status)
		terminal := d.TrainingJobStatus == smtypes.TrainingJobStatusCompleted ||
			d.TrainingJobStatus == smtypes.TrainingJobStatusFailed ||
			d.TrainingJobStatus == smtypes.TrainingJobStatusStopped
		if terminal || !o.wait {
			break
		}
		status.draw(fmt.Sprintf("%s · %s · %s", name, lastSecondary, time.Since(start).Round(time.Second)))
		select {
		case <-ctx.Done():
			return detached(name)
		case <-time.After(500 * time.Millisecond):
		}
	}
	if o.logs {
		// One last round: lines written just before the job ended.
		logLines, err := lf.poll(ctx)
		if err != nil {
			return c.explain(ctx, err)
		}
		printLines(logLines, e.stdout, e.stderr, status)
	}
	status.clear()
	if o.jsonOut {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(desc); err != nil {
			return err
		}
	}
	return outcome(e, desc, o.wait)
}

func detached(name string) error {
	return exitError{code: 130, msg: fmt.Sprintf("stopped following %s; the job keeps running (stop it with `sagebox jobs stop %s`)", name, name)}
}

func outcome(e *env, d *sagemaker.DescribeTrainingJobOutput, report bool) error {
	name := aws.ToString(d.TrainingJobName)
	switch d.TrainingJobStatus {
	case smtypes.TrainingJobStatusCompleted:
		if report {
			fmt.Fprintf(e.stderr, "Training job %s completed in %ds.\n", name, aws.ToInt32(d.TrainingTimeInSeconds))
			if d.ModelArtifacts != nil {
				fmt.Fprintf(e.stderr, "Model artifacts: %s\n", aws.ToString(d.ModelArtifacts.S3ModelArtifacts))
			}
		}
		return nil
	case smtypes.TrainingJobStatusFailed:
		return exitError{code: 2, msg: fmt.Sprintf("training job %s failed: %s", name, aws.ToString(d.FailureReason))}
	case smtypes.TrainingJobStatusStopped:
		return exitError{code: 3, msg: fmt.Sprintf("training job %s was stopped (%s)", name, d.SecondaryStatus)}
	}
	return nil
}
