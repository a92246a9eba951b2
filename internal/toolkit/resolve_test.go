package toolkit

import (
	"os"
	"strings"
	"testing"
)

func TestResolveHostNamesEnv(t *testing.T) {
	env := map[string]string{"LD_PRELOAD": "libother.so"}
	if resolveHostNames(env, "", "/h") {
		t.Fatal("resolved without nss_wrapper")
	}
	if !resolveHostNames(env, "/lib/libnss_wrapper.so", "/h") {
		t.Fatal("did not resolve")
	}
	if env["LD_PRELOAD"] != "/lib/libnss_wrapper.so libother.so" || env["NSS_WRAPPER_HOSTS"] != "/h" {
		t.Errorf("env = %v", env)
	}
	dir := t.TempDir()
	p, err := WriteHostsFile(dir, []string{"algo-1", "algo-2"})
	b, _ := os.ReadFile(p)
	if err != nil || !strings.Contains(string(b), "127.0.0.1 algo-2\n") {
		t.Errorf("hosts file %q, %v", b, err)
	}
}
