package training

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sagebox/sagebox/internal/staging"
)

// workspace is one host's /opt/ml-shaped directory,
// <DataDir>/jobs/<job>/<host>/. Scripts get its real absolute paths through
// SM_* variables and SAGEMAKER_BASE_DIR; paths that a job names under
// /opt/ml (a checkpoint LocalPath, a sourcedir under input/data/code) are
// mapped into it.
type workspace struct{ root string }

func (w workspace) path(elem ...string) string {
	return filepath.Join(append([]string{w.root}, elem...)...)
}

func (w workspace) inputDir() string           { return w.path("input") }
func (w workspace) configDir() string          { return w.path("input", "config") }
func (w workspace) dataDir() string            { return w.path("input", "data") }
func (w workspace) channelDir(c string) string { return w.path("input", "data", c) }
func (w workspace) codeDir() string            { return w.path("code") }
func (w workspace) modelDir() string           { return w.path("model") }
func (w workspace) outputDir() string          { return w.path("output") }
func (w workspace) outputDataDir() string      { return w.path("output", "data") }
func (w workspace) intermediateDir() string    { return w.path("output", "intermediate") }
func (w workspace) failureFile() string        { return w.path("output", "failure") }
func (w workspace) successFile() string        { return w.path("output", "success") }
func (w workspace) checkpointDir() string      { return w.path("checkpoints") }

// create makes a fresh, empty workspace, removing what an earlier attempt
// left.
func (w workspace) create(channels []string) error {
	if err := os.RemoveAll(w.root); err != nil {
		return fmt.Errorf("clear workspace: %w", err)
	}
	dirs := []string{w.configDir(), w.codeDir(), w.modelDir(), w.outputDataDir(), w.intermediateDir(), w.checkpointDir()}
	for _, c := range channels {
		dirs = append(dirs, w.channelDir(c))
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create workspace: %w", err)
		}
	}
	return nil
}

// mapOptML maps a path under /opt/ml into the workspace; other paths are
// returned unchanged.
func (w workspace) mapOptML(p string) string { return w.tree().MapOptML(p) }

// tree is the workspace as staging sees it.
func (w workspace) tree() staging.Tree { return staging.Tree{Root: w.root} }

// resourceConfig is resourceconfig.json (contract 1.3).
type resourceConfig struct {
	CurrentHost          string          `json:"current_host"`
	CurrentInstanceType  string          `json:"current_instance_type"`
	CurrentGroupName     string          `json:"current_group_name"`
	Hosts                []string        `json:"hosts"`
	InstanceGroups       []instanceGroup `json:"instance_groups"`
	NetworkInterfaceName string          `json:"network_interface_name"`
}

type instanceGroup struct {
	InstanceGroupName string   `json:"instance_group_name"`
	InstanceType      string   `json:"instance_type"`
	Hosts             []string `json:"hosts"`
}

// channelConfig is one entry of inputdataconfig.json (contract 1.2): note
// S3DistributionType, not the API's S3DataDistributionType.
type channelConfig struct {
	ContentType        string `json:"ContentType,omitempty"`
	TrainingInputMode  string `json:"TrainingInputMode"`
	S3DistributionType string `json:"S3DistributionType"`
	RecordWrapperType  string `json:"RecordWrapperType"`
}

// configFiles are the three files of input/config, as written.
type configFiles struct {
	hyperparameters []byte
	inputData       []byte
	resource        []byte
}

func (s *jobSpec) configFiles(host string) (configFiles, error) {
	var cf configFiles
	var err error
	hps := s.rawHPs
	if hps == nil {
		hps = map[string]string{}
	}
	if cf.hyperparameters, err = marshalJSON(hps); err != nil {
		return cf, err
	}
	chans := map[string]channelConfig{}
	for _, c := range s.channels {
		chans[c.name] = channelConfig{
			ContentType:        c.contentType,
			TrainingInputMode:  c.inputMode,
			S3DistributionType: c.distribution,
			RecordWrapperType:  c.recordWrapper,
		}
	}
	if cf.inputData, err = marshalJSON(chans); err != nil {
		return cf, err
	}
	rc := resourceConfig{
		CurrentHost:          host,
		CurrentInstanceType:  s.instanceType,
		CurrentGroupName:     instanceGroupName,
		Hosts:                s.hosts,
		InstanceGroups:       []instanceGroup{{InstanceGroupName: instanceGroupName, InstanceType: s.instanceType, Hosts: s.hosts}},
		NetworkInterfaceName: networkInterfaceName,
	}
	if cf.resource, err = marshalJSON(rc); err != nil {
		return cf, err
	}
	return cf, nil
}

// write puts the files into the workspace's input/config.
func (cf configFiles) write(w workspace) error {
	for name, b := range map[string][]byte{
		"hyperparameters.json": cf.hyperparameters,
		"inputdataconfig.json": cf.inputData,
		"resourceconfig.json":  cf.resource,
	} {
		if err := os.WriteFile(filepath.Join(w.configDir(), name), b, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	return nil
}

// marshalJSON encodes v without Go's HTML escaping (Python's json does not
// escape <, > and &).
func marshalJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode json: %w", err)
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}
