package toolkit

import (
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/sagebox/sagebox/internal/pyvalue"
)

// Host is what differs between the hosts of one job.
type Host struct {
	Index     int // 0-based rank in Spec.Hosts
	Name      string
	Workspace Workspace
	NumGPUs   int
	// cudaDevices, when set, becomes CUDA_VISIBLE_DEVICES: the machine's
	// GPUs are split between the simulated hosts.
	CUDADevices string
}

// Platform is what the runner adds to every host's environment.
type Platform struct {
	Base         []string // the server's environment, filtered by baseEnv
	Endpoint     string   // sagebox's URL, for boto3 in scripts
	AccessKeyID  string   // the job's own key for it; "" means the dummy "sagebox"
	SecretKey    string
	MasterPort   int
	RuntimeDir   string // embedded Python runtime, on PYTHONPATH after code/
	TorchVersion string
	NumCPUs      int
	Names        Names  // how the job's host names resolve (hostnames.go)
	NSSWrapper   string // with NamesNSSWrapper: libnss_wrapper.so
	NSSHostsFile string // with NamesNSSWrapper: its hosts file
}

// BaseEnv filters environ (KEY=VALUE entries) down to what a job (and pip
// installing its requirements) inherits: not the server's own AWS
// credentials and endpoints, no SAGEBOX_* setting of the server
// (SAGEBOX_CREDENTIALS holds every key pair), and nothing the toolkit or a
// launcher sets itself.
func BaseEnv(environ []string) []string {
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if !inherited(k) {
			continue
		}
		out = append(out, kv)
	}
	return out
}

func inherited(k string) bool {
	switch k {
	case "SAGEBOX_CREDENTIALS", "MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "S3_ENDPOINT_URL":
		return false
	}
	for _, p := range [...]string{"AWS_", "SM_", "SAGEMAKER_", "SAGEBOX_", "TRAINING_JOB_", "TORCHELASTIC_", "PET_", "OMPI_"} {
		if strings.HasPrefix(k, p) {
			return false
		}
	}
	return true
}

// Env computes the full environment of one host's process, in layers:
// the inherited environment; the platform's (AWS endpoint and dummy
// credentials, job name and ARN); the job's Environment; then what the
// SageMaker training toolkit and the PyTorch container set (every SM_*
// variable, contract section 2.2, and 2.3), which wins.
func (s *Spec) Env(h Host, cf ConfigFiles, p Platform) map[string]string {
	env := map[string]string{}
	for _, kv := range p.Base {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}

	// Platform layer.
	if p.Endpoint != "" {
		env["AWS_ENDPOINT_URL"] = p.Endpoint
		env["AWS_ENDPOINT_URL_S3"] = p.Endpoint
		env["S3_ENDPOINT_URL"] = p.Endpoint
		env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"] = "sagebox", "sagebox"
		if p.AccessKeyID != "" {
			env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"] = p.AccessKeyID, p.SecretKey
		}
	}
	if s.Region != "" {
		env["AWS_REGION"] = s.Region
		env["AWS_DEFAULT_REGION"] = s.Region
	}
	env["TRAINING_JOB_NAME"] = s.Name
	env["TRAINING_JOB_ARN"] = s.ARN
	env["SAGEMAKER_TRAINING_MODULE"] = dlcTrainingModule
	env["NCCL_SOCKET_IFNAME"] = networkInterfaceName
	env["NCCL_IB_DISABLE"] = "1"
	env["NCCL_DEBUG"] = "WARN"
	env["GLOO_SOCKET_IFNAME"] = networkInterfaceName
	if s.Dist == DistTorch {
		env["NCCL_PROTO"] = "simple"
	}
	if h.CUDADevices != "" {
		env["CUDA_VISIBLE_DEVICES"] = h.CUDADevices
	}

	// The job's Environment.
	for k, v := range s.Environment {
		env[k] = v
	}

	// Toolkit layer.
	for k, v := range s.smVars(h, cf, p, env["SAGEMAKER_TRAINING_MODULE"]) {
		env[k] = v
	}
	env["SAGEMAKER_BASE_DIR"] = h.Workspace.Root
	env["CURRENT_HOST"] = h.Name
	env["SAGEMAKER_JOB_NAME"] = s.SagemakerJobName
	env["SAGEMAKER_REGION"] = s.Region
	// The hosts algo-1..N are all this machine. Where their names
	// resolve (hostnames.go) MASTER_ADDR is the master's name, as on
	// SageMaker; else 127.0.0.1. MASTER_PORT is 7777 or, when that is
	// taken, a free port chosen per job. The network interface is "lo"
	// (NCCL/Gloo bind to it).
	if p.Names == NamesNSSWrapper {
		preloadNSSWrapper(env, p.NSSWrapper, p.NSSHostsFile)
	}
	env["MASTER_ADDR"] = s.MasterAddr(p.Names)
	env["MASTER_PORT"] = strconv.Itoa(p.MasterPort)
	if p.TorchVersion != "" {
		env["SM_DLC_TORCH_VERSION"] = p.TorchVersion
	}
	env["PYTHONPATH"] = pythonPath(env["PYTHONPATH"], h.Workspace.CodeDir(), p.RuntimeDir)
	env["PYTHONUNBUFFERED"] = "1"
	return env
}

// EnvironList turns env into a sorted KEY=VALUE list for exec.
func EnvironList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// smVars are the toolkit's SM_* variables (TK environment.py to_env_vars):
// name "SM_" + upper(key) with hyphens kept, strings raw, None empty, the
// rest compact JSON with sorted keys.
func (s *Spec) smVars(h Host, cf ConfigFiles, p Platform, frameworkModule string) map[string]string {
	te := s.trainingEnv(h, cf, p, frameworkModule)
	out := map[string]string{}
	for _, k := range []string{
		"hosts", "current_host", "current_instance_type", "current_instance_group",
		"current_instance_group_hosts", "instance_groups", "instance_groups_dict",
		"distribution_instance_groups", "is_hetero", "network_interface_name",
		"num_gpus", "num_cpus", "num_neurons", "model_dir", "input_dir", "input_config_dir",
		"output_dir", "output_data_dir", "output_intermediate_dir", "user_entry_point",
		"module_name", "module_dir", "log_level", "framework_module", "resource_config",
		"input_data_config",
	} {
		v, _ := te.Get(k)
		out["SM_"+strings.ToUpper(k)] = v.EnvString()
	}
	chans, _ := te.Get("channel_input_dirs")
	names := chans.Keys()
	sort.Strings(names)
	out["SM_CHANNELS"] = pyvalue.Strings(names).JSONDumps()
	chanDirs := chans.Values()
	for i, c := range chans.Keys() {
		out["SM_CHANNEL_"+strings.ToUpper(c)] = chanDirs[i].EnvString()
	}
	out["SM_HPS"] = s.UserHyperParameters.JSONDumps()
	hpVals := s.UserHyperParameters.Values()
	for i, k := range s.UserHyperParameters.Keys() {
		out["SM_HP_"+strings.ToUpper(k)] = hpVals[i].EnvString()
	}
	out["SM_USER_ARGS"] = pyvalue.Strings(toCmdArgs(s.UserHyperParameters)).JSONDumps()
	out["SM_FRAMEWORK_PARAMS"] = s.FrameworkParameters.JSONDumps()
	out["SM_TRAINING_ENV"] = te.JSONDumps()
	return out
}

// trainingEnv is SM_TRAINING_ENV: every property of the toolkit's
// Environment object.
func (s *Spec) trainingEnv(h Host, cf ConfigFiles, p Platform, frameworkModule string) pyvalue.Value {
	ws := h.Workspace
	hosts := pyvalue.Strings(s.Hosts)
	distHosts, distGroups := pyvalue.List(), pyvalue.List()
	if s.Distributed {
		distHosts, distGroups = hosts, pyvalue.Strings([]string{instanceGroupName})
	}
	if v, ok := s.HyperParameters.Get("sagemaker_distribution_instance_groups"); ok && v.Kind() == pyvalue.KindList {
		distGroups = v
		if len(v.Elems()) > 0 {
			distHosts = hosts
		}
	}
	master := s.Hosts[0]
	if dh := distHosts.Elems(); len(dh) > 0 {
		master = dh[0].Str()
	}
	chans := map[string]pyvalue.Value{}
	for _, c := range s.Channels {
		chans[c.Name] = pyvalue.Str(ws.ChannelDir(c.Name))
	}
	moduleDir := s.SubmitDir
	if moduleDir == "" {
		moduleDir = ws.CodeDir()
	}
	fm := pyvalue.None()
	if frameworkModule != "" {
		fm = pyvalue.Str(frameworkModule)
	}
	parse := func(b []byte) pyvalue.Value {
		v, err := pyvalue.ParseJSON(string(b))
		if err != nil {
			return pyvalue.NewDict()
		}
		return v
	}
	return pyvalue.DictOf(map[string]pyvalue.Value{
		"additional_framework_parameters": s.FrameworkParameters,
		"channel_input_dirs":              pyvalue.DictOf(chans),
		"current_host":                    pyvalue.Str(h.Name),
		"current_instance_group":          pyvalue.Str(instanceGroupName),
		"current_instance_group_hosts":    hosts,
		"current_instance_type":           pyvalue.Str(s.InstanceType),
		"distribution_hosts":              distHosts,
		"distribution_instance_groups":    distGroups,
		"framework_module":                fm,
		"hosts":                           hosts,
		"hyperparameters":                 s.UserHyperParameters,
		"input_config_dir":                pyvalue.Str(ws.ConfigDir()),
		"input_data_config":               parse(cf.InputData),
		"input_dir":                       pyvalue.Str(ws.InputDir()),
		"instance_groups":                 pyvalue.Strings([]string{instanceGroupName}),
		"instance_groups_dict": pyvalue.DictOf(map[string]pyvalue.Value{instanceGroupName: pyvalue.DictOf(map[string]pyvalue.Value{
			"hosts":               hosts,
			"instance_group_name": pyvalue.Str(instanceGroupName),
			"instance_type":       pyvalue.Str(s.InstanceType),
		})}),
		"is_hetero":                pyvalue.Bool(false),
		"is_master":                pyvalue.Bool(h.Name == master),
		"is_modelparallel_enabled": pyvalue.Bool(s.ModelParallel),
		"is_smddpmprun_installed":  pyvalue.Bool(false),
		"is_smddprun_installed":    pyvalue.Bool(false),
		"job_name":                 pyvalue.Str(s.Name),
		"log_level":                s.LogLevel,
		"master_hostname":          pyvalue.Str(master),
		"model_dir":                pyvalue.Str(ws.ModelDir()),
		"module_dir":               pyvalue.Str(moduleDir),
		"module_name":              pyvalue.Str(s.ModuleName),
		"network_interface_name":   pyvalue.Str(networkInterfaceName),
		"num_cpus":                 pyvalue.Int(p.NumCPUs),
		"num_gpus":                 pyvalue.Int(h.NumGPUs),
		"num_neurons":              pyvalue.Int(0),
		"output_data_dir":          pyvalue.Str(ws.OutputDataDir()),
		"output_dir":               pyvalue.Str(ws.OutputDir()),
		"output_intermediate_dir":  pyvalue.Str(ws.IntermediateDir()),
		"resource_config":          parse(cf.Resource),
		"topology":                 pyvalue.None(),
		"user_entry_point":         pyvalue.Str(s.EntryPoint),
	})
}

// pythonPath is a PYTHONPATH with dirs (empty ones left out) before
// existing, as pyruntime.PythonPath builds it.
func pythonPath(existing string, dirs ...string) string {
	var parts []string
	for _, d := range dirs {
		if d != "" {
			parts = append(parts, d)
		}
	}
	if existing != "" {
		parts = append(parts, existing)
	}
	return strings.Join(parts, string(os.PathListSeparator))
}
