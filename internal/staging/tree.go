package staging

import (
	"path/filepath"
	"strings"
)

// Tree is one host's /opt/ml-shaped directory. In the server it is
// <DataDir>/jobs/<job>/<host>/; in a pod it is /opt/ml itself.
type Tree struct{ Root string }

func (t Tree) path(elem ...string) string {
	return filepath.Join(append([]string{t.Root}, elem...)...)
}

// ChannelDir is input/data/<name>.
func (t Tree) ChannelDir(name string) string { return t.path("input", "data", name) }

// CodeDir is code/, where the source directory goes.
func (t Tree) CodeDir() string { return t.path("code") }

// ModelDir is model/, packed into model.tar.gz.
func (t Tree) ModelDir() string { return t.path("model") }

// OutputDataDir is output/data/, packed into output.tar.gz.
func (t Tree) OutputDataDir() string { return t.path("output", "data") }

// CheckpointDir is checkpoints/, the default checkpoint LocalPath.
func (t Tree) CheckpointDir() string { return t.path("checkpoints") }

// MapOptML maps a path under /opt/ml into the tree; other paths are
// returned unchanged.
func (t Tree) MapOptML(p string) string {
	const base = "/opt/ml"
	if p == base {
		return t.Root
	}
	if rest, ok := strings.CutPrefix(p, base+"/"); ok {
		return filepath.Join(t.Root, filepath.FromSlash(rest))
	}
	return p
}

// Contains reports whether p lies inside the tree.
func (t Tree) Contains(p string) bool {
	p = filepath.Clean(p)
	return p == t.Root || strings.HasPrefix(p, t.Root+string(filepath.Separator))
}

// Host is one host of the job as staging sees it.
type Host struct {
	// Index is the host's place in the cluster (algo-1 is 0); it picks
	// the host's share of a ShardedByS3Key channel.
	Index int
	Name  string
	Tree  Tree
}
