package modelserver

import (
	"strings"
	"testing"
	"time"
)

func envFunc(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

func TestConfigFromEnv(t *testing.T) {
	tests := []struct {
		name  string
		env   map[string]string
		check func(t *testing.T, c Config)
	}{
		{"defaults", nil, func(t *testing.T, c Config) {
			if c.Program != "inference.py" || c.Workers != 0 || c.RequestTimeout != 60*time.Second ||
				c.StartupTimeout != 600*time.Second || c.BatchSize != 1 || c.MaxBatchDelay != 100*time.Millisecond ||
				c.DefaultAccept != "application/json" || c.MaxPayload != 6291456 || c.QueueSize != 100 ||
				c.IncludeTraceback || c.GPUs != -1 {
				t.Fatalf("defaults: %+v", c)
			}
		}},
		{"each variable", map[string]string{
			"SAGEMAKER_PROGRAM":                    "serve.py",
			"SAGEMAKER_MODEL_SERVER_WORKERS":       "3",
			"SAGEMAKER_MODEL_SERVER_TIMEOUT":       "20",
			"SAGEMAKER_STARTUP_TIMEOUT":            "30",
			"SAGEMAKER_TS_BATCH_SIZE":              "8",
			"SAGEMAKER_TS_MAX_BATCH_DELAY":         "5",
			"SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT": "text/csv",
			"SAGEMAKER_MAX_PAYLOAD_IN_MB":          "10",
			"SAGEBOX_QUEUE_SIZE":                   "7",
			"SAGEBOX_INCLUDE_TRACEBACK":            "true",
		}, func(t *testing.T, c Config) {
			if c.Program != "serve.py" || c.Workers != 3 || c.RequestTimeout != 20*time.Second ||
				c.StartupTimeout != 30*time.Second || c.BatchSize != 8 || c.MaxBatchDelay != 5*time.Millisecond ||
				c.DefaultAccept != "text/csv" || c.MaxPayload != 10<<20 || c.QueueSize != 7 || !c.IncludeTraceback {
				t.Fatalf("got %+v", c)
			}
		}},
		{"no pinning: batch size alone", map[string]string{
			"SAGEMAKER_TS_BATCH_SIZE":        "4",
			"SAGEMAKER_MODEL_SERVER_WORKERS": "6",
		}, func(t *testing.T, c Config) {
			if c.BatchSize != 4 || c.Workers != 6 || c.RequestTimeout != 60*time.Second || c.MaxBatchDelay != 100*time.Millisecond {
				t.Fatalf("got %+v", c)
			}
		}},
		{"TS response timeout wins", map[string]string{
			"SAGEMAKER_TS_RESPONSE_TIMEOUT":  "90",
			"SAGEMAKER_MODEL_SERVER_TIMEOUT": "20",
		}, func(t *testing.T, c Config) {
			if c.RequestTimeout != 90*time.Second {
				t.Fatalf("timeout %s", c.RequestTimeout)
			}
		}},
		{"TorchServe spellings", map[string]string{
			"TS_MAX_REQUEST_SIZE":        "1000",
			"TS_JOB_QUEUE_SIZE":          "12",
			"TS_DEFAULT_STARTUP_TIMEOUT": "45",
		}, func(t *testing.T, c Config) {
			if c.MaxPayload != 1000 || c.QueueSize != 12 || c.StartupTimeout != 45*time.Second {
				t.Fatalf("got %+v", c)
			}
		}},
		{"zero batch delay", map[string]string{"SAGEMAKER_TS_MAX_BATCH_DELAY": "0"}, func(t *testing.T, c Config) {
			if c.MaxBatchDelay != 0 {
				t.Fatalf("delay %s", c.MaxBatchDelay)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ConfigFromEnv(envFunc(tt.env))
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, c)
		})
	}
}

func TestConfigFromEnvRejects(t *testing.T) {
	tests := []struct {
		name, value, want string
	}{
		{"SAGEMAKER_MODEL_SERVER_WORKERS", "0", `SAGEMAKER_MODEL_SERVER_WORKERS="0": must be a positive integer`},
		{"SAGEMAKER_MODEL_SERVER_WORKERS", "many", "must be a positive integer"},
		{"SAGEMAKER_TS_BATCH_SIZE", "-2", `SAGEMAKER_TS_BATCH_SIZE="-2": must be a positive integer`},
		{"SAGEMAKER_TS_BATCH_SIZE", "1025", `SAGEMAKER_TS_BATCH_SIZE="1025": must be no larger than 1024`},
		{"SAGEMAKER_MODEL_SERVER_TIMEOUT", "1.5", "must be a positive whole number of seconds"},
		{"SAGEMAKER_MODEL_SERVER_TIMEOUT", "0", "must be a positive whole number of seconds"},
		{"SAGEMAKER_STARTUP_TIMEOUT", "soon", "must be a positive whole number of seconds"},
		{"SAGEMAKER_TS_MAX_BATCH_DELAY", "-1", "must be a whole number of milliseconds, 0 or more"},
		{"SAGEMAKER_MAX_PAYLOAD_IN_MB", "0", "must be a positive integer no larger than 2 GiB"},
		{"SAGEMAKER_MAX_PAYLOAD_IN_MB", "4096", "no larger than 2 GiB"},
		{"TS_MAX_REQUEST_SIZE", "6MB", "must be a positive integer"},
		{"SAGEBOX_QUEUE_SIZE", "0", "must be a positive integer"},
		{"SAGEBOX_INCLUDE_TRACEBACK", "maybe", "must be true or false"},
		{"SAGEMAKER_BIND_TO_PORT", "70000", "must be a port number"},
		{"SAGEMAKER_MULTI_MODEL", "true", "multi-model endpoints are not supported"},
	}
	for _, tt := range tests {
		t.Run(tt.name+"="+tt.value, func(t *testing.T) {
			_, err := ConfigFromEnv(envFunc(map[string]string{tt.name: tt.value}))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestPort(t *testing.T) {
	tests := []struct {
		env  string
		want int
		ok   bool
	}{
		{"", 8080, true},
		{"9000", 9000, true},
		{"0", 0, false},
		{"x", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.env, func(t *testing.T) {
			got, err := Port(envFunc(map[string]string{"SAGEMAKER_BIND_TO_PORT": tt.env}))
			if (err == nil) != tt.ok || got != tt.want {
				t.Fatalf("Port = %d, %v", got, err)
			}
		})
	}
}

func TestWorkerInheritsNoServerSecrets(t *testing.T) {
	for kv, want := range map[string]bool{
		"PATH=/usr/bin":                 true,
		"OMP_NUM_THREADS=1":             true,
		"SAGEBOX_LOG_LEVEL=DEBUG":       true, // read by the worker itself
		"SAGEBOX_WORKER_PROFILE=/tmp/p": true,
		"SAGEBOX_CREDENTIALS=A:secret":  false,
		"SAGEBOX_CREDENTIALS_FILE=/etc": false,
		"SAGEBOX_QUEUE_SIZE=7":          false,
		"PYTHONPATH=/x":                 false,
	} {
		if got := workerInherits(kv); got != want {
			t.Errorf("workerInherits(%q) = %v, want %v", kv, got, want)
		}
	}
}
