package hosting

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/invoke"
)

// The same update under load through the real data plane: InvokeEndpoint
// requests to invoke's Handler over the routes hosting publishes; not one
// fails while the fleet is replaced.
func TestUpdateUnderLoadThroughInvoke(t *testing.T) {
	tbl := invoke.NewTable()
	e := newEnv(t, func(c *Config) { c.Routes = tbl })
	h, err := invoke.NewHandler(tbl, invoke.Config{Region: "us-east-1", AccountID: "000000000000"})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	srv := httptest.NewServer(h)
	defer srv.Close()
	call := func() (string, error) {
		resp, err := http.Post(srv.URL+"/endpoints/ep/invocations", "application/json", strings.NewReader("[[1,2,3]]"))
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("%d: %s", resp.StatusCode, b)
		}
		if v := resp.Header.Get("X-Amzn-Invoked-Production-Variant"); v != "AllTraffic" {
			return "", fmt.Errorf("invoked variant %q", v)
		}
		var a answer
		if err := json.Unmarshal(b, &a); err != nil {
			return "", err
		}
		return a.Version, nil
	}

	v1 := e.put("v1/model.tar.gz", tarGz(t, modelFiles("v1")))
	v2 := e.put("v2/model.tar.gz", tarGz(t, modelFiles("v2")))
	if err := e.create("ep", deployment(variant("AllTraffic", model("m1", v1), 2, 1))); err != nil {
		t.Fatal(err)
	}
	if _, err := call(); err == nil || !strings.Contains(err.Error(), "Creating") {
		t.Logf("while Creating: %v", err) // may already serve on a fast machine
	}
	e.waitStatus("ep", sagebox.EndpointInService)

	var stop atomic.Bool
	var ok, failed atomic.Int64
	var mu sync.Mutex
	versions := map[string]int{}
	var firstErr error
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				v, err := call()
				mu.Lock()
				if err != nil {
					failed.Add(1)
					if firstErr == nil {
						firstErr = err
					}
				} else {
					ok.Add(1)
					versions[v]++
				}
				mu.Unlock()
			}
		}()
	}
	waitFor(t, "traffic", func() bool { return ok.Load() > 20 })
	if err := e.update("ep", deployment(variant("AllTraffic", model("m2", v2), 2, 1))); err != nil {
		t.Fatal(err)
	}
	e.wait("ep", "generation 2", func(x *sagebox.Endpoint) bool {
		return x.EndpointStatus == sagebox.EndpointInService && x.Internal.Current.Generation == 2
	})
	waitFor(t, "old fleet gone", func() bool { return len(e.pids("ep")) == 2 })
	n := ok.Load()
	waitFor(t, "more traffic", func() bool { return ok.Load() > n+20 })
	stop.Store(true)
	wg.Wait()
	t.Logf("%d InvokeEndpoint calls answered, %d failed, by version %v", ok.Load(), failed.Load(), versions)
	if failed.Load() > 0 {
		t.Errorf("%d calls failed during the update; first: %v", failed.Load(), firstErr)
	}
	if versions["v1"] == 0 || versions["v2"] == 0 {
		t.Errorf("versions %v", versions)
	}
	if err := e.remove("ep"); err != nil {
		t.Fatal(err)
	}
	if _, err := call(); err == nil || !strings.Contains(err.Error(), "400") {
		t.Errorf("after delete: %v, want a 400", err)
	}
}
