package controlplane

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/metastore"
)

type createEndpointInput struct {
	EndpointName       string        `json:"EndpointName"`
	EndpointConfigName string        `json:"EndpointConfigName"`
	Tags               []sagebox.Tag `json:"Tags"`
	// DeploymentConfig is accepted and ignored: sagebox always brings the
	// new fleet up before it moves traffic.
	DeploymentConfig sagebox.RawJSON `json:"DeploymentConfig"`
}

func (in *createEndpointInput) validate() error {
	var v violations
	v.str("endpointName", in.EndpointName, true, 0, 63, &jobNamePattern)
	v.str("endpointConfigName", in.EndpointConfigName, true, 0, 63, &jobNamePattern)
	validateTags(&v, in.Tags)
	return v.err(sagebox.ErrValidation)
}

type endpointArnOutput struct {
	EndpointArn string `json:"EndpointArn"`
}

// resolve takes the snapshot an endpoint deploys: the config's variants
// with their models as they are now.
func (h *Handler) resolve(ctx context.Context, configName string) (*sagebox.Deployment, error) {
	c, err := h.endpointConfig(ctx, configName)
	if err != nil {
		return nil, err
	}
	variants, err := c.Variants()
	if err != nil {
		return nil, fmt.Errorf("decode the stored variants of endpoint config %s: %w", configName, err)
	}
	dep := &sagebox.Deployment{EndpointConfigName: c.EndpointConfigName}
	for _, p := range variants {
		m, err := h.model(ctx, p.ModelName)
		if err != nil {
			return nil, err
		}
		dep.Variants = append(dep.Variants, sagebox.DeployedVariant{
			VariantName:   p.VariantName,
			InstanceType:  p.InstanceType,
			InstanceCount: variantCount(p),
			Weight:        variantWeight(p),
			Model:         snapshotModel(m),
		})
	}
	return dep, nil
}

// snapshotModel copies m for a deployment, giving every container a
// hostname: PrimaryContainer is "primary" and the i-th of Containers is
// "container-<i+1>" unless the model names them (Direct mode always
// does). DescribeModel still shows the model as it was sent.
func snapshotModel(m *sagebox.Model) sagebox.Model {
	s := *m
	s.Tags = nil
	if m.PrimaryContainer != nil {
		c := *m.PrimaryContainer
		if c.ContainerHostname == "" {
			c.ContainerHostname = "primary"
		}
		s.PrimaryContainer = &c
		return s
	}
	taken := map[string]bool{}
	for _, c := range m.Containers {
		taken[strings.ToLower(c.ContainerHostname)] = true
	}
	s.Containers = make([]sagebox.ContainerDefinition, len(m.Containers))
	next := 1
	for i, c := range m.Containers {
		if c.ContainerHostname == "" {
			for taken["container-"+strconv.Itoa(next)] {
				next++
			}
			c.ContainerHostname = "container-" + strconv.Itoa(next)
			taken[c.ContainerHostname] = true
		}
		s.Containers[i] = c
	}
	return s
}

// needHosting fails when the handler has no hosting.
func (h *Handler) needHosting() error {
	if h.hosting == nil {
		return errNoHosting()
	}
	return nil
}

// createEndpoint resolves the config into a deployment, reserves its
// capacity, stores the endpoint Creating (DescribeEndpoint answers from
// then on) and hands it to hosting.
func (h *Handler) createEndpoint(ctx context.Context, in *createEndpointInput) (*endpointArnOutput, error) {
	if err := in.validate(); err != nil {
		return nil, err
	}
	if err := h.needHosting(); err != nil {
		return nil, err
	}
	if _, err := h.jobs.Endpoint(ctx, in.EndpointName); err == nil {
		return nil, h.errExists(kindEndpoint, in.EndpointName)
	} else if !errors.Is(err, metastore.ErrNotFound) {
		return nil, err
	}
	dep, err := h.resolve(ctx, in.EndpointConfigName)
	if err != nil {
		return nil, err
	}
	// Once accepted, the endpoint is stored and deployed even if the client
	// hangs up meanwhile.
	ctx = context.WithoutCancel(ctx)
	release, err := h.hosting.Reserve(ctx, in.EndpointName, dep)
	if err != nil {
		return nil, err
	}
	e := &sagebox.Endpoint{
		EndpointName: in.EndpointName,
		EndpointArn:  h.arn(kindEndpoint, in.EndpointName),
		Tags:         in.Tags,
	}
	e.BeginCreate(h.cfg.Now(), dep)
	if err := h.jobs.CreateEndpoint(ctx, e); err != nil {
		release()
		if errors.Is(err, metastore.ErrExists) {
			return nil, h.errExists(kindEndpoint, in.EndpointName)
		}
		return nil, err
	}
	h.deploy(ctx, e.EndpointName, dep.Generation)
	return &endpointArnOutput{EndpointArn: e.EndpointArn}, nil
}

// deploy asks hosting to move the endpoint to its stored pending
// deployment gen. When hosting cannot even start, the deployment fails with
// the reason (a new endpoint becomes Failed, an updated one stays InService
// on its current deployment); the request itself has succeeded, as
// SageMaker's does for a deployment that fails after it was accepted.
func (h *Handler) deploy(ctx context.Context, name string, gen int) {
	err := h.hosting.Deploy(ctx, name)
	if err == nil {
		return
	}
	h.logger.Error("deploy endpoint", slog.String("endpoint", name), slog.Any("err", err))
	reason := "sagebox could not start the deployment: " + err.Error()
	if _, uerr := h.jobs.UpdateEndpoint(ctx, name, func(e *sagebox.Endpoint) error {
		e.FailPending(h.cfg.Now(), gen, reason)
		return nil
	}); uerr != nil {
		h.logger.Error("mark endpoint deployment failed", slog.String("endpoint", name), slog.Any("err", uerr))
	}
}

type endpointNameInput struct {
	EndpointName string `json:"EndpointName"`
}

func (in *endpointNameInput) validate() error {
	var v violations
	v.str("endpointName", in.EndpointName, true, 0, 63, &jobNamePattern)
	return v.err(sagebox.ErrValidation)
}

// endpoint loads an endpoint or answers "Could not find endpoint".
func (h *Handler) endpoint(ctx context.Context, name string) (*sagebox.Endpoint, error) {
	e, err := h.jobs.Endpoint(ctx, name)
	if errors.Is(err, metastore.ErrNotFound) {
		return nil, h.errNotFound(kindEndpoint, name)
	}
	if err != nil {
		return nil, err
	}
	e.Tags = nil // ListTags has them
	return e, nil
}

// describeEndpoint returns the endpoint's status and, once hosting has
// reported them, its variants' runtime weights and counts.
func (h *Handler) describeEndpoint(ctx context.Context, in *endpointNameInput) (*sagebox.Endpoint, error) {
	if err := in.validate(); err != nil {
		return nil, err
	}
	return h.endpoint(ctx, in.EndpointName)
}

type updateEndpointInput struct {
	EndpointName       string `json:"EndpointName"`
	EndpointConfigName string `json:"EndpointConfigName"`
	// RetainAllVariantProperties, ExcludeRetainedVariantProperties,
	// DeploymentConfig and RetainDeploymentConfig are accepted and
	// ignored: the new config's variants are deployed as they are.
	RetainAllVariantProperties *bool `json:"RetainAllVariantProperties"`
}

func (in *updateEndpointInput) validate() error {
	var v violations
	v.str("endpointName", in.EndpointName, true, 0, 63, &jobNamePattern)
	v.str("endpointConfigName", in.EndpointConfigName, true, 0, 63, &jobNamePattern)
	return v.err(sagebox.ErrValidation)
}

// updateEndpoint moves an InService endpoint to another config: the
// endpoint is Updating and keeps serving its current deployment until
// hosting promotes the new one.
func (h *Handler) updateEndpoint(ctx context.Context, in *updateEndpointInput) (*endpointArnOutput, error) {
	if err := in.validate(); err != nil {
		return nil, err
	}
	if err := h.needHosting(); err != nil {
		return nil, err
	}
	cur, err := h.endpoint(ctx, in.EndpointName)
	if err != nil {
		return nil, err
	}
	// The stored record is checked again in the transaction; this only
	// avoids reserving capacity for an update that cannot happen.
	if err := cur.BeginUpdate(h.cfg.Now(), &sagebox.Deployment{}); err != nil {
		return nil, err
	}
	dep, err := h.resolve(ctx, in.EndpointConfigName)
	if err != nil {
		return nil, err
	}
	return h.beginUpdate(ctx, cur, dep, nil)
}

// beginUpdate reserves capacity for dep, stores the endpoint Updating
// towards it and hands it to hosting. check, when set, runs on the stored
// endpoint inside the transaction.
func (h *Handler) beginUpdate(ctx context.Context, cur *sagebox.Endpoint, dep *sagebox.Deployment, check func(*sagebox.Endpoint) error) (*endpointArnOutput, error) {
	ctx = context.WithoutCancel(ctx)
	name := cur.EndpointName
	release, err := h.hosting.Reserve(ctx, name, dep)
	if err != nil {
		return nil, err
	}
	_, err = h.jobs.UpdateEndpoint(ctx, name, func(e *sagebox.Endpoint) error {
		if check != nil {
			if err := check(e); err != nil {
				return err
			}
		}
		return e.BeginUpdate(h.cfg.Now(), dep)
	})
	if err != nil {
		release()
		if errors.Is(err, metastore.ErrNotFound) {
			return nil, h.errNotFound(kindEndpoint, name)
		}
		return nil, err
	}
	h.deploy(ctx, name, dep.Generation)
	return &endpointArnOutput{EndpointArn: cur.EndpointArn}, nil
}

type desiredWeightAndCapacity struct {
	VariantName          string   `json:"VariantName"`
	DesiredWeight        *float64 `json:"DesiredWeight"`
	DesiredInstanceCount *int64   `json:"DesiredInstanceCount"`
}

type updateWeightsInput struct {
	EndpointName                string                     `json:"EndpointName"`
	DesiredWeightsAndCapacities []desiredWeightAndCapacity `json:"DesiredWeightsAndCapacities"`
}

func (in *updateWeightsInput) validate() error {
	var v violations
	v.str("endpointName", in.EndpointName, true, 0, 63, &jobNamePattern)
	if v.required("desiredWeightsAndCapacities", in.DesiredWeightsAndCapacities != nil) {
		v.count("desiredWeightsAndCapacities", in.DesiredWeightsAndCapacities, len(in.DesiredWeightsAndCapacities), 1, maxVariants)
	}
	for i, d := range in.DesiredWeightsAndCapacities {
		path := member("desiredWeightsAndCapacities", i)
		v.str(path+".variantName", d.VariantName, true, 0, 63, &jobNamePattern)
		if d.DesiredWeight != nil && *d.DesiredWeight < 0 {
			v.add(*d.DesiredWeight, path+".desiredWeight", "Member must have value greater than or equal to 0")
		}
		v.num(path+".desiredInstanceCount", d.DesiredInstanceCount, 1, noMax)
	}
	return v.err(sagebox.ErrValidation)
}

// apply returns a copy of current with the desired weights and counts.
func (in *updateWeightsInput) apply(endpointArn string, current *sagebox.Deployment) (*sagebox.Deployment, error) {
	dep := &sagebox.Deployment{
		EndpointConfigName: current.EndpointConfigName,
		Variants:           append([]sagebox.DeployedVariant(nil), current.Variants...),
	}
	seen := map[string]bool{}
	for _, d := range in.DesiredWeightsAndCapacities {
		if seen[d.VariantName] {
			return nil, sagebox.Errorf(sagebox.ErrValidation, "Variant %q appears more than once in DesiredWeightsAndCapacities.", d.VariantName)
		}
		seen[d.VariantName] = true
		v := dep.Variant(d.VariantName)
		if v == nil {
			names := make([]string, len(current.Variants))
			for i, cv := range current.Variants {
				names[i] = cv.VariantName
			}
			return nil, sagebox.Errorf(sagebox.ErrValidation, "The variant %q is not present in endpoint %q: its variants are %s.", d.VariantName, endpointArn, strings.Join(names, ", "))
		}
		if d.DesiredWeight != nil {
			v.Weight = *d.DesiredWeight
		}
		if d.DesiredInstanceCount != nil {
			v.InstanceCount = int(*d.DesiredInstanceCount)
		}
	}
	total := 0.0
	for _, v := range dep.Variants {
		total += v.Weight
	}
	if total <= 0 {
		return nil, sagebox.Errorf(sagebox.ErrValidation, "The weight of every variant of endpoint %q would be 0: at least one variant needs a weight greater than 0 to receive traffic.", endpointArn)
	}
	return dep, nil
}

// updateEndpointWeightsAndCapacities changes the weights and instance
// counts of an InService endpoint's variants in place: the pending
// deployment is the current one with the changes, and hosting keeps the
// instances of unchanged models.
func (h *Handler) updateEndpointWeightsAndCapacities(ctx context.Context, in *updateWeightsInput) (*endpointArnOutput, error) {
	if err := in.validate(); err != nil {
		return nil, err
	}
	if err := h.needHosting(); err != nil {
		return nil, err
	}
	cur, err := h.endpoint(ctx, in.EndpointName)
	if err != nil {
		return nil, err
	}
	current := cur.Internal.Current
	if err := cur.BeginUpdate(h.cfg.Now(), &sagebox.Deployment{}); err != nil {
		return nil, err
	}
	if current == nil {
		return nil, fmt.Errorf("endpoint %s is InService without a current deployment", cur.EndpointName)
	}
	dep, err := in.apply(cur.EndpointArn, current)
	if err != nil {
		return nil, err
	}
	return h.beginUpdate(ctx, cur, dep, func(e *sagebox.Endpoint) error {
		if e.Internal.Current == nil || e.Internal.Current.Generation != current.Generation {
			return sagebox.Errorf(sagebox.ErrValidation, "Endpoint %q changed while the request was handled; send it again.", cur.EndpointArn)
		}
		return nil
	})
}

// deleteEndpoint marks the endpoint Deleting and has hosting stop its
// instances and remove it. Its config and models are left alone.
func (h *Handler) deleteEndpoint(ctx context.Context, in *endpointNameInput) (*struct{}, error) {
	if err := in.validate(); err != nil {
		return nil, err
	}
	if err := h.needHosting(); err != nil {
		return nil, err
	}
	ctx = context.WithoutCancel(ctx)
	e, err := h.jobs.UpdateEndpoint(ctx, in.EndpointName, func(e *sagebox.Endpoint) error {
		return e.BeginDelete(h.cfg.Now())
	})
	if errors.Is(err, metastore.ErrNotFound) {
		return nil, h.errNotFound(kindEndpoint, in.EndpointName)
	}
	if err != nil {
		return nil, err
	}
	if err := h.hosting.Delete(ctx, e.EndpointName); err != nil {
		return nil, fmt.Errorf("delete endpoint %s: %w", e.EndpointName, err)
	}
	return &struct{}{}, nil
}

func (h *Handler) endpointExists(ctx context.Context, name string) (bool, error) {
	_, err := h.jobs.Endpoint(ctx, name)
	if errors.Is(err, metastore.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}
