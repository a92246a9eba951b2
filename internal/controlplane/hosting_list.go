package controlplane

import (
	"context"
	"errors"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/metastore"
)

// listResourcesInput is a ListModels, ListEndpointConfigs or ListEndpoints
// request. Members an operation does not have are ignored by it.
type listResourcesInput struct {
	NextToken              string        `json:"NextToken"`
	MaxResults             *int64        `json:"MaxResults"`
	NameContains           string        `json:"NameContains"`
	CreationTimeAfter      *sagebox.Time `json:"CreationTimeAfter"`
	CreationTimeBefore     *sagebox.Time `json:"CreationTimeBefore"`
	LastModifiedTimeAfter  *sagebox.Time `json:"LastModifiedTimeAfter"`
	LastModifiedTimeBefore *sagebox.Time `json:"LastModifiedTimeBefore"`
	StatusEquals           string        `json:"StatusEquals"`
	SortBy                 string        `json:"SortBy"`
	SortOrder              string        `json:"SortOrder"`
}

// endpointStatuses are the values of ListEndpoints' StatusEquals.
var endpointStatuses = []string{
	sagebox.EndpointOutOfService, sagebox.EndpointCreating, sagebox.EndpointUpdating, sagebox.EndpointSystemUpdate,
	sagebox.EndpointRollingBack, sagebox.EndpointInService, sagebox.EndpointDeleting, sagebox.EndpointFailed,
	"UpdateRollbackFailed",
}

// query validates the request and turns it into a metastore query. op is
// the operation, for messages; endpoints says whether it is ListEndpoints
// (the only one with status and last-modified filters).
func (in *listResourcesInput) query(op string, endpoints bool) (metastore.ResourceQuery, error) {
	var v violations
	v.str("nextToken", in.NextToken, false, 0, 8192, &anyPattern)
	v.num("maxResults", in.MaxResults, 1, 100)
	v.str("nameContains", in.NameContains, false, 0, 63, &nameContainsPattern)
	v.enum("sortOrder", in.SortOrder, metastore.SortAscending, metastore.SortDescending)
	if endpoints {
		v.enum("statusEquals", in.StatusEquals, endpointStatuses...)
		v.enum("sortBy", in.SortBy, metastore.SortByName, metastore.SortByCreationTime, metastore.SortByStatus)
	} else {
		v.enum("sortBy", in.SortBy, metastore.SortByName, metastore.SortByCreationTime)
	}
	if err := v.err(sagebox.ErrValidation); err != nil {
		return metastore.ResourceQuery{}, err
	}
	if in.SortBy == metastore.SortByStatus {
		return metastore.ResourceQuery{}, sagebox.Errorf(sagebox.ErrValidation, "sagebox's %s sorts by Name or CreationTime, not by Status.", op)
	}
	q := metastore.ResourceQuery{
		NameContains:       in.NameContains,
		CreationTimeAfter:  timeOf(in.CreationTimeAfter),
		CreationTimeBefore: timeOf(in.CreationTimeBefore),
		SortBy:             in.SortBy,
		SortOrder:          in.SortOrder,
		MaxResults:         10,
		NextToken:          in.NextToken,
	}
	if q.SortBy == "" {
		q.SortBy = metastore.SortByCreationTime
	}
	if q.SortOrder == "" {
		q.SortOrder = metastore.SortDescending
	}
	if in.MaxResults != nil {
		q.MaxResults = int(*in.MaxResults)
	}
	if endpoints {
		q.StatusEquals = in.StatusEquals
		q.LastModifiedTimeAfter = timeOf(in.LastModifiedTimeAfter)
		q.LastModifiedTimeBefore = timeOf(in.LastModifiedTimeBefore)
	}
	return q, nil
}

// listError translates a listing failure.
func listError(op, token string, err error) error {
	if errors.Is(err, metastore.ErrInvalidToken) {
		return sagebox.Errorf(sagebox.ErrValidation, "Invalid pagination token: %q was not returned by %s with this SortBy and SortOrder.", token, op)
	}
	return err
}

type modelSummary struct {
	ModelName    string        `json:"ModelName"`
	ModelArn     string        `json:"ModelArn"`
	CreationTime *sagebox.Time `json:"CreationTime"`
}

type listModelsOutput struct {
	Models    []modelSummary `json:"Models"`
	NextToken string         `json:"NextToken,omitempty"`
}

// listModels returns one page of models: by default the 10 newest.
func (h *Handler) listModels(ctx context.Context, in *listResourcesInput) (*listModelsOutput, error) {
	q, err := in.query("ListModels", false)
	if err != nil {
		return nil, err
	}
	models, next, err := h.jobs.ListModels(ctx, q)
	if err != nil {
		return nil, listError("ListModels", in.NextToken, err)
	}
	out := &listModelsOutput{Models: []modelSummary{}, NextToken: next}
	for _, m := range models {
		out.Models = append(out.Models, modelSummary{ModelName: m.ModelName, ModelArn: m.ModelArn, CreationTime: m.CreationTime})
	}
	return out, nil
}

type endpointConfigSummary struct {
	EndpointConfigName string        `json:"EndpointConfigName"`
	EndpointConfigArn  string        `json:"EndpointConfigArn"`
	CreationTime       *sagebox.Time `json:"CreationTime"`
}

type listEndpointConfigsOutput struct {
	EndpointConfigs []endpointConfigSummary `json:"EndpointConfigs"`
	NextToken       string                  `json:"NextToken,omitempty"`
}

// listEndpointConfigs returns one page of endpoint configs: by default the
// 10 newest.
func (h *Handler) listEndpointConfigs(ctx context.Context, in *listResourcesInput) (*listEndpointConfigsOutput, error) {
	q, err := in.query("ListEndpointConfigs", false)
	if err != nil {
		return nil, err
	}
	configs, next, err := h.jobs.ListEndpointConfigs(ctx, q)
	if err != nil {
		return nil, listError("ListEndpointConfigs", in.NextToken, err)
	}
	out := &listEndpointConfigsOutput{EndpointConfigs: []endpointConfigSummary{}, NextToken: next}
	for _, c := range configs {
		out.EndpointConfigs = append(out.EndpointConfigs, endpointConfigSummary{
			EndpointConfigName: c.EndpointConfigName, EndpointConfigArn: c.EndpointConfigArn, CreationTime: c.CreationTime,
		})
	}
	return out, nil
}

type endpointSummary struct {
	EndpointName     string        `json:"EndpointName"`
	EndpointArn      string        `json:"EndpointArn"`
	CreationTime     *sagebox.Time `json:"CreationTime"`
	LastModifiedTime *sagebox.Time `json:"LastModifiedTime"`
	EndpointStatus   string        `json:"EndpointStatus"`
}

type listEndpointsOutput struct {
	Endpoints []endpointSummary `json:"Endpoints"`
	NextToken string            `json:"NextToken,omitempty"`
}

// listEndpoints returns one page of endpoints: by default the 10 newest.
func (h *Handler) listEndpoints(ctx context.Context, in *listResourcesInput) (*listEndpointsOutput, error) {
	q, err := in.query("ListEndpoints", true)
	if err != nil {
		return nil, err
	}
	endpoints, next, err := h.jobs.ListEndpoints(ctx, q)
	if err != nil {
		return nil, listError("ListEndpoints", in.NextToken, err)
	}
	out := &listEndpointsOutput{Endpoints: []endpointSummary{}, NextToken: next}
	for _, e := range endpoints {
		out.Endpoints = append(out.Endpoints, endpointSummary{
			EndpointName: e.EndpointName, EndpointArn: e.EndpointArn, CreationTime: e.CreationTime,
			LastModifiedTime: e.LastModifiedTime, EndpointStatus: e.EndpointStatus,
		})
	}
	return out, nil
}
