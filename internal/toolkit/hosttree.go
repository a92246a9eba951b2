package toolkit

import (
	"fmt"
	"os"

	"github.com/sagebox/sagebox"
)

// PrepareHostTree makes host's /opt/ml-shaped directories under root
// (keeping what is there) and writes input/config's
// hyperparameters.json, inputdataconfig.json and resourceconfig.json as
// the runner writes them for that host.
func PrepareHostTree(job *sagebox.TrainingJob, region, host, root string) error {
	s, err := NewSpec(job, region)
	if err != nil {
		return err
	}
	known := false
	for _, h := range s.Hosts {
		known = known || h == host
	}
	if !known {
		return fmt.Errorf("host %q is not one of the job's hosts %v", host, s.Hosts)
	}
	ws := Workspace{Root: root}
	dirs := []string{ws.ConfigDir(), ws.CodeDir(), ws.ModelDir(), ws.OutputDataDir(), ws.IntermediateDir(), ws.CheckpointDir()}
	for _, c := range s.Channels {
		dirs = append(dirs, ws.ChannelDir(c.Name))
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	cf, err := s.ConfigFiles(host)
	if err != nil {
		return err
	}
	return cf.Write(ws)
}
