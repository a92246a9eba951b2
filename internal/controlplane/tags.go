package controlplane

import (
	"context"
	"errors"
	"strings"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/metastore"
)

// TagStore keeps the tags of taggable resources, keyed by ARN. It does not
// know which resources exist; the handler checks that first.
// *metastore.DB implements it.
type TagStore interface {
	// Tags returns the resource's tags in the order their keys were first
	// added, an empty list when it has none.
	Tags(ctx context.Context, arn string) ([]sagebox.Tag, error)
	// AddTags adds or overwrites tags; past max tags in all, it changes
	// nothing and returns metastore.ErrTooManyTags.
	AddTags(ctx context.Context, arn string, tags []sagebox.Tag, max int) error
	// DeleteTags removes keys, ignoring those the resource does not have.
	DeleteTags(ctx context.Context, arn string, keys []string) error
}

// maxTagsPerResource is SageMaker's limit on a resource's tags.
const maxTagsPerResource = 50

// resourceArnPattern is the model's constraint on ResourceArn.
var resourceArnPattern = newPattern(`arn:aws[a-z-]*:sagemaker:[a-z0-9-]*:[0-9]{12}:.+`)

// existsFunc reports whether the resource of one kind with this name exists.
type existsFunc func(ctx context.Context, name string) (bool, error)

// taggable maps the resource type of an ARN ("training-job" in
// arn:aws:sagemaker:<region>:<account>:training-job/<name>) to how to tell
// whether such a resource exists. Making another kind taggable is one line
// here; its Create stores the request's Tags with AddTags under the ARN
// h.arn(kind, name) builds, and its Delete drops them.
func (h *Handler) taggable() map[string]existsFunc {
	return map[string]existsFunc{
		kindTrainingJob:    h.trainingJobExists,
		kindModel:          h.modelExists,
		kindEndpointConfig: h.endpointConfigExists,
		kindEndpoint:       h.endpointExists,
	}
}

func (h *Handler) trainingJobExists(ctx context.Context, name string) (bool, error) {
	_, err := h.jobs.TrainingJob(ctx, name)
	if errors.Is(err, metastore.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// errTaggedNotFound is the answer for an ARN that names no resource here:
// another region, account or partition, a kind sagebox does not have, or a
// name nobody created.
func errTaggedNotFound(arn string) error {
	return sagebox.Errorf(sagebox.ErrValidation, "Requested resource not found: %s.", arn)
}

// resolveArn checks that arn names an existing resource here and returns
// the key its tags are stored under: the ARN as sagebox builds it (the
// name lower-cased).
func (h *Handler) resolveArn(ctx context.Context, arn string) (string, error) {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) != 6 || parts[1] != "aws" || parts[3] != h.cfg.Region || parts[4] != h.cfg.AccountID {
		return "", errTaggedNotFound(arn)
	}
	kind, name, ok := strings.Cut(parts[5], "/")
	exists, known := h.taggable()[kind]
	if !ok || !known || name == "" {
		return "", errTaggedNotFound(arn)
	}
	found, err := exists(ctx, name)
	if err != nil {
		return "", err
	}
	if !found {
		return "", errTaggedNotFound(arn)
	}
	return h.arn(kind, name), nil
}

type listTagsInput struct {
	ResourceArn string  `json:"ResourceArn"`
	NextToken   *string `json:"NextToken"`
	MaxResults  *int64  `json:"MaxResults"`
}

type listTagsOutput struct {
	// Tags is always present, [] when there are none: the SDK reads it by
	// index.
	Tags      []sagebox.Tag `json:"Tags"`
	NextToken *string       `json:"NextToken,omitempty"`
}

// listTags returns a resource's tags. A resource has at most 50 and
// MaxResults is at least 50, so one page always holds them all: sagebox
// never issues a NextToken, and refuses one it did not issue.
func (h *Handler) listTags(ctx context.Context, in *listTagsInput) (*listTagsOutput, error) {
	var v violations
	v.str("resourceArn", in.ResourceArn, true, 0, 256, &resourceArnPattern)
	v.num("maxResults", in.MaxResults, 50, noMax)
	if in.NextToken != nil {
		v.str("nextToken", *in.NextToken, false, 0, 8192, nil)
	}
	if err := v.err(sagebox.ErrValidation); err != nil {
		return nil, err
	}
	if in.NextToken != nil && *in.NextToken != "" {
		return nil, sagebox.Errorf(sagebox.ErrValidation, "The NextToken %q is not valid: sagebox never issued it.", *in.NextToken)
	}
	key, err := h.resolveArn(ctx, in.ResourceArn)
	if err != nil {
		return nil, err
	}
	tags, err := h.tags.Tags(ctx, key)
	if err != nil {
		return nil, err
	}
	return &listTagsOutput{Tags: tags}, nil
}

type addTagsInput struct {
	ResourceArn string        `json:"ResourceArn"`
	Tags        []sagebox.Tag `json:"Tags"`
}

type addTagsOutput struct {
	Tags []sagebox.Tag `json:"Tags"`
}

// addTags adds or overwrites tags and returns the tags it was given, as
// SageMaker's AddTags does.
func (h *Handler) addTags(ctx context.Context, in *addTagsInput) (*addTagsOutput, error) {
	var v violations
	v.str("resourceArn", in.ResourceArn, true, 0, 256, &resourceArnPattern)
	v.required("tags", in.Tags != nil)
	validateTags(&v, in.Tags)
	if err := v.err(sagebox.ErrValidation); err != nil {
		return nil, err
	}
	key, err := h.resolveArn(ctx, in.ResourceArn)
	if err != nil {
		return nil, err
	}
	err = h.tags.AddTags(context.WithoutCancel(ctx), key, in.Tags, maxTagsPerResource)
	if errors.Is(err, metastore.ErrTooManyTags) {
		return nil, sagebox.Errorf(sagebox.ErrValidation,
			"A resource can have at most %d tags: adding these to %s would give it more.", maxTagsPerResource, in.ResourceArn)
	}
	if err != nil {
		return nil, err
	}
	return &addTagsOutput{Tags: in.Tags}, nil
}

type deleteTagsInput struct {
	ResourceArn string   `json:"ResourceArn"`
	TagKeys     []string `json:"TagKeys"`
}

// deleteTags removes tag keys; keys the resource does not have are ignored.
func (h *Handler) deleteTags(ctx context.Context, in *deleteTagsInput) (*struct{}, error) {
	var v violations
	v.str("resourceArn", in.ResourceArn, true, 0, 256, &resourceArnPattern)
	if v.required("tagKeys", in.TagKeys != nil) {
		v.count("tagKeys", in.TagKeys, len(in.TagKeys), 1, 50)
		for i, k := range in.TagKeys {
			v.str(member("tagKeys", i), k, true, 1, 128, &tagPattern)
		}
	}
	if err := v.err(sagebox.ErrValidation); err != nil {
		return nil, err
	}
	key, err := h.resolveArn(ctx, in.ResourceArn)
	if err != nil {
		return nil, err
	}
	if err := h.tags.DeleteTags(context.WithoutCancel(ctx), key, in.TagKeys); err != nil {
		return nil, err
	}
	return &struct{}{}, nil
}
