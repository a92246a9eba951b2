package e2e

import (
	"context"
	"strings"
	"testing"
	"time"
)

// The style example as a user runs it: deploy.py trains the three styles,
// deploys them as endpoints style-<name> through the SageMaker API and runs
// the router in front of them; the page, driven in real headless Chromium,
// shows each style's picture at the input's size, each different; SIGTERM
// stops the router and deletes the endpoints, configs and models.
func TestExampleStyle(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	requireTorch(t)
	requireTool(t, "/usr/bin/python3", "-c", "import PIL, boto3")
	chromiumPath(t)
	s := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	p, url := startPython(t, s.awsEnv(), "router listening on ", 3*time.Minute,
		"examples/style/deploy.py", "--endpoint-url", s.URL, "--models", t.TempDir(), "--listen", "127.0.0.1:0")
	checkRouterErrors(t, url)
	checkStylePage(ctx, t, url)
	if err := p.stop(t, 30*time.Second); err != nil {
		t.Errorf("deploy.py after SIGTERM: %v\n%s", err, p.log.String())
	}
	mustContain(t, "deploy.py output", p.log.String(), "endpoint style-sepia InService", "deleted 3 endpoints, their configs and models")
	if strings.Contains(p.log.String(), "cleanup:") {
		t.Errorf("cleanup reported errors:\n%s", p.log.String())
	}
	s.checkNoHosting(ctx, t)
}
