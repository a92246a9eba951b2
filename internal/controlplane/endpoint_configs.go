package controlplane

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/metastore"
)

// maxVariants is the most production variants an endpoint config may have.
const maxVariants = 10

// createEndpointConfigInput is a CreateEndpointConfig request: the config
// with ProductionVariants kept as the client sent them (compacted), and
// those variants decoded.
type createEndpointConfigInput struct {
	config   sagebox.EndpointConfig
	variants []sagebox.ProductionVariant
	// ShadowProductionVariants is refused: sagebox has no shadow traffic.
	shadow sagebox.RawJSON
}

// UnmarshalJSON decodes the config, compacts its ProductionVariants (their
// members and values stay exactly as sent) and decodes them.
func (in *createEndpointConfigInput) UnmarshalJSON(b []byte) error {
	if err := json.Unmarshal(b, &in.config); err != nil {
		return err
	}
	var shadow struct {
		ShadowProductionVariants sagebox.RawJSON
	}
	if err := json.Unmarshal(b, &shadow); err != nil {
		return err
	}
	in.shadow = shadow.ShadowProductionVariants
	raw := bytes.TrimSpace(in.config.ProductionVariants)
	if len(raw) == 0 || string(raw) == "null" {
		in.config.ProductionVariants = nil
		return nil
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		return err
	}
	in.config.ProductionVariants = compact.Bytes()
	return json.Unmarshal(in.config.ProductionVariants, &in.variants)
}

type createEndpointConfigOutput struct {
	EndpointConfigArn string `json:"EndpointConfigArn"`
}

func (in *createEndpointConfigInput) validate() error {
	var v violations
	c := &in.config
	v.str("endpointConfigName", c.EndpointConfigName, true, 0, 63, &jobNamePattern)
	if v.required("productionVariants", c.ProductionVariants != nil) {
		v.count("productionVariants", in.variants, len(in.variants), 1, maxVariants)
	}
	for i := range in.variants {
		p := in.variants[i]
		path := member("productionVariants", i)
		v.str(path+".variantName", p.VariantName, true, 0, 63, &jobNamePattern)
		v.str(path+".modelName", p.ModelName, true, 0, 63, &modelNamePattern)
		v.str(path+".instanceType", p.InstanceType, false, 0, noMax, &instanceTypePattern)
		if p.InitialInstanceCount != nil {
			n := int64(*p.InitialInstanceCount)
			v.num(path+".initialInstanceCount", &n, 1, noMax)
		}
		if w := p.InitialVariantWeight; w != nil && *w < 0 {
			v.add(*w, path+".initialVariantWeight", "Member must have value greater than or equal to 0")
		}
	}
	v.str("kmsKeyId", c.KmsKeyId, false, 0, 2048, &kmsKeyPattern)
	v.str("executionRoleArn", c.ExecutionRoleArn, false, 20, 2048, &roleArnPattern)
	validateTags(&v, c.Tags)
	return v.err(sagebox.ErrValidation)
}

// check applies the rules beyond the constraints that need no store.
func (in *createEndpointConfigInput) check() error {
	if len(in.shadow) > 0 && string(in.shadow) != "null" && string(in.shadow) != "[]" {
		return sagebox.Errorf(sagebox.ErrValidation, "sagebox does not support ShadowProductionVariants: send the variants as ProductionVariants.")
	}
	seen := map[string]bool{}
	anyWeight := false
	for i, p := range in.variants {
		if seen[p.VariantName] {
			return sagebox.Errorf(sagebox.ErrValidation, "VariantName %q is used by more than one production variant: variant names must be unique within an endpoint configuration.", p.VariantName)
		}
		seen[p.VariantName] = true
		if p.InstanceType == "" {
			return sagebox.Errorf(sagebox.ErrValidation, "ProductionVariants[%d] (%s) has no InstanceType: sagebox runs every variant on instances (serverless variants are not supported); set InstanceType, e.g. ml.m5.xlarge.", i, p.VariantName)
		}
		if variantWeight(p) > 0 {
			anyWeight = true
		}
	}
	if !anyWeight {
		return sagebox.Errorf(sagebox.ErrValidation, "The InitialVariantWeight of every production variant is 0: at least one variant needs a weight greater than 0 to receive traffic.")
	}
	return nil
}

// variantWeight is a variant's weight, 1 when not sent.
func variantWeight(p sagebox.ProductionVariant) float64 {
	if p.InitialVariantWeight == nil {
		return 1
	}
	return *p.InitialVariantWeight
}

// variantCount is a variant's instance count, 1 when not sent.
func variantCount(p sagebox.ProductionVariant) int {
	if p.InitialInstanceCount == nil {
		return 1
	}
	return *p.InitialInstanceCount
}

// createEndpointConfig stores a config whose variants name existing
// models.
func (h *Handler) createEndpointConfig(ctx context.Context, in *createEndpointConfigInput) (*createEndpointConfigOutput, error) {
	if err := in.validate(); err != nil {
		return nil, err
	}
	if err := in.check(); err != nil {
		return nil, err
	}
	for _, p := range in.variants {
		if _, err := h.model(ctx, p.ModelName); err != nil {
			return nil, err
		}
	}
	c := in.config
	c.EndpointConfigArn = h.arn(kindEndpointConfig, c.EndpointConfigName)
	c.CreationTime = sagebox.NewTime(h.cfg.Now())
	err := h.jobs.CreateEndpointConfig(context.WithoutCancel(ctx), &c)
	if errors.Is(err, metastore.ErrExists) {
		return nil, h.errExists(kindEndpointConfig, c.EndpointConfigName)
	}
	if err != nil {
		return nil, err
	}
	return &createEndpointConfigOutput{EndpointConfigArn: c.EndpointConfigArn}, nil
}

type endpointConfigNameInput struct {
	EndpointConfigName string `json:"EndpointConfigName"`
}

func (in *endpointConfigNameInput) validate() error {
	var v violations
	v.str("endpointConfigName", in.EndpointConfigName, true, 0, 63, &jobNamePattern)
	return v.err(sagebox.ErrValidation)
}

// endpointConfig loads a config or answers "Could not find endpoint
// configuration".
func (h *Handler) endpointConfig(ctx context.Context, name string) (*sagebox.EndpointConfig, error) {
	c, err := h.jobs.EndpointConfig(ctx, name)
	if errors.Is(err, metastore.ErrNotFound) {
		return nil, h.errNotFound(kindEndpointConfig, name)
	}
	if err != nil {
		return nil, err
	}
	c.Tags = nil // ListTags has them
	return c, nil
}

// describeEndpointConfig returns the config with ProductionVariants exactly
// as they were sent: the SageMaker SDK sends them back to
// CreateEndpointConfig, and botocore refuses members it does not know.
func (h *Handler) describeEndpointConfig(ctx context.Context, in *endpointConfigNameInput) (*sagebox.EndpointConfig, error) {
	if err := in.validate(); err != nil {
		return nil, err
	}
	return h.endpointConfig(ctx, in.EndpointConfigName)
}

// deleteEndpointConfig removes a config, also while endpoints use it (as on
// AWS): they hold a snapshot of it.
func (h *Handler) deleteEndpointConfig(ctx context.Context, in *endpointConfigNameInput) (*struct{}, error) {
	if err := in.validate(); err != nil {
		return nil, err
	}
	err := h.jobs.DeleteEndpointConfig(context.WithoutCancel(ctx), in.EndpointConfigName)
	if errors.Is(err, metastore.ErrNotFound) {
		return nil, h.errNotFound(kindEndpointConfig, in.EndpointConfigName)
	}
	if err != nil {
		return nil, err
	}
	return &struct{}{}, nil
}

func (h *Handler) endpointConfigExists(ctx context.Context, name string) (bool, error) {
	_, err := h.jobs.EndpointConfig(ctx, name)
	if errors.Is(err, metastore.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}
