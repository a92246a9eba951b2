package toolkit

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

func testSpec(t *testing.T) (*Spec, Host, ConfigFiles, Platform) {
	t.Helper()
	hps := map[string]string{
		"epochs": "10", "learning-rate": "0.001", "opt": `"adam"`, "x": "null", "layers": "[64, 32]",
		"sagemaker_program":                   `"src/train.py"`,
		"sagemaker_submit_directory":          `"s3://bkt/job/source/sourcedir.tar.gz"`,
		"sagemaker_container_log_level":       "20",
		"sagemaker_job_name":                  `"job-1"`,
		"sagemaker_region":                    `"eu-west-1"`,
		"sagemaker_torch_distributed_enabled": "true",
		"sagemaker_instance_type":             `"ml.p4d.24xlarge"`,
		"_tuning_objective_metric":            `"loss"`,
	}
	job := newTestJob("job-1", hps, withHosts(2),
		withChannel("train", "s3://bkt/data/train", "FullyReplicated"),
		withChannel("test-data", "s3://bkt/data/test", "ShardedByS3Key"))
	job.InputDataConfig[0].ContentType = "text/csv"
	job.Environment = map[string]string{"MY_FLAG": "1", "NCCL_DEBUG": "INFO"}
	s, err := NewSpec(job, "us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	h := Host{Index: 1, Name: "algo-2", Workspace: Workspace{Root: "/data/jobs/job-1/algo-2"}}
	cf, err := s.ConfigFiles("algo-2")
	if err != nil {
		t.Fatal(err)
	}
	p := Platform{
		Base:       BaseEnv([]string{"PATH=/usr/bin", "HOME=/root", "AWS_PROFILE=prod", "AWS_SECRET_ACCESS_KEY=real", "SM_HOSTS=stale", "PYTHONPATH=/existing"}),
		Endpoint:   "http://127.0.0.1:7070",
		MasterPort: 7777, RuntimeDir: "/data/runtime/abc", TorchVersion: "1.13.0", NumCPUs: 16,
	}
	return s, h, cf, p
}

func TestConfigFiles(t *testing.T) {
	s, _, cf, _ := testSpec(t)
	wantHPs, _ := json.Marshal(s.RawHyperParameters)
	if string(cf.HyperParameters) != string(wantHPs) {
		t.Errorf("hyperparameters.json = %s", cf.HyperParameters)
	}
	if got, want := string(cf.InputData), `{"test-data":{"TrainingInputMode":"File","S3DistributionType":"ShardedByS3Key","RecordWrapperType":"None"},"train":{"ContentType":"text/csv","TrainingInputMode":"File","S3DistributionType":"FullyReplicated","RecordWrapperType":"None"}}`; got != want {
		t.Errorf("inputdataconfig.json =\n%s\nwant\n%s", got, want)
	}
	if got, want := string(cf.Resource), `{"current_host":"algo-2","current_instance_type":"ml.m5.large","current_group_name":"homogeneousCluster","hosts":["algo-1","algo-2"],"instance_groups":[{"instance_group_name":"homogeneousCluster","instance_type":"ml.m5.large","hosts":["algo-1","algo-2"]}],"network_interface_name":"lo"}`; got != want {
		t.Errorf("resourceconfig.json =\n%s\nwant\n%s", got, want)
	}
	dir := t.TempDir()
	ws := Workspace{Root: dir}
	if err := ws.Create([]string{"train"}); err != nil {
		t.Fatal(err)
	}
	if err := cf.Write(ws); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"hyperparameters.json", "inputdataconfig.json", "resourceconfig.json"} {
		b, err := os.ReadFile(filepath.Join(dir, "input", "config", f))
		if err != nil || !json.Valid(b) {
			t.Errorf("%s: %v %s", f, err, b)
		}
	}
	for _, d := range []string{"input/data/train", "code", "model", "output/data", "output/intermediate", "checkpoints"} {
		if st, err := os.Stat(filepath.Join(dir, d)); err != nil || !st.IsDir() {
			t.Errorf("workspace lacks %s", d)
		}
	}
}

func TestEnvVars(t *testing.T) {
	s, h, cf, p := testSpec(t)
	env := s.Env(h, cf, p)
	ws := "/data/jobs/job-1/algo-2"
	want := map[string]string{
		"SM_HOSTS":                        `["algo-1","algo-2"]`,
		"SM_CURRENT_HOST":                 "algo-2",
		"SM_CURRENT_INSTANCE_TYPE":        "ml.m5.large",
		"SM_CURRENT_INSTANCE_GROUP":       "homogeneousCluster",
		"SM_CURRENT_INSTANCE_GROUP_HOSTS": `["algo-1","algo-2"]`,
		"SM_INSTANCE_GROUPS":              `["homogeneousCluster"]`,
		"SM_INSTANCE_GROUPS_DICT":         `{"homogeneousCluster":{"hosts":["algo-1","algo-2"],"instance_group_name":"homogeneousCluster","instance_type":"ml.m5.large"}}`,
		"SM_DISTRIBUTION_INSTANCE_GROUPS": `["homogeneousCluster"]`,
		"SM_IS_HETERO":                    "false",
		"SM_NETWORK_INTERFACE_NAME":       "lo",
		"SM_NUM_GPUS":                     "0",
		"SM_NUM_CPUS":                     "16",
		"SM_NUM_NEURONS":                  "0",
		"SM_MODEL_DIR":                    ws + "/model",
		"SM_INPUT_DIR":                    ws + "/input",
		"SM_INPUT_CONFIG_DIR":             ws + "/input/config",
		"SM_OUTPUT_DIR":                   ws + "/output",
		"SM_OUTPUT_DATA_DIR":              ws + "/output/data",
		"SM_OUTPUT_INTERMEDIATE_DIR":      ws + "/output/intermediate",
		"SM_CHANNELS":                     `["test-data","train"]`,
		"SM_CHANNEL_TRAIN":                ws + "/input/data/train",
		"SM_CHANNEL_TEST-DATA":            ws + "/input/data/test-data",
		"SM_HPS":                          `{"epochs":10,"layers":[64,32],"learning-rate":0.001,"opt":"adam","x":null}`,
		"SM_HP_EPOCHS":                    "10",
		"SM_HP_LEARNING-RATE":             "0.001",
		"SM_HP_OPT":                       "adam",
		"SM_HP_X":                         "",
		"SM_HP_LAYERS":                    "[64,32]",
		"SM_USER_ARGS":                    `["--epochs","10","--layers","[64, 32]","--learning-rate","0.001","--opt","adam","-x",""]`,
		"SM_FRAMEWORK_PARAMS":             `{"sagemaker_instance_type":"ml.p4d.24xlarge","sagemaker_torch_distributed_enabled":true}`,
		"SM_USER_ENTRY_POINT":             "src/train.py",
		"SM_MODULE_NAME":                  "src/train",
		"SM_MODULE_DIR":                   "s3://bkt/job/source/sourcedir.tar.gz",
		"SM_LOG_LEVEL":                    "20",
		"SM_FRAMEWORK_MODULE":             "sagemaker_pytorch_container.training:main",
		"SM_RESOURCE_CONFIG":              `{"current_group_name":"homogeneousCluster","current_host":"algo-2","current_instance_type":"ml.m5.large","hosts":["algo-1","algo-2"],"instance_groups":[{"hosts":["algo-1","algo-2"],"instance_group_name":"homogeneousCluster","instance_type":"ml.m5.large"}],"network_interface_name":"lo"}`,
		"SM_INPUT_DATA_CONFIG":            `{"test-data":{"RecordWrapperType":"None","S3DistributionType":"ShardedByS3Key","TrainingInputMode":"File"},"train":{"ContentType":"text/csv","RecordWrapperType":"None","S3DistributionType":"FullyReplicated","TrainingInputMode":"File"}}`,
		"TRAINING_JOB_NAME":               "job-1",
		"TRAINING_JOB_ARN":                "arn:aws:sagemaker:us-east-1:000000000000:training-job/job-1",
		"CURRENT_HOST":                    "algo-2",
		"SAGEMAKER_JOB_NAME":              "job-1",
		"SAGEMAKER_REGION":                "eu-west-1",
		"SAGEMAKER_BASE_DIR":              ws,
		"MASTER_ADDR":                     "127.0.0.1",
		"MASTER_PORT":                     "7777",
		"NCCL_SOCKET_IFNAME":              "lo",
		"NCCL_IB_DISABLE":                 "1",
		"NCCL_DEBUG":                      "INFO", // the job's Environment wins over the default
		"NCCL_PROTO":                      "simple",
		"SM_DLC_TORCH_VERSION":            "1.13.0",
		"PYTHONPATH":                      ws + "/code:/data/runtime/abc:/existing",
		"PYTHONUNBUFFERED":                "1",
		"MY_FLAG":                         "1",
		"AWS_ENDPOINT_URL":                "http://127.0.0.1:7070",
		"AWS_ENDPOINT_URL_S3":             "http://127.0.0.1:7070",
		"S3_ENDPOINT_URL":                 "http://127.0.0.1:7070",
		"AWS_ACCESS_KEY_ID":               "sagebox",
		"AWS_SECRET_ACCESS_KEY":           "sagebox",
		"AWS_REGION":                      "eu-west-1",
		"PATH":                            "/usr/bin",
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s = %q\n want %q", k, env[k], v)
		}
	}
	for _, k := range []string{"AWS_PROFILE", "SM_TOPOLOGY", "SM_HP__TUNING_OBJECTIVE_METRIC", "SM_HP_SAGEMAKER_PROGRAM"} {
		if v, ok := env[k]; ok {
			t.Errorf("%s should not be set (= %q)", k, v)
		}
	}

	var te map[string]any
	if err := json.Unmarshal([]byte(env["SM_TRAINING_ENV"]), &te); err != nil {
		t.Fatalf("SM_TRAINING_ENV: %v", err)
	}
	var keys []string
	for k := range te {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	wantKeys := strings.Split("additional_framework_parameters,channel_input_dirs,current_host,current_instance_group,current_instance_group_hosts,current_instance_type,distribution_hosts,distribution_instance_groups,framework_module,hosts,hyperparameters,input_config_dir,input_data_config,input_dir,instance_groups,instance_groups_dict,is_hetero,is_master,is_modelparallel_enabled,is_smddpmprun_installed,is_smddprun_installed,job_name,log_level,master_hostname,model_dir,module_dir,module_name,network_interface_name,num_cpus,num_gpus,num_neurons,output_data_dir,output_dir,output_intermediate_dir,resource_config,topology,user_entry_point", ",")
	if !reflect.DeepEqual(keys, wantKeys) {
		t.Errorf("SM_TRAINING_ENV keys =\n%v\nwant\n%v", keys, wantKeys)
	}
	if te["is_master"] != false || te["master_hostname"] != "algo-1" || te["job_name"] != "job-1" {
		t.Errorf("SM_TRAINING_ENV is_master=%v master_hostname=%v job_name=%v", te["is_master"], te["master_hostname"], te["job_name"])
	}
	if !strings.HasPrefix(env["SM_TRAINING_ENV"], `{"additional_framework_parameters":{"sagemaker_instance_type":"ml.p4d.24xlarge"`) {
		t.Errorf("SM_TRAINING_ENV is not compact sorted JSON: %.120s", env["SM_TRAINING_ENV"])
	}
}

func TestBaseEnvDropsServerSecrets(t *testing.T) {
	got := BaseEnv([]string{"PATH=/bin", "AWS_SESSION_TOKEN=x", "SM_MODEL_DIR=/x", "MASTER_PORT=1", "HOME=/h", "SAGEMAKER_PROGRAM=x",
		"SAGEBOX_CREDENTIALS=ALICE:alicesecret", "SAGEBOX_CREDENTIALS_FILE=/etc/sagebox/creds", "SAGEBOX_PYTHON=/usr/bin/python3"})
	if strings.Join(got, " ") != "PATH=/bin HOME=/h" {
		t.Errorf("baseEnv = %v", got)
	}
}

func TestCommand(t *testing.T) {
	hps := map[string]string{"epochs": "2", "name": `"a b"`, "sagemaker_program": `"train.py"`}
	tests := []struct {
		name string
		kind EntryKind
		dist string
		host int
		want string
	}{
		{"script", EntryProgram, "", 0, "/py train.py --epochs 2 --name 'a b'"},
		{"package", EntryPackage, "", 0, "/py -m train --epochs 2 --name 'a b'"},
		{"command", EntryCommand, "", 0, "/bin/sh -c './train.py --epochs 2 --name '\"'\"'a b'\"'\"''"},
		{"torchrun", EntryProgram, "sagemaker_torch_distributed_enabled", 1,
			"/py -m torch.distributed.run --nnodes 2 --nproc_per_node 1 --master_addr algo-1 --master_port 7777 --node_rank 1 --log_dir /state/torchrun --redirects 2 --tee 2 --monitor_interval 1 train.py --epochs 2 --name 'a b'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := map[string]string{}
			for k, v := range hps {
				h[k] = v
			}
			if tt.dist != "" {
				h[tt.dist] = "true"
			}
			s, err := NewSpec(newTestJob("j", h, withHosts(2)), "us-east-1")
			if err != nil {
				t.Fatal(err)
			}
			argv, passive, err := s.Command(tt.kind, "/py", Host{Index: tt.host}, NamesOwnAddress, 7777, "/state")
			if err != nil || passive {
				t.Fatalf("command: %v passive=%v", err, passive)
			}
			if got := ShellJoin(argv); got != tt.want {
				t.Errorf("argv = %s\nwant   %s", got, tt.want)
			}
		})
	}
	t.Run("launchers without names", func(t *testing.T) {
		s, _ := NewSpec(newTestJob("j", map[string]string{"sagemaker_program": `"train.py"`, "sagemaker_torch_distributed_enabled": "true"}, withHosts(2)), "")
		argv, _, err := s.Command(EntryProgram, "/py", Host{}, NamesNSSWrapper, 7777, "/s")
		if err != nil || !strings.Contains(ShellJoin(argv), "--master_addr 127.0.0.1 ") {
			t.Errorf("torchrun: %s %v", ShellJoin(argv), err)
		}
	})
	t.Run("mpirun names algo-1", func(t *testing.T) {
		if _, err := exec.LookPath("mpirun"); err != nil {
			t.Skip("no mpirun")
		}
		s, _ := NewSpec(newTestJob("j", map[string]string{"sagemaker_program": `"train.py"`, "sagemaker_mpi_enabled": "true"}, withHosts(2)), "")
		for names, want := range map[Names]string{NamesOwnAddress: "--host algo-1:2 -np 2 ", NamesNone: "--host 127.0.0.1:2 -np 2 "} {
			argv, _, err := s.Command(EntryProgram, "/py", Host{}, names, 7777, "/s")
			if err != nil || !strings.Contains(ShellJoin(argv), want) {
				t.Errorf("mpirun (names %d): %s %v", names, ShellJoin(argv), err)
			}
		}
	})
	t.Run("torchrun needs a script", func(t *testing.T) {
		s, _ := NewSpec(newTestJob("j", map[string]string{"sagemaker_program": `"run.sh"`, "sagemaker_torch_distributed_enabled": "true"}), "")
		if _, _, err := s.Command(EntryCommand, "/py", Host{}, NamesOwnAddress, 1, "/s"); err == nil || !strings.HasPrefix(reasonText(err), "ClientError: torch_distributed needs") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("mpi without mpirun", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		s, _ := NewSpec(newTestJob("j", map[string]string{"sagemaker_program": `"train.py"`, "sagemaker_mpi_enabled": "true"}), "")
		_, _, err := s.Command(EntryProgram, "/py", Host{}, NamesOwnAddress, 1, "/s")
		if err == nil || !strings.Contains(reasonText(err), "ClientError: distribution mpi runs the job with mpirun, which is not installed") {
			t.Errorf("err = %v", err)
		}
	})
}

func TestEntryKind(t *testing.T) {
	dir := t.TempDir()
	for entry, want := range map[string]EntryKind{"train.py": EntryProgram, "run.sh": EntryCommand, "train": EntryCommand} {
		if got := EntryKindOf(entry, dir); got != want {
			t.Errorf("entryKindOf(%s) = %v, want %v", entry, got, want)
		}
	}
	os.WriteFile(filepath.Join(dir, "setup.py"), nil, 0o644)
	if got := EntryKindOf("train.py", dir); got != EntryPackage {
		t.Errorf("with setup.py: %v", got)
	}
	if got := EntryKindOf("run.sh", dir); got != EntryCommand {
		t.Errorf(".sh with setup.py: %v", got)
	}
}

func TestJobGetsItsOwnKey(t *testing.T) {
	s, h, cf, p := testSpec(t)
	if env := s.Env(h, cf, p); env["AWS_ACCESS_KEY_ID"] != "sagebox" || env["AWS_SECRET_ACCESS_KEY"] != "sagebox" {
		t.Errorf("without a job key: %s/%s, want the dummy sagebox/sagebox", env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"])
	}
	p.AccessKeyID, p.SecretKey = "SAGEBOXJOB-job-1", "derived"
	if env := s.Env(h, cf, p); env["AWS_ACCESS_KEY_ID"] != "SAGEBOXJOB-job-1" || env["AWS_SECRET_ACCESS_KEY"] != "derived" {
		t.Errorf("job key: %s/%s, want SAGEBOXJOB-job-1/derived", env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"])
	}
}

// reasonText is the FailureReason a toolkit error carries, "" for others.
func reasonText(err error) string {
	r, _ := Reason(err)
	return r
}

// A distribution flag the PyTorch container does not know is refused
// with the ones it does; flags it knows, and false ones, are not.
func TestUnknownDistribution(t *testing.T) {
	for hp, bad := range map[string]bool{
		"sagemaker_parameter_server_enabled":               true,
		"sagemaker_multi_worker_mirrored_strategy_enabled": true,
		"sagemaker_torch_distributed_enabled":              false,
		"sagemaker_toolkit_native_launcher_enabled":        false,
	} {
		for _, v := range []string{"true", "false"} {
			_, err := NewSpec(newTestJob("j", map[string]string{"sagemaker_program": `"train.py"`, hp: v}, withHosts(2)), "")
			switch {
			case bad && v == "true":
				if err == nil || !strings.HasPrefix(reasonText(err), "ClientError: hyperparameter "+hp+" asks for a distribution the PyTorch container does not have; use distribution torch_distributed") {
					t.Errorf("%s=%s: err = %v", hp, v, err)
				}
			case err != nil:
				t.Errorf("%s=%s refused: %v", hp, v, err)
			}
		}
	}
}
