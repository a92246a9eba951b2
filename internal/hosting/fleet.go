package hosting

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/archive"
	"github.com/sagebox/sagebox/internal/staging"
	"github.com/sagebox/sagebox/internal/statefile"
)

// LogGroup is the log group of an endpoint's instances.
func LogGroup(endpoint string) string { return "/aws/sagemaker/Endpoints/" + endpoint }

// LogStream is an instance's stream in its endpoint's group.
func LogStream(variant, instanceID string) string { return variant + "/" + instanceID }

// fleetKey names a variant's fleet: its model snapshot and instance type.
// Instances of the same key serve the same thing.
func fleetKey(v *sagebox.DeployedVariant) string {
	b, _ := json.Marshal(struct {
		Model        sagebox.Model
		InstanceType string
	}{v.Model, v.InstanceType})
	return shortHash(string(b))
}

func shortHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:6])
}

// hostnames is the model's container hostnames, in order.
func hostnames(m *sagebox.Model) []string {
	cs := m.ContainerList()
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.ContainerHostname
		if out[i] == "" {
			out[i] = "container-" + strconv.Itoa(i+1)
			if len(cs) == 1 {
				out[i] = "primary"
			}
		}
	}
	return out
}

// fleet is what a fleet's instances are started with: the model
// server's arguments (--containers FILE; each container's environment is
// in the file).
type fleet struct {
	key  string
	Args []string `json:"args"`
}

// containersFile is the model server's --containers FILE.
type containersFile struct {
	Mode       string          `json:"mode,omitempty"`
	Containers []containerSpec `json:"containers"`
}

type containerSpec struct {
	Hostname string            `json:"hostname"`
	ModelDir string            `json:"model_dir"`
	Env      map[string]string `json:"env,omitempty"`
}

const filePrepared = "fleet.json"

func (m *Manager) modelsDir(ep string) string { return filepath.Join(m.epDir(ep), "models") }

// prepareFleet makes v's model directories (once per fleet: its
// instances share them, also across restarts) and says how instances
// are started.
func (m *Manager) prepareFleet(ctx context.Context, ep string, v *sagebox.DeployedVariant) (*fleet, error) {
	key := fleetKey(v)
	dir := filepath.Join(m.modelsDir(ep), key)
	var fl fleet
	if err := statefile.ReadJSON(filepath.Join(dir, filePrepared), &fl); err == nil {
		fl.key = key
		return &fl, nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return nil, err
	}
	os.Chmod(m.epDir(ep), 0o711)
	os.Chmod(m.modelsDir(ep), 0o711)
	model := &v.Model
	cs := model.ContainerList()
	if len(cs) == 0 {
		return nil, fmt.Errorf("model %s has no container", model.ModelName)
	}
	names := hostnames(model)
	cf := containersFile{}
	if len(cs) > 1 {
		cf.Mode = sagebox.InferenceModeSerial
		if c := model.InferenceExecutionConfig; c != nil && c.Mode != "" {
			cf.Mode = c.Mode
		}
	}
	for i, c := range cs {
		cdir := filepath.Join(dir, strconv.Itoa(i))
		env, err := m.prepareContainer(ctx, &c, cdir)
		if err != nil {
			if len(cs) > 1 {
				err = fmt.Errorf("container %s: %w", names[i], err)
			}
			return nil, err
		}
		cf.Containers = append(cf.Containers, containerSpec{Hostname: names[i], ModelDir: cdir, Env: env})
	}
	file := filepath.Join(dir, "containers.json")
	if err := statefile.WriteJSON(file, cf); err != nil {
		return nil, err
	}
	os.Chmod(file, 0o644)
	fl.Args = []string{"--containers", file}
	if cred := m.credential(); cred != nil {
		if err := chownTree(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, fmt.Errorf("hand the model directory over to uid %d: %w", cred.Uid, err)
		}
	}
	if err := statefile.WriteJSON(filepath.Join(dir, filePrepared), fl); err != nil {
		return nil, err
	}
	fl.key = key
	return &fl, nil
}

func chownTree(root string, uid, gid int) error {
	return filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}

// prepareContainer fills one container's model directory and returns its
// environment: its Environment, with SAGEMAKER_SUBMIT_DIRECTORY pointing
// at the directory's code/ (extracted there from S3 for the ≤ 1.1 layout).
func (m *Manager) prepareContainer(ctx context.Context, c *sagebox.ContainerDefinition, dir string) (map[string]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	switch src := c.ModelDataSource; {
	case c.ModelDataUrl != "":
		if err := m.fetchArchive(ctx, "ModelDataUrl", c.ModelDataUrl, dir); err != nil {
			return nil, err
		}
	case src != nil && src.S3DataSource != nil:
		s := src.S3DataSource
		switch {
		case s.S3DataType == "S3Object" && strings.EqualFold(s.CompressionType, "Gzip"):
			if err := m.fetchArchive(ctx, "ModelDataSource.S3DataSource.S3Uri", s.S3Uri, dir); err != nil {
				return nil, err
			}
		case s.S3DataType == "S3Object":
			if err := m.fetchObject(ctx, s.S3Uri, dir); err != nil {
				return nil, err
			}
		default:
			if err := m.fetchPrefix(ctx, s.S3Uri, dir); err != nil {
				return nil, err
			}
		}
	}
	env := map[string]string{}
	for k, v := range c.Environment {
		env[k] = v
	}
	if sd := env["SAGEMAKER_SUBMIT_DIRECTORY"]; sd != "" {
		code := filepath.Join(dir, "code")
		switch {
		case strings.HasPrefix(sd, "s3://"):
			if err := os.RemoveAll(code); err != nil {
				return nil, err
			}
			if err := m.fetchArchive(ctx, "SAGEMAKER_SUBMIT_DIRECTORY", sd, code); err != nil {
				return nil, err
			}
			env["SAGEMAKER_SUBMIT_DIRECTORY"] = code
		case sd == "/opt/ml/model" || strings.HasPrefix(sd, "/opt/ml/model/"):
			env["SAGEMAKER_SUBMIT_DIRECTORY"] = filepath.Join(dir, strings.TrimPrefix(sd, "/opt/ml/model"))
		}
	}
	return env, nil
}

func parseS3(uri string) (bucket, key string, err error) {
	rest, ok := strings.CutPrefix(uri, "s3://")
	bucket, key, _ = strings.Cut(rest, "/")
	if !ok || bucket == "" {
		return "", "", fmt.Errorf("%q is not an s3://bucket/key URI", uri)
	}
	return bucket, key, nil
}

func (m *Manager) open(ctx context.Context, uri string) (io.ReadCloser, error) {
	bucket, key, err := parseS3(uri)
	if err != nil {
		return nil, err
	}
	if m.cfg.Objects == nil {
		return nil, errors.New("no object store configured")
	}
	r, _, err := m.cfg.Objects.Get(ctx, bucket, key)
	if errors.Is(err, staging.ErrNoSuchKey) || errors.Is(err, staging.ErrNoSuchBucket) {
		return nil, fmt.Errorf("Failed to download model data (bucket: %s, key: %s): there is no object at %s. Please ensure that there is an object located at the URL", bucket, key, uri)
	}
	if err != nil {
		return nil, fmt.Errorf("Failed to download model data from %s: %w", uri, err)
	}
	return r, nil
}

// fetchArchive unpacks the model.tar.gz at uri into dir, within the
// configured limits.
func (m *Manager) fetchArchive(ctx context.Context, what, uri, dir string) error {
	rc, err := m.open(ctx, uri)
	if err != nil {
		return err
	}
	defer rc.Close()
	br := bufio.NewReaderSize(rc, 1<<16)
	magic, _ := br.Peek(2)
	if len(magic) < 2 || magic[0] != 0x1f || magic[1] != 0x8b {
		if len(magic) == 0 {
			return fmt.Errorf("%s %s is an empty file, not a gzip-compressed tar archive (model.tar.gz)", what, uri)
		}
		return fmt.Errorf("%s %s is not a gzip-compressed tar archive (model.tar.gz): it does not start with gzip's magic bytes", what, uri)
	}
	err = archive.ExtractLimited(ctx, br, dir, m.cfg.ModelDataLimits)
	var le *archive.LimitError
	switch {
	case errors.As(err, &le):
		from := ""
		if m.cfg.LimitsFrom != "" {
			from = "; the limit is set by " + m.cfg.LimitsFrom
		}
		return fmt.Errorf("%s %s is too large to unpack: %v%s", what, uri, err, from)
	case errors.Is(err, archive.ErrUnsafePath):
		return fmt.Errorf("%s %s is refused: an entry would land outside the model directory (%v)", what, uri, err)
	case err != nil:
		return fmt.Errorf("%s %s could not be unpacked as a tar.gz archive: %v", what, uri, err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	if len(ents) == 0 {
		return fmt.Errorf("%s %s is an empty archive: it holds no files", what, uri)
	}
	return nil
}

// fetchObject copies one uncompressed object into dir.
func (m *Manager) fetchObject(ctx context.Context, uri, dir string) error {
	rc, err := m.open(ctx, uri)
	if err != nil {
		return err
	}
	defer rc.Close()
	_, key, _ := parseS3(uri)
	return m.writeFile(filepath.Join(dir, path.Base(key)), rc, new(int64))
}

func (m *Manager) writeFile(p string, r io.Reader, total *int64) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.Create(p)
	if err != nil {
		return err
	}
	var src io.Reader = r
	if max := m.cfg.ModelDataLimits.MaxBytes; max > 0 {
		src = io.LimitReader(r, max-*total+1)
	}
	n, err := io.Copy(f, src)
	*total += n
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if max := m.cfg.ModelDataLimits.MaxBytes; max > 0 && *total > max {
		return m.limitErr("ModelDataSource", fmt.Sprintf("more than %d bytes", max))
	}
	return nil
}

func (m *Manager) limitErr(what, detail string) error {
	from := ""
	if m.cfg.LimitsFrom != "" {
		from = "; the limit is set by " + m.cfg.LimitsFrom
	}
	return fmt.Errorf("%s is too large: it holds %s%s", what, detail, from)
}

// fetchPrefix copies every object under an S3 prefix (uncompressed model
// data) into dir, keeping the key below the prefix as the path.
func (m *Manager) fetchPrefix(ctx context.Context, uri, dir string) error {
	bucket, prefix, err := parseS3(uri)
	if err != nil {
		return err
	}
	if m.cfg.Objects == nil {
		return errors.New("no object store configured")
	}
	var total int64
	entries := 0
	token := ""
	for {
		page, err := m.cfg.Objects.List(ctx, bucket, prefix, token)
		if err != nil {
			return fmt.Errorf("list model data under %s: %w", uri, err)
		}
		for _, o := range page.Objects {
			rel := strings.TrimPrefix(strings.TrimPrefix(o.Key, prefix), "/")
			if rel == "" || strings.HasSuffix(rel, "/") {
				continue
			}
			if !filepath.IsLocal(rel) {
				return fmt.Errorf("ModelDataSource %s is refused: key %q would land outside the model directory", uri, o.Key)
			}
			entries++
			if max := m.cfg.ModelDataLimits.MaxEntries; max > 0 && entries > max {
				return m.limitErr("ModelDataSource "+uri, fmt.Sprintf("more than %d objects", max))
			}
			rc, _, err := m.cfg.Objects.Get(ctx, bucket, o.Key)
			if err != nil {
				return fmt.Errorf("Failed to download model data s3://%s/%s: %w", bucket, o.Key, err)
			}
			err = m.writeFile(filepath.Join(dir, filepath.FromSlash(rel)), rc, &total)
			rc.Close()
			if err != nil {
				return err
			}
		}
		if page.Next == "" {
			break
		}
		token = page.Next
	}
	if entries == 0 {
		return fmt.Errorf("ModelDataSource %s holds no objects: upload the model's files under that prefix", uri)
	}
	return nil
}

// sweepModels removes the model directories no live fleet uses.
func (m *Manager) sweepModels(ep string, cur *sagebox.Deployment) {
	used := map[string]bool{}
	if cur != nil {
		for i := range cur.Variants {
			used[fleetKey(&cur.Variants[i])] = true
		}
	}
	ents, _ := os.ReadDir(m.modelsDir(ep))
	for _, e := range ents {
		if !used[e.Name()] {
			os.RemoveAll(filepath.Join(m.modelsDir(ep), e.Name()))
		}
	}
}

// failureText is the FailureReason for an error preparing a fleet.
func failureText(err error) string { return err.Error() }
