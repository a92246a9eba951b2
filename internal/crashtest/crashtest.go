// Package crashtest runs a test's own binary as a child that writes and
// acknowledges, and kills it with SIGKILL mid-stream: the helper-process
// pattern of os/exec's tests, for checking that acknowledged writes survive
// a crash of the process.
package crashtest

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// Ack is what a child prints after its n-th write has returned.
func Ack(n int) string { return "ack " + strconv.Itoa(n) }

// KillAfter starts the current test binary running only the test named
// child, with env added to its environment, reads its stdout until it has
// acknowledged want writes (lines made by Ack), SIGKILLs it, and returns the
// last count it acknowledged. The test fails if the child stops first.
func KillAfter(t *testing.T, child string, env []string, want int) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+child+"$")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := 0
	scan := bufio.NewScanner(out)
	for acked < want && scan.Scan() {
		if n, ok := strings.CutPrefix(scan.Text(), "ack "); ok {
			acked, _ = strconv.Atoi(n)
		} else {
			t.Logf("child: %s", scan.Text())
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if acked < want {
		t.Fatalf("child acknowledged only %d writes; stderr: %s", acked, stderr.String())
	}
	return acked
}
