package controlplane

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/logstore"
)

// Constraint patterns of the CloudWatch Logs model.
var (
	logGroupPattern  = newPattern(`[\.\-_/#A-Za-z0-9]+`)
	logStreamPattern = newPattern(`[^:*]*`)
)

// logsError maps a logstore error to CloudWatch's code and wording; other
// errors pass through as internal.
func logsError(err error) error {
	switch {
	case errors.Is(err, logstore.ErrGroupNotFound):
		return sagebox.Errorf(codeLogsNotFound, "The specified log group does not exist.")
	case errors.Is(err, logstore.ErrStreamNotFound):
		return sagebox.Errorf(codeLogsNotFound, "The specified log stream does not exist.")
	case errors.Is(err, logstore.ErrGroupExists):
		return sagebox.Errorf(codeLogsAlreadyExists, "The specified log group already exists")
	case errors.Is(err, logstore.ErrStreamExists):
		return sagebox.Errorf(codeLogsAlreadyExists, "The specified log stream already exists")
	case errors.Is(err, logstore.ErrInvalidToken):
		return sagebox.Errorf(codeLogsInvalid, "The specified nextToken is invalid.")
	}
	return err
}

// groupRef is how requests name a log group: by name, or (newer clients)
// by identifier, which is a name or an ARN.
type groupRef struct {
	LogGroupName       string `json:"logGroupName"`
	LogGroupIdentifier string `json:"logGroupIdentifier"`
}

// group validates the reference into v and returns the group's name.
func (g groupRef) group(v *violations) string {
	v.str("logGroupName", g.LogGroupName, false, 1, 512, &logGroupPattern)
	v.str("logGroupIdentifier", g.LogGroupIdentifier, false, 1, 2048, nil)
	id := g.LogGroupIdentifier
	if rest, ok := strings.CutPrefix(id, "arn:"); ok {
		// arn:aws:logs:<region>:<account>:log-group:<name>[:*]
		if _, name, ok := strings.Cut(rest, ":log-group:"); ok {
			id = strings.TrimSuffix(name, ":*")
		}
	}
	return id
}

// resolve returns the group name after validation, or the error.
func (g groupRef) resolve(v *violations) (string, error) {
	id := g.group(v)
	if err := v.err(codeLogsInvalid); err != nil {
		return "", err
	}
	switch {
	case g.LogGroupName != "" && g.LogGroupIdentifier != "":
		return "", sagebox.Errorf(codeLogsInvalid, "LogGroup name and LogGroup ARN are mutually exclusive parameters.")
	case g.LogGroupName != "":
		return g.LogGroupName, nil
	case id != "":
		return id, nil
	}
	return "", sagebox.Errorf(codeLogsInvalid, "Either logGroupName or logGroupIdentifier must be specified.")
}

func (h *Handler) logGroupArn(group string) string {
	return "arn:aws:logs:" + h.cfg.Region + ":" + h.cfg.AccountID + ":log-group:" + group
}

type createLogGroupInput struct {
	LogGroupName string `json:"logGroupName"`
}

func (h *Handler) createLogGroup(ctx context.Context, in *createLogGroupInput) (*struct{}, error) {
	var v violations
	v.str("logGroupName", in.LogGroupName, true, 1, 512, &logGroupPattern)
	if err := v.err(codeLogsInvalid); err != nil {
		return nil, err
	}
	if err := h.logs.CreateGroup(ctx, in.LogGroupName); err != nil {
		return nil, logsError(err)
	}
	return &struct{}{}, nil
}

type createLogStreamInput struct {
	LogGroupName  string `json:"logGroupName"`
	LogStreamName string `json:"logStreamName"`
}

func (h *Handler) createLogStream(ctx context.Context, in *createLogStreamInput) (*struct{}, error) {
	var v violations
	v.str("logGroupName", in.LogGroupName, true, 1, 512, &logGroupPattern)
	v.str("logStreamName", in.LogStreamName, true, 1, 512, &logStreamPattern)
	if err := v.err(codeLogsInvalid); err != nil {
		return nil, err
	}
	if err := h.logs.CreateStream(ctx, in.LogGroupName, in.LogStreamName); err != nil {
		return nil, logsError(err)
	}
	return &struct{}{}, nil
}

type putLogEventsInput struct {
	LogGroupName  string             `json:"logGroupName"`
	LogStreamName string             `json:"logStreamName"`
	LogEvents     []sagebox.LogEvent `json:"logEvents"`
	SequenceToken string             `json:"sequenceToken"` // ignored, as CloudWatch now does
}

type putLogEventsOutput struct {
	NextSequenceToken string `json:"nextSequenceToken"`
}

// putLogEvents appends to an existing stream. Events must be in
// chronological order, as CloudWatch requires.
func (h *Handler) putLogEvents(ctx context.Context, in *putLogEventsInput) (*putLogEventsOutput, error) {
	var v violations
	v.str("logGroupName", in.LogGroupName, true, 1, 512, &logGroupPattern)
	v.str("logStreamName", in.LogStreamName, true, 1, 512, &logStreamPattern)
	if v.required("logEvents", in.LogEvents != nil) {
		v.count("logEvents", in.LogEvents, len(in.LogEvents), 1, 10000)
	}
	if err := v.err(codeLogsInvalid); err != nil {
		return nil, err
	}
	for i := 1; i < len(in.LogEvents); i++ {
		if in.LogEvents[i].Timestamp < in.LogEvents[i-1].Timestamp {
			return nil, sagebox.Errorf(codeLogsInvalid, "Log events in a single PutLogEvents request must be in chronological order.")
		}
	}
	if _, err := h.logs.Stream(ctx, in.LogGroupName, in.LogStreamName); err != nil {
		return nil, logsError(err)
	}
	if err := h.logs.Append(ctx, in.LogGroupName, in.LogStreamName, in.LogEvents); err != nil {
		return nil, err
	}
	return &putLogEventsOutput{NextSequenceToken: strconv.FormatInt(h.cfg.Now().UnixNano(), 10)}, nil
}

type describeLogGroupsInput struct {
	LogGroupNamePrefix string `json:"logGroupNamePrefix"`
	NextToken          string `json:"nextToken"`
	Limit              *int64 `json:"limit"`
}

type logGroup struct {
	LogGroupName      string `json:"logGroupName"`
	CreationTime      int64  `json:"creationTime"`
	MetricFilterCount int    `json:"metricFilterCount"`
	Arn               string `json:"arn"`
	LogGroupArn       string `json:"logGroupArn"`
	StoredBytes       int64  `json:"storedBytes"`
}

type describeLogGroupsOutput struct {
	LogGroups []logGroup `json:"logGroups"`
	NextToken string     `json:"nextToken,omitempty"`
}

func (h *Handler) describeLogGroups(ctx context.Context, in *describeLogGroupsInput) (*describeLogGroupsOutput, error) {
	var v violations
	v.str("logGroupNamePrefix", in.LogGroupNamePrefix, false, 1, 512, &logGroupPattern)
	v.num("limit", in.Limit, 1, 50)
	if err := v.err(codeLogsInvalid); err != nil {
		return nil, err
	}
	q := logstore.GroupQuery{Prefix: in.LogGroupNamePrefix, NextToken: in.NextToken}
	if in.Limit != nil {
		q.Limit = int(*in.Limit)
	}
	groups, next, err := h.logs.Groups(ctx, q)
	if err != nil {
		return nil, logsError(err)
	}
	out := &describeLogGroupsOutput{LogGroups: []logGroup{}, NextToken: next}
	for _, g := range groups {
		arn := h.logGroupArn(g.Name)
		out.LogGroups = append(out.LogGroups, logGroup{
			LogGroupName: g.Name, CreationTime: g.CreationTime, Arn: arn + ":*", LogGroupArn: arn, StoredBytes: g.StoredBytes,
		})
	}
	return out, nil
}
