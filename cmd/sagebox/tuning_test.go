package main

import (
	"strings"
	"testing"
)

func TestTuning(t *testing.T) {
	for _, tc := range []struct{ cpus, gpus, want int }{
		{2, 0, 1}, {1, 0, 1}, {16, 0, 8}, {16, 2, 0},
	} {
		if got := goProcs(tc.cpus, tc.gpus); got != tc.want {
			t.Errorf("goProcs(%d cpus, %d gpus) = %d, want %d", tc.cpus, tc.gpus, got, tc.want)
		}
	}
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	if tu, err := tuningFromEnv(env(nil)); err != nil || tu.schedBatch || tu.goMaxProcsSet {
		t.Errorf("defaults: %+v %v", tu, err)
	}
	if tu, err := tuningFromEnv(env(map[string]string{"SAGEBOX_SCHED_BATCH": "yes", "GOMAXPROCS": "3"})); err != nil || !tu.schedBatch || !tu.goMaxProcsSet {
		t.Errorf("set: %+v %v", tu, err)
	}
	if _, err := tuningFromEnv(env(map[string]string{"SAGEBOX_SCHED_BATCH": "fast"})); err == nil || !strings.Contains(err.Error(), `SAGEBOX_SCHED_BATCH="fast": must be true or false`) {
		t.Errorf("bad value: %v", err)
	}
}
