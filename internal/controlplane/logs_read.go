package controlplane

import (
	"context"
	"strconv"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/logstore"
)

type describeLogStreamsInput struct {
	groupRef
	LogStreamNamePrefix string `json:"logStreamNamePrefix"`
	OrderBy             string `json:"orderBy"`
	Descending          bool   `json:"descending"`
	NextToken           string `json:"nextToken"`
	Limit               *int64 `json:"limit"`
}

type logStream struct {
	LogStreamName       string `json:"logStreamName"`
	CreationTime        int64  `json:"creationTime"`
	FirstEventTimestamp *int64 `json:"firstEventTimestamp,omitempty"`
	LastEventTimestamp  *int64 `json:"lastEventTimestamp,omitempty"`
	LastIngestionTime   *int64 `json:"lastIngestionTime,omitempty"`
	Arn                 string `json:"arn"`
	StoredBytes         int64  `json:"storedBytes"`
}

type describeLogStreamsOutput struct {
	LogStreams []logStream `json:"logStreams"`
	NextToken  string      `json:"nextToken,omitempty"`
}

// describeLogStreams lists a group's streams. nextToken is present only
// when more streams remain: the SageMaker SDK loops while it is present
// without passing it back.
func (h *Handler) describeLogStreams(ctx context.Context, in *describeLogStreamsInput) (*describeLogStreamsOutput, error) {
	var v violations
	v.str("logStreamNamePrefix", in.LogStreamNamePrefix, false, 1, 512, &logStreamPattern)
	v.enum("orderBy", in.OrderBy, logstore.OrderByLogStreamName, logstore.OrderByLastEventTime)
	v.str("nextToken", in.NextToken, false, 1, noMax, nil)
	v.num("limit", in.Limit, 1, 50)
	group, err := in.resolve(&v)
	if err != nil {
		return nil, err
	}
	if in.OrderBy == logstore.OrderByLastEventTime && in.LogStreamNamePrefix != "" {
		return nil, sagebox.Errorf(codeLogsInvalid, "Cannot order by LastEventTime with a logStreamNamePrefix.")
	}
	q := logstore.StreamQuery{Prefix: in.LogStreamNamePrefix, OrderBy: in.OrderBy, Descending: in.Descending, NextToken: in.NextToken}
	if in.Limit != nil {
		q.Limit = int(*in.Limit)
	}
	streams, next, err := h.logs.Streams(ctx, group, q)
	if err != nil {
		return nil, logsError(err)
	}
	out := &describeLogStreamsOutput{LogStreams: []logStream{}, NextToken: next}
	for _, s := range streams {
		out.LogStreams = append(out.LogStreams, logStream{
			LogStreamName:       s.Name,
			CreationTime:        s.CreationTime,
			FirstEventTimestamp: s.FirstEventTimestamp,
			LastEventTimestamp:  s.LastEventTimestamp,
			LastIngestionTime:   s.LastIngestionTime,
			Arn:                 h.logGroupArn(group) + ":log-stream:" + s.Name,
			StoredBytes:         s.StoredBytes,
		})
	}
	return out, nil
}

type getLogEventsInput struct {
	groupRef
	LogStreamName string `json:"logStreamName"`
	StartTime     *int64 `json:"startTime"`
	EndTime       *int64 `json:"endTime"`
	NextToken     string `json:"nextToken"`
	Limit         *int64 `json:"limit"`
	StartFromHead bool   `json:"startFromHead"`
	Unmask        bool   `json:"unmask"`
}

type outputLogEvent struct {
	Timestamp     int64  `json:"timestamp"`
	Message       string `json:"message"`
	IngestionTime int64  `json:"ingestionTime"`
}

type getLogEventsOutput struct {
	Events            []outputLogEvent `json:"events"`
	NextForwardToken  string           `json:"nextForwardToken"`
	NextBackwardToken string           `json:"nextBackwardToken"`
}

// getLogEvents reads one stream. startTime is inclusive, endTime exclusive
// (milliseconds). At the end of the stream the same nextForwardToken comes
// back with no events.
func (h *Handler) getLogEvents(ctx context.Context, in *getLogEventsInput) (*getLogEventsOutput, error) {
	var v violations
	v.str("logStreamName", in.LogStreamName, true, 1, 512, &logStreamPattern)
	v.num("startTime", in.StartTime, 0, noMax)
	v.num("endTime", in.EndTime, 0, noMax)
	v.str("nextToken", in.NextToken, false, 1, noMax, nil)
	v.num("limit", in.Limit, 1, 10000)
	group, err := in.resolve(&v)
	if err != nil {
		return nil, err
	}
	q := logstore.EventQuery{StartTime: in.StartTime, EndTime: in.EndTime, StartFromHead: in.StartFromHead, NextToken: in.NextToken}
	if in.Limit != nil {
		q.Limit = int(*in.Limit)
	}
	page, err := h.logs.Events(ctx, group, in.LogStreamName, q)
	if err != nil {
		return nil, logsError(err)
	}
	out := &getLogEventsOutput{
		Events:            make([]outputLogEvent, len(page.Events)),
		NextForwardToken:  page.NextForwardToken,
		NextBackwardToken: page.NextBackwardToken,
	}
	for i, e := range page.Events {
		out.Events[i] = outputLogEvent{Timestamp: e.Timestamp, Message: e.Message, IngestionTime: e.IngestionTime}
	}
	return out, nil
}

type filterLogEventsInput struct {
	groupRef
	LogStreamNames      []string `json:"logStreamNames"`
	LogStreamNamePrefix string   `json:"logStreamNamePrefix"`
	StartTime           *int64   `json:"startTime"`
	EndTime             *int64   `json:"endTime"`
	FilterPattern       string   `json:"filterPattern"`
	NextToken           string   `json:"nextToken"`
	Limit               *int64   `json:"limit"`
	Interleaved         bool     `json:"interleaved"` // always true in effect
	Unmask              bool     `json:"unmask"`
}

type filteredLogEvent struct {
	LogStreamName string `json:"logStreamName"`
	Timestamp     int64  `json:"timestamp"`
	Message       string `json:"message"`
	IngestionTime int64  `json:"ingestionTime"`
	EventID       string `json:"eventId"`
}

type searchedLogStream struct {
	LogStreamName      string `json:"logStreamName"`
	SearchedCompletely bool   `json:"searchedCompletely"`
}

type filterLogEventsOutput struct {
	Events             []filteredLogEvent  `json:"events"`
	SearchedLogStreams []searchedLogStream `json:"searchedLogStreams"`
	NextToken          string              `json:"nextToken,omitempty"`
}

// filterLogEvents searches a group's streams, interleaved by time. startTime
// and endTime are both inclusive, as CloudWatch defines them here.
func (h *Handler) filterLogEvents(ctx context.Context, in *filterLogEventsInput) (*filterLogEventsOutput, error) {
	var v violations
	if in.LogStreamNames != nil {
		v.count("logStreamNames", in.LogStreamNames, len(in.LogStreamNames), 1, 100)
	}
	for i, name := range in.LogStreamNames {
		v.str(member("logStreamNames", i), name, true, 1, 512, &logStreamPattern)
	}
	v.str("logStreamNamePrefix", in.LogStreamNamePrefix, false, 1, 512, &logStreamPattern)
	v.num("startTime", in.StartTime, 0, noMax)
	v.num("endTime", in.EndTime, 0, noMax)
	v.str("filterPattern", in.FilterPattern, false, 0, 1024, nil)
	v.str("nextToken", in.NextToken, false, 1, noMax, nil)
	v.num("limit", in.Limit, 1, 10000)
	group, err := in.resolve(&v)
	if err != nil {
		return nil, err
	}
	if len(in.LogStreamNames) > 0 && in.LogStreamNamePrefix != "" {
		return nil, sagebox.Errorf(codeLogsInvalid, "logStreamNames and logStreamNamePrefix are mutually exclusive parameters.")
	}
	pattern, err := logstore.ParsePattern(in.FilterPattern)
	if err != nil {
		return nil, sagebox.Errorf(codeLogsInvalid, "Invalid filter pattern: %s.", err.Error())
	}
	q := logstore.FilterQuery{
		StreamNames:  in.LogStreamNames,
		StreamPrefix: in.LogStreamNamePrefix,
		StartTime:    in.StartTime,
		EndTime:      in.EndTime,
		Pattern:      pattern,
		NextToken:    in.NextToken,
	}
	if in.Limit != nil {
		q.Limit = int(*in.Limit)
	}
	page, err := h.logs.Filter(ctx, group, q)
	if err != nil {
		return nil, logsError(err)
	}
	out := &filterLogEventsOutput{
		Events:             make([]filteredLogEvent, len(page.Events)),
		SearchedLogStreams: make([]searchedLogStream, len(page.SearchedStreams)),
		NextToken:          page.NextToken,
	}
	for i, e := range page.Events {
		out.Events[i] = filteredLogEvent{
			LogStreamName: e.Stream, Timestamp: e.Timestamp, Message: e.Message,
			IngestionTime: e.IngestionTime, EventID: strconv.FormatInt(e.ID, 10),
		}
	}
	for i, name := range page.SearchedStreams {
		out.SearchedLogStreams[i] = searchedLogStream{LogStreamName: name, SearchedCompletely: page.NextToken == ""}
	}
	return out, nil
}
