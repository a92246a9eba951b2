package hosting

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/capacity"
)

// UpdateEndpoint to a new model under steady load: the new fleet comes
// up, traffic moves, the old fleet drains and stops; no request fails.
func TestUpdateUnderLoadDropsNothing(t *testing.T) {
	e := newEnv(t, nil)
	v1 := e.put("v1/model.tar.gz", tarGz(t, modelFiles("v1")))
	v2 := e.put("v2/model.tar.gz", tarGz(t, modelFiles("v2")))
	if err := e.create("ep", deployment(variant("AllTraffic", model("m1", v1), 2, 1))); err != nil {
		t.Fatal(err)
	}
	e.waitStatus("ep", sagebox.EndpointInService)
	oldPids := e.pids("ep")

	var stop atomic.Bool
	var ok, failed atomic.Int64
	var mu sync.Mutex
	versions := map[string]int{}
	var firstErr error
	var wg sync.WaitGroup
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := w; !stop.Load(); n++ {
				a, err := e.routes.invoke("ep", n)
				mu.Lock()
				if err != nil {
					failed.Add(1)
					if firstErr == nil {
						firstErr = err
					}
				} else {
					ok.Add(1)
					versions[a.Version]++
				}
				mu.Unlock()
			}
		}()
	}
	waitFor(t, "traffic on v1", func() bool { return ok.Load() > 20 })
	if err := e.update("ep", deployment(variant("AllTraffic", model("m2", v2), 2, 1))); err != nil {
		t.Fatal(err)
	}
	e.wait("ep", "InService on generation 2", func(x *sagebox.Endpoint) bool {
		return x.EndpointStatus == sagebox.EndpointInService && x.Internal.Current.Generation == 2
	})
	waitFor(t, "old fleet stopped", func() bool {
		for _, pid := range oldPids {
			if alive(pid) {
				return false
			}
		}
		return true
	})
	n := ok.Load()
	waitFor(t, "more traffic on v2", func() bool { return ok.Load() > n+20 })
	stop.Store(true)
	wg.Wait()
	t.Logf("%d requests answered, %d failed, by version %v", ok.Load(), failed.Load(), versions)
	if failed.Load() > 0 {
		t.Errorf("%d requests failed during the update; first: %v", failed.Load(), firstErr)
	}
	if versions["v1"] == 0 || versions["v2"] == 0 {
		t.Errorf("versions answered: %v", versions)
	}
	if a, err := e.routes.invoke("ep", 0); err != nil || a.Version != "v2" {
		t.Errorf("after the update: %+v %v", a, err)
	}
	if got := e.pool.Holds("endpoint/ep"); got.Slots != 2 {
		t.Errorf("endpoint holds %v after the update, want 2 slots", got)
	}
}

// UpdateEndpointWeightsAndCapacities: the same model keeps its instances;
// counts change in place.
func TestCountsChangeInPlace(t *testing.T) {
	e := newEnv(t, nil)
	v1 := e.put("v1/model.tar.gz", tarGz(t, modelFiles("v1")))
	m1 := model("m1", v1)
	if err := e.create("ep", deployment(variant("AllTraffic", m1, 2, 1))); err != nil {
		t.Fatal(err)
	}
	e.waitStatus("ep", sagebox.EndpointInService)
	before := e.pids("ep")
	if err := e.update("ep", deployment(variant("AllTraffic", m1, 3, 0.5))); err != nil {
		t.Fatal(err)
	}
	ep := e.wait("ep", "3 instances", func(x *sagebox.Endpoint) bool {
		return x.EndpointStatus == sagebox.EndpointInService && x.Internal.Current.Generation == 2
	})
	if pv := ep.ProductionVariants[0]; pv.CurrentInstanceCount != 3 || pv.CurrentWeight != 0.5 {
		t.Errorf("ProductionVariants = %+v", ep.ProductionVariants)
	}
	after := e.pids("ep")
	for id, pid := range before {
		if after[id] != pid {
			t.Errorf("instance %s was restarted (pid %d → %d)", id, pid, after[id])
		}
	}
	if len(after) != 3 || len(e.routes.instances("ep")) != 3 || e.routes.get("ep").Variants[0].Weight != 0.5 {
		t.Fatalf("after scaling up: pids %v route %+v", after, e.routes.get("ep"))
	}
	// Scaling down drains: an instance with a request in flight keeps
	// running (out of the route) until it is answered.
	e.routes.mu.Lock()
	for id := range after {
		e.routes.pending[id]++
	}
	e.routes.mu.Unlock()
	if err := e.update("ep", deployment(variant("AllTraffic", m1, 1, 1))); err != nil {
		t.Fatal(err)
	}
	e.wait("ep", "generation 3", func(x *sagebox.Endpoint) bool {
		return x.EndpointStatus == sagebox.EndpointInService && x.Internal.Current.Generation == 3
	})
	waitFor(t, "surplus out of the route", func() bool { return len(e.routes.instances("ep")) == 1 })
	time.Sleep(2 * time.Second)
	for id, pid := range after {
		if !alive(pid) {
			t.Errorf("instance %s stopped with a request in flight", id)
		}
	}
	e.routes.mu.Lock()
	for id := range after {
		e.routes.pending[id]--
	}
	e.routes.mu.Unlock()
	waitFor(t, "two instances stopped", func() bool { return len(e.pids("ep")) == 1 && len(e.routes.instances("ep")) == 1 })
	if a, err := e.routes.invoke("ep", 0); err != nil || a.Version != "v1" {
		t.Errorf("invoke: %+v %v", a, err)
	}
	waitFor(t, "capacity follows", func() bool { return e.pool.Holds("endpoint/ep").Slots == 1 })
}

// An update whose model fails to load leaves the endpoint InService on
// the old fleet with FailureReason.
func TestBrokenUpdateKeepsTheOldFleet(t *testing.T) {
	e := newEnv(t, nil)
	v1 := e.put("v1/model.tar.gz", tarGz(t, modelFiles("v1")))
	files := modelFiles("v2")
	files["fail.txt"] = "v2 cannot load: missing layer fc9"
	v2 := e.put("v2/model.tar.gz", tarGz(t, files))
	if err := e.create("ep", deployment(variant("AllTraffic", model("m1", v1), 1, 1))); err != nil {
		t.Fatal(err)
	}
	e.waitStatus("ep", sagebox.EndpointInService)
	before := e.pids("ep")
	if err := e.update("ep", deployment(variant("AllTraffic", model("m2", v2), 1, 1))); err != nil {
		t.Fatal(err)
	}
	ep := e.wait("ep", "the update failed", func(x *sagebox.Endpoint) bool { return x.FailureReason != "" })
	if ep.EndpointStatus != sagebox.EndpointInService || ep.Internal.Current.Generation != 1 || ep.Internal.Pending != nil ||
		!strings.Contains(ep.FailureReason, "v2 cannot load: missing layer fc9") {
		t.Errorf("after a broken update: %s %q current %+v", ep.EndpointStatus, ep.FailureReason, ep.Internal.Current)
	}
	waitFor(t, "the broken fleet stopped", func() bool { return len(e.pids("ep")) == 1 })
	after := e.pids("ep")
	for id, pid := range before {
		if after[id] != pid {
			t.Errorf("old instance %s restarted", id)
		}
	}
	if a, err := e.routes.invoke("ep", 0); err != nil || a.Version != "v1" {
		t.Errorf("invoke: %+v %v", a, err)
	}
	waitFor(t, "capacity of the broken fleet released", func() bool { return e.pool.Holds("endpoint/ep").Slots == 1 })
}

// CreateEndpoint or UpdateEndpoint beyond the capacity is refused naming
// the limit and what uses it.
func TestCapacityRefusal(t *testing.T) {
	e := newEnv(t, nil)
	e.pool = capacity.NewPool(capacity.Resources{Slots: 3, MemoryMiB: 100})
	e.m.Close()
	e.m = e.manager()
	e.pool.Claim("training-job/train1", capacity.Resources{Slots: 1, MemoryMiB: 1})
	v1 := e.put("v1/model.tar.gz", tarGz(t, modelFiles("v1")))
	if err := e.create("ep", deployment(variant("AllTraffic", model("m1", v1), 2, 1))); err != nil {
		t.Fatal(err)
	}
	e.waitStatus("ep", sagebox.EndpointInService)
	ctx := context.Background()
	_, err := e.m.Reserve(ctx, "other", deployment(variant("AllTraffic", model("m1", v1), 1, 1)))
	var se *sagebox.Error
	if !errors.As(err, &se) || se.Code != sagebox.ErrResourceLimit || !strings.Contains(se.Message, "endpoint/ep") || !strings.Contains(se.Message, "training-job/train1") {
		t.Fatalf("second endpoint: %v", err)
	}
	t.Log(se.Message)
	_, err = e.m.Reserve(ctx, "huge", deployment(variant("AllTraffic", model("m1", v1), 5, 1)))
	if !errors.As(err, &se) || se.Code != sagebox.ErrResourceLimit || !strings.Contains(se.Message, "the machine has 3") {
		t.Fatalf("too large: %v", err)
	}
	// A new model for ep needs a second fleet beside the first.
	if err := e.update("ep", deployment(variant("AllTraffic", model("m2", v1), 2, 1))); !errors.As(err, &se) || se.Code != sagebox.ErrResourceLimit {
		t.Fatalf("update: %v", err)
	}
	// The same model in place needs nothing more.
	release, err := e.m.Reserve(ctx, "ep", deployment(variant("AllTraffic", model("m1", v1), 2, 3)))
	if err != nil {
		t.Fatal(err)
	}
	release()
	// A refused or released reservation leaves the capacity as it was.
	if got := e.pool.Used().Slots; got != 3 {
		t.Errorf("used %d slots, want 3", got)
	}
}

// An update that changes one variant's model keeps the other variant's
// instances and replaces only the changed one's.
func TestUpdateReplacesOnlyChangedVariants(t *testing.T) {
	e := newEnv(t, nil)
	v1 := e.put("v1/model.tar.gz", tarGz(t, modelFiles("v1")))
	v2 := e.put("v2/model.tar.gz", tarGz(t, modelFiles("v2")))
	m1 := model("m1", v1)
	if err := e.create("ep", deployment(variant("A", m1, 1, 1), variant("B", m1, 1, 1))); err != nil {
		t.Fatal(err)
	}
	e.waitStatus("ep", sagebox.EndpointInService)
	ids := func() map[string]string { // variant → instance
		out := map[string]string{}
		for _, v := range e.routes.get("ep").Variants {
			for _, in := range v.Instances {
				out[v.Name] = in.ID
			}
		}
		return out
	}
	before := ids()
	if err := e.update("ep", deployment(variant("A", m1, 1, 3), variant("B", model("m2", v2), 1, 1))); err != nil {
		t.Fatal(err)
	}
	ep := e.wait("ep", "generation 2", func(x *sagebox.Endpoint) bool {
		return x.EndpointStatus == sagebox.EndpointInService && x.Internal.Current.Generation == 2
	})
	after := ids()
	if after["A"] != before["A"] || after["B"] == before["B"] || after["B"] == "" {
		t.Errorf("instances before %v, after %v: want A kept, B replaced", before, after)
	}
	r := e.routes.get("ep")
	if r.Variants[0].Name != "A" || r.Variants[0].Weight != 3 || r.Variants[1].Weight != 1 {
		t.Errorf("route variants %+v", r.Variants)
	}
	if len(ep.ProductionVariants) != 2 || ep.ProductionVariants[0].CurrentWeight != 3 {
		t.Errorf("ProductionVariants %+v", ep.ProductionVariants)
	}
	for _, v := range r.Variants {
		a, dialErr, err := post(v.Instances[0].Addr)
		want := map[string]string{"A": "v1", "B": "v2"}[v.Name]
		if err != nil || dialErr || a.Version != want {
			t.Errorf("variant %s answers %+v %v, want %s", v.Name, a, err, want)
		}
	}
}

// A failed update that also grew a kept fleet goes back to the current
// counts: the added instance stops, the original keeps serving.
func TestFailedUpdateShrinksKeptFleetBack(t *testing.T) {
	e := newEnv(t, nil)
	v1 := e.put("v1/model.tar.gz", tarGz(t, modelFiles("v1")))
	files := modelFiles("bad")
	files["fail.txt"] = "broken on purpose"
	bad := e.put("bad/model.tar.gz", tarGz(t, files))
	m1 := model("m1", v1)
	if err := e.create("ep", deployment(variant("A", m1, 1, 1))); err != nil {
		t.Fatal(err)
	}
	e.waitStatus("ep", sagebox.EndpointInService)
	before := e.pids("ep")
	if err := e.update("ep", deployment(variant("A", m1, 2, 1), variant("B", model("bad", bad), 1, 1))); err != nil {
		t.Fatal(err)
	}
	ep := e.wait("ep", "the update failed", func(x *sagebox.Endpoint) bool { return x.FailureReason != "" })
	if ep.EndpointStatus != sagebox.EndpointInService || !strings.Contains(ep.FailureReason, "broken on purpose") || !strings.Contains(ep.FailureReason, "variant B") {
		t.Errorf("%s %q", ep.EndpointStatus, ep.FailureReason)
	}
	waitFor(t, "back to one instance", func() bool { return len(e.pids("ep")) == 1 })
	after := e.pids("ep")
	for id, pid := range before {
		if after[id] != pid {
			t.Errorf("original instance %s not kept: %v → %v", id, before, after)
		}
	}
	if r := e.routes.get("ep"); len(r.Variants) != 1 || len(r.Variants[0].Instances) != 1 {
		t.Errorf("route %+v", r)
	}
	waitFor(t, "capacity back to one instance", func() bool { return e.pool.Holds("endpoint/ep").Slots == 1 })
}
