package toolkit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// Workspace is one host's /opt/ml-shaped directory,
// <DataDir>/jobs/<job>/<host>/. Scripts get its real absolute paths through
// SM_* variables and SAGEMAKER_BASE_DIR; paths that a job names under
// /opt/ml (a checkpoint LocalPath, a sourcedir under input/data/code) are
// mapped into it.
type Workspace struct{ Root string }

func (w Workspace) path(elem ...string) string {
	return filepath.Join(append([]string{w.Root}, elem...)...)
}

// The workspace's directories and files, as the toolkit names them.
func (w Workspace) InputDir() string           { return w.path("input") }
func (w Workspace) ConfigDir() string          { return w.path("input", "config") }
func (w Workspace) DataDir() string            { return w.path("input", "data") }
func (w Workspace) ChannelDir(c string) string { return w.path("input", "data", c) }
func (w Workspace) CodeDir() string            { return w.path("code") }
func (w Workspace) ModelDir() string           { return w.path("model") }
func (w Workspace) OutputDir() string          { return w.path("output") }
func (w Workspace) OutputDataDir() string      { return w.path("output", "data") }
func (w Workspace) IntermediateDir() string    { return w.path("output", "intermediate") }
func (w Workspace) FailureFile() string        { return w.path("output", "failure") }
func (w Workspace) SuccessFile() string        { return w.path("output", "success") }
func (w Workspace) CheckpointDir() string      { return w.path("checkpoints") }

// Create makes a fresh, empty workspace, removing what an earlier attempt
// left.
func (w Workspace) Create(channels []string) error {
	if err := os.RemoveAll(w.Root); err != nil {
		return fmt.Errorf("clear workspace: %w", err)
	}
	dirs := []string{w.ConfigDir(), w.CodeDir(), w.ModelDir(), w.OutputDataDir(), w.IntermediateDir(), w.CheckpointDir()}
	for _, c := range channels {
		dirs = append(dirs, w.ChannelDir(c))
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create workspace: %w", err)
		}
	}
	return nil
}

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

// ConfigFiles are the three files of input/config, as written.
type ConfigFiles struct {
	HyperParameters []byte
	InputData       []byte
	Resource        []byte
}

// ConfigFiles are the config files of host, as SageMaker writes them.
func (s *Spec) ConfigFiles(host string) (ConfigFiles, error) {
	var cf ConfigFiles
	var err error
	hps := s.RawHyperParameters
	if hps == nil {
		hps = map[string]string{}
	}
	if cf.HyperParameters, err = marshalJSON(hps); err != nil {
		return cf, err
	}
	chans := map[string]channelConfig{}
	for _, c := range s.Channels {
		chans[c.Name] = channelConfig{
			ContentType:        c.ContentType,
			TrainingInputMode:  c.InputMode,
			S3DistributionType: c.Distribution,
			RecordWrapperType:  c.RecordWrapper,
		}
	}
	if cf.InputData, err = marshalJSON(chans); err != nil {
		return cf, err
	}
	rc := resourceConfig{
		CurrentHost:          host,
		CurrentInstanceType:  s.InstanceType,
		CurrentGroupName:     instanceGroupName,
		Hosts:                s.Hosts,
		InstanceGroups:       []instanceGroup{{InstanceGroupName: instanceGroupName, InstanceType: s.InstanceType, Hosts: s.Hosts}},
		NetworkInterfaceName: networkInterfaceName,
	}
	if cf.Resource, err = marshalJSON(rc); err != nil {
		return cf, err
	}
	return cf, nil
}

// Write puts the files into the workspace's input/config.
func (cf ConfigFiles) Write(w Workspace) error {
	for name, b := range map[string][]byte{
		"hyperparameters.json": cf.HyperParameters,
		"inputdataconfig.json": cf.InputData,
		"resourceconfig.json":  cf.Resource,
	} {
		if err := os.WriteFile(filepath.Join(w.ConfigDir(), name), b, 0o644); err != nil {
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
