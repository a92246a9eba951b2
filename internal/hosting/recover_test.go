package hosting

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/capacity"
)

// A restarted server (a new Manager over the same data directory; the
// instances run on, detached) brings every endpoint back: healthy
// instances of the current generation are re-adopted without a restart,
// one of a stale generation is stopped and never published, and an
// interrupted delete finishes.
func TestRestartReadoptsAndStopsStaleInstances(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	v1 := e.put("v1/model.tar.gz", tarGz(t, modelFiles("v1")))
	v2 := e.put("v2/model.tar.gz", tarGz(t, modelFiles("v2")))
	for _, name := range []string{"keep", "stale", "gone"} {
		if err := e.create(name, deployment(variant("AllTraffic", model("m1", v1), 2, 1))); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"keep", "stale", "gone"} {
		e.waitStatus(name, sagebox.EndpointInService)
	}
	keepPids, stalePids, gonePids := e.pids("keep"), e.pids("stale"), e.pids("gone")
	// "late" is still Creating when the server goes away.
	if err := e.create("late", deployment(variant("AllTraffic", model("m1", v1), 1, 1))); err != nil {
		t.Fatal(err)
	}
	e.m.Close() // the server goes away; its instances keep running
	if ep, _ := e.db.Endpoint(ctx, "late"); ep.EndpointStatus != sagebox.EndpointCreating {
		t.Fatalf("late is %s already", ep.EndpointStatus)
	}
	// One of keep's instances dies while the server is away.
	var dead string
	for id, pid := range keepPids {
		dead = id
		syscall.Kill(pid, syscall.SIGKILL)
		break
	}
	waitFor(t, "the killed instance gone", func() bool { return !alive(keepPids[dead]) })
	delete(keepPids, dead)

	for _, pid := range keepPids {
		if !alive(pid) {
			t.Fatal("an instance ended with the manager")
		}
	}
	// While it was away, "stale" moved on to v2 (as if the server died
	// after promoting an update, before the old fleet stopped) and
	// "gone" was being deleted.
	if _, err := e.db.UpdateEndpoint(ctx, "stale", func(x *sagebox.Endpoint) error {
		dep := deployment(variant("AllTraffic", model("m2", v2), 1, 1))
		if err := x.BeginUpdate(time.Now(), dep); err != nil {
			return err
		}
		x.Promote(time.Now(), dep.Generation)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.UpdateEndpoint(ctx, "gone", func(x *sagebox.Endpoint) error { return x.BeginDelete(time.Now()) }); err != nil {
		t.Fatal(err)
	}

	// Neither the route table nor the capacity pool survives a restart.
	e.routes = newFakeRoutes()
	e.pool = capacity.NewPool(e.pool.Total())
	e.m = e.manager()
	start := time.Now()
	if err := e.m.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "keep's surviving instance in the route", func() bool { return len(e.routes.instances("keep")) >= 1 })
	t.Logf("keep back in the route %s after Recover", time.Since(start))
	waitFor(t, "keep's dead instance replaced", func() bool { return len(e.routes.instances("keep")) == 2 })
	for _, in := range e.routes.instances("keep") {
		if in.ID == dead {
			t.Error("the dead instance is in the route")
		}
	}
	after := e.pids("keep")
	for id, pid := range keepPids {
		if after[id] != pid {
			t.Errorf("healthy instance %s was restarted (pid %d → %d)", id, pid, after[id])
		}
	}
	if a, err := e.routes.invoke("keep", 0); err != nil || a.Version != "v1" {
		t.Errorf("keep: %+v %v", a, err)
	}

	waitFor(t, "stale's v2 instance serves", func() bool { return len(e.routes.instances("stale")) == 1 })
	if a, err := e.routes.invoke("stale", 0); err != nil || a.Version != "v2" {
		t.Errorf("stale: %+v %v", a, err)
	}
	e.routes.mu.Lock()
	for id := range stalePids {
		if e.routes.seen[id] {
			t.Errorf("stale-generation instance %s was published", id)
		}
	}
	e.routes.mu.Unlock()
	waitFor(t, "stale instances stopped", func() bool {
		for _, pid := range stalePids {
			if alive(pid) {
				return false
			}
		}
		return true
	})
	if ep := e.waitStatus("stale", sagebox.EndpointInService); ep.ProductionVariants[0].CurrentInstanceCount != 1 {
		t.Errorf("stale's ProductionVariants = %+v", ep.ProductionVariants)
	}

	waitFor(t, "gone deleted", func() bool {
		_, err := e.db.Endpoint(ctx, "gone")
		return err != nil
	})
	waitFor(t, "gone's instances stopped", func() bool {
		for _, pid := range gonePids {
			if alive(pid) {
				return false
			}
		}
		return true
	})
	late := e.waitStatus("late", sagebox.EndpointInService)
	if late.ProductionVariants[0].CurrentInstanceCount != 1 {
		t.Errorf("late's ProductionVariants = %+v", late.ProductionVariants)
	}
	if a, err := e.routes.invoke("late", 0); err != nil || a.Version != "v1" {
		t.Errorf("late: %+v %v", a, err)
	}
	if got := e.pool.Holds("endpoint/keep").Slots + e.pool.Holds("endpoint/stale").Slots + e.pool.Holds("endpoint/late").Slots; got != 4 {
		t.Errorf("capacity after recovery: %d slots, want 4", got)
	}
}
