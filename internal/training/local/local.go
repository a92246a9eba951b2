// Package local is the training driver for this machine: each host of a
// job is an /opt/ml-shaped workspace under <DataDir>/jobs/<job>/<host>/ on
// this disk, staged by internal/staging (hard links out of the object
// store where it can), and a process on this machine run detached under
// internal/proc's supervisor, so it outlives a restart of the server and
// is re-adopted from its state directory. It implements driver.Driver;
// the lifecycle that calls it is internal/training's.
package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sagebox/sagebox/internal/archive"
	"github.com/sagebox/sagebox/internal/proc"
	"github.com/sagebox/sagebox/internal/pyruntime"
	"github.com/sagebox/sagebox/internal/staging"
	"github.com/sagebox/sagebox/internal/statefile"
	"github.com/sagebox/sagebox/internal/toolkit"
	"github.com/sagebox/sagebox/internal/training/driver"
)

// GPUs hands out the machine's GPUs across everything the server runs
// (*gpu.Allocator implements it). IDs are CUDA_VISIBLE_DEVICES entries.
type GPUs interface {
	// ReserveFree holds every free GPU for owner, rounded down to a
	// multiple of step and at least min (shared when too few are free),
	// and returns all owner holds.
	ReserveFree(owner string, min, step int) []string
	// Claim makes owner hold ids again (a recovered job), returning those
	// that still exist.
	Claim(owner string, ids []string) []string
	// Release gives back what owner holds.
	Release(owner string)
}

// Config configures the local driver.
type Config struct {
	// DataDir is sagebox's data directory; workspaces are
	// DataDir/jobs/<job>/<host>/.
	DataDir string
	// Objects is the object store channels, code and checkpoints come
	// from and artifacts go to.
	Objects staging.Objects
	// Python is the interpreter for user code.
	Python pyruntime.Interpreter
	// RuntimeDir is the unpacked embedded Python runtime (pyruntime.Unpack);
	// it goes on PYTHONPATH after the code directory. May be empty.
	RuntimeDir string
	// SagemakerEndpoint is the server's URL. Scripts get it as
	// AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_S3 and S3_ENDPOINT_URL, so boto3 in
	// a script talks to sagebox.
	SagemakerEndpoint string
	// JobCredentials, if set, gives each job the access key its scripts
	// sign with, one the server's verifier accepts. Nil means the dummy
	// key "sagebox", which a server without credentials accepts.
	JobCredentials func(job string) (accessKeyID, secret string)
	// ShimCommand is the argv that runs the process supervisor, such as
	// {os.Executable(), "exec-shim"}.
	ShimCommand []string
	// CopyChannels copies channel objects instead of hard-linking them, for
	// scripts that modify their input files in place.
	CopyChannels bool
	// GPUs hands out the machine's GPUs: each job's hosts get GPUs of
	// their own, released when the job ends. Nil means none.
	GPUs GPUs
	// LocalPaths says which of this machine's paths file:// may name.
	LocalPaths staging.LocalPaths
	// ArchiveEntriesPerGB bounds the entries of a source directory's
	// archive per GB of ResourceConfig.VolumeSizeInGB (which bounds its
	// unpacked size); 0 means 10,000.
	ArchiveEntriesPerGB int
	// KeepWorkspaces is how long a finished job's workspaces stay on disk
	// after its artifacts are uploaded; 0 removes them at once.
	// KeepFailedWorkspaces is the same for failed jobs, kept for debugging.
	KeepWorkspaces, KeepFailedWorkspaces time.Duration
	// RunAs, if set, runs jobs (and their pip installs for a package
	// entry point) as an unprivileged user; the server must run as root
	// and should call RestrictDataDir. Nil runs them as the server's user.
	RunAs *RunAs
	// Ports hands out jobs' MASTER_PORTs; nil means one of the driver's
	// own. Drivers running side by side on one machine should share one.
	Ports *Ports
	// NoHostIsolation keeps every host process in the machine's own
	// namespaces: host names then resolve only through libnss-wrapper (see
	// toolkit.Names), as where the server is not root.
	NoHostIsolation bool
	// Environ is the environment jobs inherit (filtered by
	// toolkit.BaseEnv). Nil means os.Environ().
	Environ []string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger; nil means slog.Default().
	Logger *slog.Logger
}

// Driver runs training hosts on this machine. It is safe for concurrent
// use across jobs.
type Driver struct {
	cfg Config
	log *slog.Logger

	mu   sync.Mutex
	jobs map[string]*jobState

	ports *Ports

	uidMu sync.Mutex // held while a job's uid is chosen and its workspaces chowned

	probeOnce sync.Once
	torchVer  string

	isoOnce  sync.Once
	isoErr   error      // why host processes cannot have namespaces of their own
	subnetMu sync.Mutex // held while a job's loopback subnet is chosen
}

var _ driver.Driver = (*Driver)(nil)

// jobState is what one job's calls share.
type jobState struct {
	gpus       []string // CUDA_VISIBLE_DEVICES entries the job holds
	gpusKnown  bool
	ckpts      *staging.Checkpoints
	ckptsKnown bool
	python     string
	kind       toolkit.EntryKind
	installed  bool
	port       int
	names      toolkit.Names
	nssWrapper string
}

// New returns a local driver.
func New(cfg Config) *Driver {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.ArchiveEntriesPerGB <= 0 {
		cfg.ArchiveEntriesPerGB = 10000
	}
	l := cfg.Logger
	if l == nil {
		l = slog.Default()
	}
	ports := cfg.Ports
	if ports == nil {
		ports = NewPorts()
	}
	return &Driver{cfg: cfg, log: l, jobs: map[string]*jobState{}, ports: ports}
}

// Files in a host's state directory (besides internal/proc's).
const (
	fileShim = "shim.json" // launchRecord
	fileGPUs = "gpus.json" // at the job's state directory: the GPUs its hosts run with
)

// launchRecord is shim.json: written before the process is started (so a
// restart knows a launch was under way; internal/proc's own intent says
// whether anything ran), and again with the supervisor's pid once it has
// started. Older binaries wrote it only after the start, with the pid
// (see proc.AdoptLegacy).
type launchRecord struct {
	ShimPID   int       `json:"shim_pid"`
	Argv      []string  `json:"argv"`
	Passive   bool      `json:"passive,omitempty"`
	StartedAt time.Time `json:"started_at"`
}

func (d *Driver) state(job string) *jobState {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := d.jobs[job]
	if st == nil {
		st = &jobState{}
		d.jobs[job] = st
	}
	return st
}

func (d *Driver) jobDir(job string) string { return filepath.Join(d.cfg.DataDir, "jobs", job) }

func hostStateDir(job *driver.Job, host int) string {
	return filepath.Join(job.StateDir, job.Hosts[host].Name)
}

// layout fills each host's workspace and devices: on Prepare (reserve:
// a fresh attempt) and the first call after a restart. Later calls find
// them filled and leave job untouched, so SyncCheckpoints, which runs
// beside the lifecycle's own calls, never writes it.
func (d *Driver) layout(job *driver.Job, reserve bool) {
	if !reserve && len(job.Hosts) > 0 && job.Hosts[0].Workspace.Root != "" {
		return
	}
	st := d.state(job.Name)
	if !st.gpusKnown {
		st.gpus = d.reserveGPUs(job, reserve)
		st.gpusKnown = true
	}
	for i := range job.Hosts {
		h := &job.Hosts[i]
		h.Index = i
		h.Workspace = toolkit.Workspace{Root: filepath.Join(d.jobDir(job.Name), h.Name)}
		h.NumGPUs, h.CUDADevices = gpuShare(st.gpus, i, len(job.Hosts))
	}
}

func gpuOwner(job string) string { return "training-job/" + job }

// reserveGPUs holds the job's GPUs: every free one, split evenly between
// its hosts (at least one each, shared when none is free), or, for a job
// that already ran here (a recovery), the ones it recorded.
func (d *Driver) reserveGPUs(job *driver.Job, fresh bool) []string {
	a := d.cfg.GPUs
	if a == nil {
		return nil
	}
	var had []string
	if !fresh {
		if err := statefile.ReadJSON(filepath.Join(job.StateDir, fileGPUs), &had); err == nil {
			return a.Claim(gpuOwner(job.Name), had)
		}
	}
	a.Release(gpuOwner(job.Name)) // a second attempt of the same run starts over
	n := len(job.Hosts)
	return a.ReserveFree(gpuOwner(job.Name), n, n)
}

// gpuShare splits the job's GPUs between its simulated hosts, in equal
// disjoint parts: n hosts on one machine must not all claim every GPU.
// With fewer GPUs than hosts, each host gets one, round-robin. Hosts get
// CUDA_VISIBLE_DEVICES whenever there are GPUs, so a job sees only its own.
func gpuShare(ids []string, host, n int) (count int, visible string) {
	if len(ids) == 0 {
		return 0, ""
	}
	per := len(ids) / max(n, 1)
	if per == 0 {
		return 1, ids[host%len(ids)]
	}
	return per, strings.Join(ids[host*per:(host+1)*per], ",")
}

// stager is the job's staging.Stager.
func (d *Driver) stager(job *driver.Job) *staging.Stager {
	st := &staging.Stager{
		Objects:      d.cfg.Objects,
		CopyChannels: d.cfg.CopyChannels,
		LocalPaths:   d.cfg.LocalPaths,
		Log:          d.log.With("job", job.Name),
		Notes:        func(ctx context.Context, hosts []int, msg string) { job.Note(hosts, msg) },
	}
	if gb := job.Spec.VolumeSizeInGB; gb > 0 {
		st.ArchiveLimits = archive.Limits{MaxBytes: int64(gb) << 30, MaxEntries: gb * d.cfg.ArchiveEntriesPerGB}
		st.LimitsFrom = fmt.Sprintf("ResourceConfig.VolumeSizeInGB is %d", gb)
	}
	return st
}

func (d *Driver) stagingHosts(job *driver.Job) []staging.Host {
	out := make([]staging.Host, len(job.Hosts))
	for i, h := range job.Hosts {
		out[i] = staging.Host{Index: i, Name: h.Name, Tree: staging.Tree{Root: h.Workspace.Root}}
	}
	return out
}

// Prepare builds every host's workspace: config files, channels, source
// directory, checkpoints.
func (d *Driver) Prepare(ctx context.Context, job *driver.Job) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d.ports.Release(job.Name)
	d.mu.Lock()
	delete(d.jobs, job.Name) // a new attempt
	d.mu.Unlock()
	d.layout(job, true)
	s := job.Spec
	var names []string
	for _, c := range s.Channels {
		names = append(names, c.Name)
	}
	for i, h := range job.Hosts {
		if err := h.Workspace.Create(names); err != nil {
			return err
		}
		if err := d.closeWorkspace(job, h.Workspace.Root); err != nil {
			return err
		}
		if err := os.MkdirAll(hostStateDir(job, i), 0o755); err != nil {
			return fmt.Errorf("create state dir: %w", err)
		}
		cf, err := s.ConfigFiles(h.Name)
		if err != nil {
			return err
		}
		if err := cf.Write(h.Workspace); err != nil {
			return err
		}
	}
	if d.cfg.GPUs != nil {
		if err := statefile.WriteJSON(filepath.Join(job.StateDir, fileGPUs), append([]string{}, d.state(job.Name).gpus...)); err != nil {
			return fmt.Errorf("record the job's GPUs: %w", err)
		}
	}
	stg, hosts := d.stager(job), d.stagingHosts(job)
	if err := stg.CheckOutput(staging.Output{Path: s.OutputPath, Job: s.Name}); err != nil {
		return err
	}
	for _, c := range s.Channels {
		if err := stg.StageChannel(ctx, StagingChannel(c), len(hosts), hosts); err != nil {
			return err
		}
	}
	for _, h := range hosts {
		if err := stg.StageSourceDir(ctx, s.SubmitDir, s.EntryPoint, h.Tree); err != nil {
			return err
		}
	}
	ck, err := d.checkpoints(ctx, job)
	if err != nil {
		return err
	}
	if err := ck.Download(ctx); err != nil {
		return err
	}
	return d.prepareRunAs(job)
}

// StagingChannel is a toolkit channel as staging takes it.
func StagingChannel(c toolkit.Channel) staging.Channel {
	return staging.Channel{Name: c.Name, URI: c.URI, DataType: c.DataType, Distribution: c.Distribution, Compression: c.Compression}
}

// checkpoints resolves the job's checkpoint directories, once.
func (d *Driver) checkpoints(ctx context.Context, job *driver.Job) (*staging.Checkpoints, error) {
	st := d.state(job.Name)
	if st.ckptsKnown {
		return st.ckpts, nil
	}
	var cc staging.CheckpointConfig
	if c := job.Spec.Checkpoint; c != nil {
		cc = staging.CheckpointConfig{S3Uri: c.S3Uri, LocalPath: c.LocalPath}
	}
	ck, err := d.stager(job).Checkpoints(ctx, cc, d.stagingHosts(job))
	if err != nil {
		return nil, err
	}
	st.ckpts, st.ckptsKnown = ck, true
	return ck, nil
}

// SyncCheckpoints uploads the checkpoint files that changed.
func (d *Driver) SyncCheckpoints(ctx context.Context, job *driver.Job) error {
	d.layout(job, false)
	ck, err := d.checkpoints(ctx, job)
	if err != nil {
		return err
	}
	return ck.Sync(ctx)
}

// Collect uploads the model and output data of every host.
func (d *Driver) Collect(ctx context.Context, job *driver.Job) (string, error) {
	d.layout(job, false)
	trees := make([]staging.Tree, len(job.Hosts))
	for i, h := range job.Hosts {
		trees[i] = staging.Tree{Root: h.Workspace.Root}
	}
	s := job.Spec
	return d.stager(job).UploadArtifacts(ctx, staging.Output{Path: s.OutputPath, Job: job.Name, Compression: s.Compression}, trees)
}

// Settle writes output/success, or output/failure unless the script wrote
// its own.
func (d *Driver) Settle(job *driver.Job, host int, failure string) (string, error) {
	d.layout(job, false)
	ws := job.Hosts[host].Workspace
	if failure == "" {
		if err := os.WriteFile(ws.SuccessFile(), nil, 0o644); err != nil {
			return "", fmt.Errorf("write output/success: %w", err)
		}
		return "", nil
	}
	return toolkit.WriteFailureFile(ws, failure)
}

// Release gives back the job's GPUs and applies the retention policy.
func (d *Driver) Release(job *driver.Job, failed bool) {
	if d.cfg.GPUs != nil {
		d.cfg.GPUs.Release(gpuOwner(job.Name))
	}
	d.ports.Release(job.Name)
	d.mu.Lock()
	delete(d.jobs, job.Name)
	d.mu.Unlock()
	d.retain(job.Name, failed)
}

// Install runs pip as the toolkit does (TK entry_point.install): a
// package (setup.py) is installed with its requirements; a script's
// requirements.txt is installed; a command gets nothing. Environments are
// built by pyruntime, cached by content, and see the system's packages.
func (d *Driver) Install(ctx context.Context, job *driver.Job) error {
	d.layout(job, false)
	st := d.state(job.Name)
	python := d.cfg.Python.Path
	code := job.Hosts[0].Workspace.CodeDir()
	kind := toolkit.EntryKindOf(job.Spec.EntryPoint, code)
	req := filepath.Join(code, "requirements.txt")
	out := job.Output
	if out == nil {
		out = io.Discard
	}
	all := job.AllHosts()
	cache := filepath.Join(d.cfg.DataDir, "cache", "requirements")
	cred, err := d.credential(job)
	if err != nil {
		return err
	}
	switch {
	case kind == toolkit.EntryPackage:
		cmd := []string{"python", "-m", "pip", "install", "."}
		if exists(req) {
			cmd = append(cmd, "-r", "requirements.txt")
		}
		job.Note(all, "installing the source directory as a package: "+toolkit.ShellJoin(cmd))
		dir, err := d.packageDir(job, cred)
		if err != nil {
			return fmt.Errorf("create the package's environment directory: %w", err)
		}
		venv, err := installPackage(ctx, python, code, dir, d.pipEnv(job, cred), cred, out)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return &toolkit.Error{Reason: toolkit.InstallError("InstallModuleError", err, cmd), Err: err}
		}
		python = venv
	case kind == toolkit.EntryProgram && exists(req):
		cmd := []string{"python", "-m", "pip", "install", "-r", "requirements.txt"}
		job.Note(all, "installing requirements.txt")
		venv, err := pyruntime.InstallRequirements(ctx, python, req, cache, d.pipEnv(job, nil), out)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return &toolkit.Error{Reason: toolkit.InstallError("InstallRequirementsError", err, cmd), Err: err}
		}
		python = venv
	case kind == toolkit.EntryCommand:
		if exists(req) {
			job.Note(all, "requirements.txt is not installed for a command entry point (as in the SageMaker toolkit)")
		}
		for _, h := range job.Hosts {
			if err := os.Chmod(filepath.Join(h.Workspace.CodeDir(), job.Spec.EntryPoint), 0o755); err != nil && h.Index == 0 {
				return fmt.Errorf("make entry point executable: %w", err)
			}
		}
	}
	st.python, st.kind, st.installed = python, kind, true
	return nil
}

func (d *Driver) environ() []string {
	if d.cfg.Environ != nil {
		return d.cfg.Environ
	}
	return os.Environ()
}

// pipEnv is the environment pip and whatever a requirement's setup runs
// get: the job's own inherited base (not the server's AWS credentials or
// SAGEBOX_* settings) and the job's Environment, as in the SageMaker
// container, where pip runs in the job's environment.
//
// With cred (RunAs), HOME is the first host's workspace, which that user
// owns.
func (d *Driver) pipEnv(job *driver.Job, cred *syscall.Credential) []string {
	env := toolkit.BaseEnv(d.environ())
	extra := map[string]string{}
	if cred != nil {
		extra["HOME"] = job.Hosts[0].Workspace.Root
	}
	for k, v := range job.Spec.Environment {
		extra[k] = v
	}
	return append(env, toolkit.EnvironList(extra)...)
}

// probeTorch finds, once, the interpreter's torch version
// (SM_DLC_TORCH_VERSION) without importing torch.
func (d *Driver) probeTorch(ctx context.Context) string {
	d.probeOnce.Do(func() {
		if d.cfg.Python.Path == "" {
			return
		}
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		const code = "import importlib.util as u, re, os\n" +
			"s = u.find_spec('torch')\n" +
			"p = s and os.path.join(os.path.dirname(s.origin), 'version.py')\n" +
			"t = p and os.path.exists(p) and open(p).read()\n" +
			"m = t and re.search(r\"__version__\\s*=\\s*'([^']+)'\", t)\n" +
			"print(m.group(1) if m else '')\n"
		if out, err := exec.CommandContext(ctx, d.cfg.Python.Path, "-c", code).Output(); err == nil {
			d.torchVer = strings.TrimSpace(string(out))
		}
	})
	return d.torchVer
}

// Start starts host's process detached, under the process supervisor.
func (d *Driver) Start(ctx context.Context, job *driver.Job, host int) (driver.Task, error) {
	d.layout(job, false)
	st := d.state(job.Name)
	if !st.installed {
		return nil, errors.New("local driver: Start before Install")
	}
	if st.port == 0 {
		st.port = d.ports.Claim(job.Name)
		st.names, st.nssWrapper = d.names(job)
	}
	h := job.Hosts[host]
	dir := hostStateDir(job, host)
	cred, err := d.credential(job)
	if err != nil {
		return nil, err
	}
	// What the job itself writes (torchrun's logs, nss_wrapper's hosts
	// file) goes to the state directory, or with RunAs, where the state
	// directory is root's alone, to the workspace.
	userDir := dir
	if cred != nil {
		userDir = h.Workspace.Root
	}
	argv, passive, err := job.Spec.Command(st.kind, st.python, h, st.names, st.port, userDir)
	if err != nil {
		return nil, err
	}
	rec := launchRecord{Argv: argv, Passive: passive, StartedAt: d.cfg.Now()}
	if passive {
		if err := statefile.WriteJSON(filepath.Join(dir, fileShim), rec); err != nil {
			return nil, err
		}
		job.Note([]int{host}, fmt.Sprintf("%s is an MPI worker: mpirun on %s starts its processes", h.Name, job.Spec.Hosts[0]))
		return passiveTask{argv: argv}, nil
	}
	cf, err := job.Spec.ConfigFiles(h.Name)
	if err != nil {
		return nil, err
	}
	pe := toolkit.Platform{
		Base: toolkit.BaseEnv(d.environ()), Endpoint: d.cfg.SagemakerEndpoint, MasterPort: st.port,
		RuntimeDir: d.cfg.RuntimeDir, TorchVersion: d.probeTorch(ctx), NumCPUs: runtime.NumCPU(),
		Names: st.names,
	}
	ps := proc.Spec{
		Path: argv[0], Args: argv[1:], Dir: h.Workspace.CodeDir(),
		Detach: true, StateDir: dir, Supervisor: d.cfg.ShimCommand, Credential: cred,
	}
	switch st.names {
	case toolkit.NamesOwnAddress:
		// Its own /etc/hosts (the job's names, then the machine's) and its
		// own host name, in namespaces the supervisor enters.
		if ps.HostsFile, err = d.hostsFile(job); err != nil {
			return nil, err
		}
		ps.Hostname = h.Name
	case toolkit.NamesNSSWrapper:
		pe.NSSWrapper = st.nssWrapper
		if pe.NSSHostsFile, err = toolkit.WriteNSSHostsFile(userDir, job.Spec.Hosts); err != nil {
			return nil, fmt.Errorf("write hosts file: %w", err)
		}
	}
	if d.cfg.JobCredentials != nil {
		pe.AccessKeyID, pe.SecretKey = d.cfg.JobCredentials(job.Spec.Name)
	}
	em := job.Spec.Env(h, cf, pe)
	if cred != nil {
		em["HOME"] = h.Workspace.Root // the user may have no home, or another's
	}
	ps.Env = toolkit.EnvironList(em)
	if len(d.cfg.ShimCommand) == 0 {
		return nil, errors.New("no shim command configured")
	}
	if err := statefile.WriteJSON(filepath.Join(dir, fileShim), rec); err != nil {
		return nil, err
	}
	p, err := proc.Start(ctx, ps)
	if err != nil {
		return nil, err
	}
	rec.ShimPID = p.SupervisorPid()
	if err := statefile.WriteJSON(filepath.Join(dir, fileShim), rec); err != nil {
		return nil, err
	}
	d.log.Info("process started", "job", job.Name, "host", h.Name, "pid", rec.ShimPID, "argv", toolkit.ShellJoin(argv))
	return &task{p: p, dir: dir, argv: argv, supPID: rec.ShimPID}, nil
}

// Recover re-adopts host's process (internal/proc checks that a recorded
// pid is still the process it was).
func (d *Driver) Recover(ctx context.Context, job *driver.Job, host int) (driver.Task, error) {
	d.layout(job, false)
	dir := hostStateDir(job, host)
	var rec launchRecord
	if err := statefile.ReadJSON(filepath.Join(dir, fileShim), &rec); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, driver.ErrNotStarted
		}
		return nil, err
	}
	if rec.Passive {
		return passiveTask{argv: rec.Argv}, nil
	}
	p, err := proc.Adopt(ctx, dir)
	switch {
	case errors.Is(err, proc.ErrNotStarted) && rec.ShimPID > 0:
		p = proc.AdoptLegacy(dir, rec.ShimPID) // started by an older binary
	case errors.Is(err, proc.ErrNotStarted):
		return nil, driver.ErrNotStarted
	case err != nil:
		return nil, err
	}
	return &task{p: p, dir: dir, argv: rec.Argv, supPID: rec.ShimPID}, nil
}

// task is a host's process under internal/proc.
type task struct {
	p      *proc.Handle
	dir    string
	argv   []string
	supPID int
}

func (t *task) Output() io.ReaderAt             { return fileReaderAt(proc.OutputPath(t.dir)) }
func (t *task) Done() <-chan struct{}           { return t.p.Done() }
func (t *task) Signal(sig syscall.Signal) error { return t.p.Signal(sig) }
func (t *task) TermSentAt() time.Time           { return t.p.TermSentAt() }
func (t *task) Passive() bool                   { return false }
func (t *task) Argv() []string                  { return t.argv }
func (t *task) ID() string                      { return fmt.Sprintf("pid %d", t.pid()) }

func (t *task) pid() int {
	if t.supPID != 0 {
		return t.supPID
	}
	return t.p.SupervisorPid()
}

func (t *task) Result() driver.Result {
	res := t.p.Result()
	r := driver.Result{ExitCode: res.ExitCode, Signal: res.Signal, StartedAt: res.StartedAt, EndedAt: res.EndedAt, Err: res.Err}
	if !errors.Is(res.Err, proc.ErrLost) {
		return r
	}
	r.Lost = true
	if t.p.Adopted() {
		r.Err = fmt.Errorf("sagebox server restarted and the job's process (pid %d) was gone without an exit status", t.pid())
	} else {
		msg := fmt.Sprintf("the job's process supervisor (pid %d) exited without an exit status", t.pid())
		if b, err := os.ReadFile(proc.SupervisorLogPath(t.dir)); err == nil && len(strings.TrimSpace(string(b))) > 0 {
			msg += ": " + toolkit.LastLines(string(b), 3)
		}
		r.Err = errors.New(msg)
	}
	return r
}

// passiveTask is an MPI worker host: mpirun on the first host starts its
// processes, so it has no process or output of its own.
type passiveTask struct{ argv []string }

func (passiveTask) Output() io.ReaderAt         { return emptyReaderAt{} }
func (passiveTask) Done() <-chan struct{}       { return nil }
func (passiveTask) Result() driver.Result       { return driver.Result{} }
func (passiveTask) Signal(syscall.Signal) error { return nil }
func (passiveTask) TermSentAt() time.Time       { return time.Time{} }
func (passiveTask) Passive() bool               { return true }
func (t passiveTask) Argv() []string            { return t.argv }
func (passiveTask) ID() string                  { return "passive" }

type emptyReaderAt struct{}

func (emptyReaderAt) ReadAt([]byte, int64) (int, error) { return 0, io.EOF }

// fileReaderAt reads the file at path, which may not exist yet (empty).
type fileReaderAt string

func (f fileReaderAt) ReadAt(p []byte, off int64) (int, error) {
	fh, err := os.Open(string(f))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, io.EOF
	}
	if err != nil {
		return 0, err
	}
	defer fh.Close()
	return fh.ReadAt(p, off)
}
