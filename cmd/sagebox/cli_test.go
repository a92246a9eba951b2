package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

func TestDefaultJobName(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 8, 1, 128e6, time.UTC)
	cases := map[string]string{
		"train.py":                      "train-2026-12-02-10-08-01-128",
		"src/my_train.v2.py":            "my-train-v2-2026-12-02-10-08-01-128",
		"___.py":                        "sagebox-2026-12-02-10-08-01-128",
		strings.Repeat("a", 80) + ".py": strings.Repeat("a", 39) + "-2026-12-02-10-08-01-128",
	}
	for entry, want := range cases {
		if got := defaultJobName(entry, now); got != want {
			t.Errorf("defaultJobName(%q) = %q, want %q", entry, got, want)
		}
		if got := defaultJobName(entry, now); len(got) > 63 {
			t.Errorf("%q is longer than SageMaker's 63 characters", got)
		}
	}
}

func TestEncodeHyperparameterLikeTheSDK(t *testing.T) {
	cases := map[string]string{
		"10":        "10",
		"0.001":     "0.001",
		"true":      "true",
		"adam":      `"adam"`,
		"two words": `"two words"`,
		"[64, 32]":  "[64,32]",
		`"quoted"`:  `"quoted"`,
		"":          `""`,
	}
	for in, want := range cases {
		if got := encodeHyperparameter(in); got != want {
			t.Errorf("encodeHyperparameter(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseCredentials(t *testing.T) {
	got, err := parseCredentials([]string{"AK1:s1"}, "AK2:s2, AK3:s:3", nil)
	if err != nil || len(got) != 3 || got["AK3"] != "s:3" {
		t.Fatalf("parseCredentials = %v, %v", got, err)
	}
	for _, bad := range []string{"nocolon", ":secret", "key:"} {
		if _, err := parseCredentials([]string{bad}, "", nil); err == nil {
			t.Errorf("parseCredentials(%q) accepted a malformed pair", bad)
		}
	}
}

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:7070": true, "localhost:1": true, "[::1]:80": true, "127.1.2.3:9": true,
		"0.0.0.0:7070": false, ":7070": false, "10.0.0.1:80": false, "garbage": false,
	} {
		if got := isLoopback(addr); got != want {
			t.Errorf("isLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
}

func TestCLIErrors(t *testing.T) {
	env := func(string) string { return "" }
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"server", "--addr", "0.0.0.0:0", "--data-dir", t.TempDir()}, env, nil, &out, &errOut)
	if code == 0 || !strings.Contains(errOut.String(), "without credentials") {
		t.Errorf("non-loopback server without credentials: exit %d, %s", code, errOut.String())
	}
	errOut.Reset()
	code = run(context.Background(), []string{"jobs", "ls", "--endpoint", "http://127.0.0.1:1"}, env, nil, &out, &errOut)
	if code == 0 || !strings.Contains(errOut.String(), "no sagebox server at http://127.0.0.1:1") {
		t.Errorf("unreachable server: exit %d, %s", code, errOut.String())
	}
	errOut.Reset()
	code = run(context.Background(), []string{"train", "missing.py", "--endpoint", "http://127.0.0.1:1"}, env, nil, &out, &errOut)
	if code == 0 || !strings.Contains(errOut.String(), "missing.py") {
		t.Errorf("missing entry point: exit %d, %s", code, errOut.String())
	}
}
