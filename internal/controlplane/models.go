package controlplane

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/metastore"
)

// Constraint patterns of the hosting shapes.
var (
	modelNamePattern      = newPattern(`^[a-zA-Z0-9](-*[a-zA-Z0-9])*`)
	containerImagePattern = newPattern(`[\S]+`)
	kmsKeyPattern         = newPattern(`[a-zA-Z0-9:/_-]*`)
)

// maxEnvironment is the most Environment entries a container may have
// (AWS's current limit; the 2022 model said 16).
const maxEnvironment = 100

type createModelInput struct {
	sagebox.Model
}

type createModelOutput struct {
	ModelArn string `json:"ModelArn"`
}

// validate checks the model's constraints, reporting all violations at
// once.
func (in *createModelInput) validate() error {
	var v violations
	m := &in.Model
	v.str("modelName", m.ModelName, true, 0, 63, &modelNamePattern)
	v.str("executionRoleArn", m.ExecutionRoleArn, false, 20, 2048, &roleArnPattern)
	if m.PrimaryContainer != nil {
		validateContainer(&v, "primaryContainer", m.PrimaryContainer)
	}
	if m.Containers != nil {
		v.count("containers", m.Containers, len(m.Containers), 0, sagebox.MaxContainers)
		for i := range m.Containers {
			validateContainer(&v, member("containers", i), &m.Containers[i])
		}
	}
	if c := m.InferenceExecutionConfig; c != nil {
		if v.required("inferenceExecutionConfig.mode", c.Mode != "") {
			v.enum("inferenceExecutionConfig.mode", c.Mode, sagebox.InferenceModeSerial, sagebox.InferenceModeDirect)
		}
	}
	validateTags(&v, m.Tags)
	return v.err(sagebox.ErrValidation)
}

func validateContainer(v *violations, path string, c *sagebox.ContainerDefinition) {
	v.str(path+".containerHostname", c.ContainerHostname, false, 0, 63, &jobNamePattern)
	v.str(path+".image", c.Image, false, 0, 255, &containerImagePattern)
	v.enum(path+".mode", c.Mode, "SingleModel", "MultiModel")
	v.str(path+".modelDataUrl", c.ModelDataUrl, false, 0, 1024, &s3URIPattern)
	v.stringMap(path+".environment", c.Environment, maxEnvironment,
		shape{min: 0, max: 1024, pattern: &envKeyPattern}, shape{min: 0, max: 1024, pattern: &anyLinesPattern})
	if src := c.ModelDataSource; src != nil {
		if s := src.S3DataSource; s != nil {
			sp := path + ".modelDataSource.s3DataSource"
			v.str(sp+".s3Uri", s.S3Uri, true, 0, 1024, &s3URIPattern)
			if v.required(sp+".s3DataType", s.S3DataType != "") {
				v.enum(sp+".s3DataType", s.S3DataType, "S3Prefix", "S3Object")
			}
			if v.required(sp+".compressionType", s.CompressionType != "") {
				v.enum(sp+".compressionType", s.CompressionType, "None", "Gzip")
			}
		}
	}
}

// check applies the rules beyond the model's constraints, after validate
// passed. It returns the first failure.
func (in *createModelInput) check() error {
	m := &in.Model
	switch {
	case m.PrimaryContainer != nil && m.Containers != nil:
		return sagebox.Errorf(sagebox.ErrValidation, "A model has either PrimaryContainer or Containers, not both: send one container as PrimaryContainer, or 1 to %d as Containers.", sagebox.MaxContainers)
	case m.PrimaryContainer == nil && len(m.Containers) == 0:
		return sagebox.Errorf(sagebox.ErrValidation, "A model needs a container: send PrimaryContainer, or 1 to %d Containers for an inference pipeline.", sagebox.MaxContainers)
	case m.PrimaryContainer != nil && m.InferenceExecutionConfig != nil:
		return sagebox.Errorf(sagebox.ErrValidation, "InferenceExecutionConfig applies only to a model with Containers, not to one with PrimaryContainer.")
	}
	direct := m.InferenceExecutionConfig != nil && m.InferenceExecutionConfig.Mode == sagebox.InferenceModeDirect
	seen := map[string]bool{}
	for i, c := range m.ContainerList() {
		where := "PrimaryContainer"
		if m.PrimaryContainer == nil {
			where = "Containers[" + strconv.Itoa(i) + "]"
		}
		if err := checkContainer(where, &c); err != nil {
			return err
		}
		if direct && c.ContainerHostname == "" {
			return sagebox.Errorf(sagebox.ErrValidation, "%s has no ContainerHostname: with InferenceExecutionConfig Mode Direct every container needs one, since requests name it in TargetContainerHostname.", where)
		}
		if h := strings.ToLower(c.ContainerHostname); h != "" {
			if seen[h] {
				return sagebox.Errorf(sagebox.ErrValidation, "ContainerHostname %q is used by more than one container: container hostnames must be unique within a model.", c.ContainerHostname)
			}
			seen[h] = true
		}
	}
	return nil
}

// checkContainer checks one container's model data and mode.
func checkContainer(where string, c *sagebox.ContainerDefinition) error {
	if c.Mode == "MultiModel" {
		return sagebox.Errorf(sagebox.ErrValidation, "%s has Mode MultiModel: sagebox serves one model per container (Mode SingleModel).", where)
	}
	if c.ModelPackageName != "" {
		return sagebox.Errorf(sagebox.ErrValidation, "%s names ModelPackageName %q: sagebox has no model registry; give ModelDataUrl or ModelDataSource instead.", where, c.ModelPackageName)
	}
	if c.ModelDataUrl != "" && c.ModelDataSource != nil {
		return sagebox.Errorf(sagebox.ErrValidation, "%s has both ModelDataUrl and ModelDataSource: give only one.", where)
	}
	if u := c.ModelDataUrl; u != "" {
		if !isS3Object(u) {
			return sagebox.Errorf(sagebox.ErrValidation, "%s.ModelDataUrl %q must name an object in sagebox's object store, as s3://bucket/key (usually a model.tar.gz).", where, u)
		}
	}
	if src := c.ModelDataSource; src != nil {
		s := src.S3DataSource
		if s == nil {
			return sagebox.Errorf(sagebox.ErrValidation, "%s.ModelDataSource needs S3DataSource.", where)
		}
		if !strings.HasPrefix(s.S3Uri, "s3://") {
			return sagebox.Errorf(sagebox.ErrValidation, "%s.ModelDataSource.S3DataSource.S3Uri %q must be an s3:// URI in sagebox's object store.", where, s.S3Uri)
		}
		if s.S3DataType == "S3Prefix" && s.CompressionType != "None" {
			return sagebox.Errorf(sagebox.ErrValidation, "%s.ModelDataSource.S3DataSource: S3DataType S3Prefix takes CompressionType None (uncompressed model files under the prefix); use S3DataType S3Object for a compressed archive.", where)
		}
		if s.S3DataType == "S3Object" && !isS3Object(s.S3Uri) {
			return sagebox.Errorf(sagebox.ErrValidation, "%s.ModelDataSource.S3DataSource.S3Uri %q must name an object (s3://bucket/key) for S3DataType S3Object.", where, s.S3Uri)
		}
	}
	return nil
}

// isS3Object reports whether u is s3://bucket/key with a key that names an
// object, not a prefix.
func isS3Object(u string) bool {
	rest, ok := strings.CutPrefix(u, "s3://")
	if !ok {
		return false
	}
	bucket, key, _ := strings.Cut(rest, "/")
	return bucket != "" && key != "" && !strings.HasSuffix(key, "/")
}

// createModel stores a model. Nothing runs until an endpoint uses it.
func (h *Handler) createModel(ctx context.Context, in *createModelInput) (*createModelOutput, error) {
	if err := in.validate(); err != nil {
		return nil, err
	}
	if err := in.check(); err != nil {
		return nil, err
	}
	m := in.Model
	m.ModelArn = h.arn(kindModel, m.ModelName)
	m.CreationTime = sagebox.NewTime(h.cfg.Now())
	err := h.jobs.CreateModel(context.WithoutCancel(ctx), &m)
	if errors.Is(err, metastore.ErrExists) {
		return nil, h.errExists(kindModel, m.ModelName)
	}
	if err != nil {
		return nil, err
	}
	return &createModelOutput{ModelArn: m.ModelArn}, nil
}

type modelNameInput struct {
	ModelName string `json:"ModelName"`
}

func (in *modelNameInput) validate() error {
	var v violations
	v.str("modelName", in.ModelName, true, 0, 63, &modelNamePattern)
	return v.err(sagebox.ErrValidation)
}

// model loads a model or answers "Could not find model".
func (h *Handler) model(ctx context.Context, name string) (*sagebox.Model, error) {
	m, err := h.jobs.Model(ctx, name)
	if errors.Is(err, metastore.ErrNotFound) {
		return nil, h.errNotFound(kindModel, name)
	}
	if err != nil {
		return nil, err
	}
	m.Tags = nil // ListTags has them; DescribeModel does not echo them
	return m, nil
}

func (h *Handler) describeModel(ctx context.Context, in *modelNameInput) (*sagebox.Model, error) {
	if err := in.validate(); err != nil {
		return nil, err
	}
	return h.model(ctx, in.ModelName)
}

// deleteModel removes a model and its tags. Endpoints that serve it keep
// serving: they hold a snapshot of it.
func (h *Handler) deleteModel(ctx context.Context, in *modelNameInput) (*struct{}, error) {
	if err := in.validate(); err != nil {
		return nil, err
	}
	err := h.jobs.DeleteModel(context.WithoutCancel(ctx), in.ModelName)
	if errors.Is(err, metastore.ErrNotFound) {
		return nil, h.errNotFound(kindModel, in.ModelName)
	}
	if err != nil {
		return nil, err
	}
	return &struct{}{}, nil
}

func (h *Handler) modelExists(ctx context.Context, name string) (bool, error) {
	_, err := h.jobs.Model(ctx, name)
	if errors.Is(err, metastore.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}
