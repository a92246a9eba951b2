package hosting

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/invoke"
)

// endpoint is one endpoint's fleet. Its worker (run) makes every change;
// instances' own goroutines only report (ready, failed, exited) and poke
// it.
type endpoint struct {
	m    *Manager
	name string
	log  *slog.Logger
	kick chan struct{}

	mu      sync.Mutex
	insts   map[string]*instance
	serving *sagebox.Deployment // what the route is published for
	pending *sagebox.Deployment // what the endpoint moves to (for the route's Mode)
	status  string
	delWait []chan error

	failures int // replacements that failed in a row (worker only)
}

// backoff is the pause before the next replacement attempt.
func (ep *endpoint) backoff() time.Duration {
	d := ep.m.cfg.RestartBackoff << min(ep.failures, 6)
	ep.failures++
	return min(d, time.Minute)
}

func newEndpoint(m *Manager, name string) *endpoint {
	return &endpoint{m: m, name: name, log: m.log.With("endpoint", name), kick: make(chan struct{}, 1), insts: map[string]*instance{}}
}

// poke has the worker look at the endpoint again.
func (ep *endpoint) poke() {
	select {
	case ep.kick <- struct{}{}:
	default:
	}
}

func (ep *endpoint) deleteRequested() <-chan error {
	ch := make(chan error, 1)
	ep.mu.Lock()
	ep.delWait = append(ep.delWait, ch)
	ep.mu.Unlock()
	return ch
}

func (ep *endpoint) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-ep.kick:
		}
		if ep.reconcile(ctx) {
			ep.m.forget(ep)
			return
		}
	}
}

// reconcile moves the fleet towards the stored endpoint; true means the
// endpoint is gone.
func (ep *endpoint) reconcile(ctx context.Context) bool {
	e, err := ep.m.cfg.Store.Endpoint(ctx, ep.name)
	ep.mu.Lock()
	deleting := len(ep.delWait) > 0
	ep.mu.Unlock()
	switch {
	case ctx.Err() != nil:
		return false
	case err != nil && ep.m.cfg.NotFound != nil && errors.Is(err, ep.m.cfg.NotFound):
		ep.teardown(ctx)
		ep.finishDelete(nil)
		return true
	case err != nil:
		ep.log.Error("read endpoint", "error", err)
		time.AfterFunc(ep.m.cfg.RestartBackoff, ep.poke)
		return false
	case deleting || e.EndpointStatus == sagebox.EndpointDeleting:
		ep.teardown(ctx)
		if ctx.Err() != nil {
			return false
		}
		err := ep.m.cfg.Store.DeleteEndpoint(ctx, ep.name)
		if err != nil && ep.m.cfg.NotFound != nil && errors.Is(err, ep.m.cfg.NotFound) {
			err = nil
		}
		ep.finishDelete(err)
		ep.log.Info("endpoint deleted")
		return true
	case e.Internal.Pending != nil:
		ep.deploy(ctx, e)
	default:
		ep.ensure(ctx, e)
	}
	return false
}

func (ep *endpoint) finishDelete(err error) {
	ep.mu.Lock()
	ws := ep.delWait
	ep.delWait = nil
	ep.mu.Unlock()
	for _, w := range ws {
		w <- err
	}
}

// setState records what the route is for and publishes it.
func (ep *endpoint) setState(e *sagebox.Endpoint) {
	ep.mu.Lock()
	ep.serving, ep.pending, ep.status = e.Internal.Current, e.Internal.Pending, e.EndpointStatus
	ep.mu.Unlock()
	ep.publish()
}

// publish sets the route: the serving deployment's variants with their
// ready instances of the variant's fleet.
func (ep *endpoint) publish() {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	r := &invoke.Route{Status: ep.status}
	shape := ep.serving
	if shape == nil {
		shape = ep.pending
	}
	if shape != nil && len(shape.Variants) > 0 {
		m := &shape.Variants[0].Model
		if cs := m.ContainerList(); len(cs) > 1 {
			r.Mode = sagebox.InferenceModeSerial
			if m.InferenceExecutionConfig != nil && m.InferenceExecutionConfig.Mode != "" {
				r.Mode = m.InferenceExecutionConfig.Mode
			}
		}
		r.Containers = hostnames(m)
	}
	if ep.serving != nil {
		for _, v := range ep.serving.Variants {
			rv := invoke.Variant{Name: v.VariantName, Weight: v.Weight}
			key := fleetKey(&v)
			for _, in := range ep.sortedLocked() {
				if in.variant == v.VariantName && in.key == key && in.ready && !in.stopping {
					rv.Instances = append(rv.Instances, invoke.Instance{ID: in.id, Addr: "unix:" + in.sock})
				}
			}
			r.Variants = append(r.Variants, rv)
		}
	}
	ep.m.cfg.Routes.Set(ep.name, r)
}

// sortedLocked is the instances in start order. ep.mu is held.
func (ep *endpoint) sortedLocked() []*instance {
	out := make([]*instance, 0, len(ep.insts))
	for _, in := range ep.insts {
		out = append(out, in)
	}
	slices.SortFunc(out, func(a, b *instance) int { return a.started.Compare(b.started) })
	return out
}

// live is the instances of variant's fleet that are not being stopped
// (a failed one too, until the worker that awaits it stops it).
func (ep *endpoint) live(v *sagebox.DeployedVariant) []*instance {
	key := fleetKey(v)
	ep.mu.Lock()
	defer ep.mu.Unlock()
	var out []*instance
	for _, in := range ep.sortedLocked() {
		if in.variant == v.VariantName && in.key == key && !in.stopping {
			out = append(out, in)
		}
	}
	return out
}

// orphans is the live instances that belong to none of deps' fleets.
func (ep *endpoint) orphans(deps ...*sagebox.Deployment) []*instance {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	var out []*instance
	for _, in := range ep.insts {
		if in.stopping {
			continue
		}
		keep := false
		for _, d := range deps {
			if v := d.Variant(in.variant); v != nil && fleetKey(v) == in.key {
				keep = true
			}
		}
		if !keep {
			out = append(out, in)
		}
	}
	return out
}

// grow starts instances of v's fleet until it has want live ones, and
// returns the live ones (new and old).
func (ep *endpoint) grow(ctx context.Context, v *sagebox.DeployedVariant, gen, want int) ([]*instance, error) {
	have := ep.live(v)
	if len(have) >= want {
		return have[:want], nil
	}
	fl, err := ep.m.prepareFleet(ctx, ep.name, v)
	if err != nil {
		return have, err
	}
	for len(have) < want {
		in, err := ep.start(ctx, v, fl, gen)
		if err != nil {
			return have, fmt.Errorf("start an instance of production variant %s: %w", v.VariantName, err)
		}
		have = append(have, in)
	}
	return have, nil
}

// await waits until every instance is ready. It returns the first that
// failed, or interrupted when the endpoint was poked (a newer request) or
// the manager is closing.
func (ep *endpoint) await(ctx context.Context, insts []*instance) (failed *instance, interrupted bool) {
	for _, in := range insts {
		select {
		case <-in.readyCh:
		case <-in.failCh:
			return in, false
		case <-ep.kick:
			ep.poke() // run again at once
			return nil, true
		case <-ctx.Done():
			return nil, true
		}
	}
	return nil, false
}

// deploy moves the endpoint to its pending deployment: every variant's
// fleet grown to its count (a kept fleet in place, a new one started),
// then, once every instance answers /ping, the route switched and the
// instances no longer needed drained and stopped. A failure stops what
// was started and fails the pending deployment.
func (ep *endpoint) deploy(ctx context.Context, e *sagebox.Endpoint) {
	ep.setState(e)
	dep := e.Internal.Pending
	gen := dep.Generation
	var keep []*instance
	fail := func(reason string) {
		// Keep what the current deployment needs (its fleets' oldest
		// instances, back on its generation); stop the rest: new fleets
		// and what was added to kept ones.
		cur := e.Internal.Current
		var stop []*instance
		kept := map[string]int{}
		slices.SortFunc(keep, func(a, b *instance) int { return a.started.Compare(b.started) })
		for _, in := range keep {
			if cv := cur.Variant(in.variant); cv != nil && fleetKey(cv) == in.key && kept[in.variant] < cv.InstanceCount {
				if in.setGen(cur.Generation) == nil {
					kept[in.variant]++
					continue
				}
			}
			stop = append(stop, in)
		}
		ep.retire(ctx, stop, false)
		if ctx.Err() != nil {
			return
		}
		ep.log.Warn("deployment failed", "generation", gen, "reason", reason)
		e2, err := ep.m.cfg.Store.UpdateEndpoint(ctx, ep.name, func(x *sagebox.Endpoint) error {
			x.FailPending(ep.m.now(), gen, reason)
			return nil
		})
		if err == nil {
			ep.setState(e2)
		}
		ep.m.giveCredit(ep.name, ep.m.credit0(ep.name))
		ep.m.sweepModels(ep.name, e.Internal.Current)
		ep.poke()
	}
	for i := range dep.Variants {
		v := &dep.Variants[i]
		insts, err := ep.grow(ctx, v, gen, v.InstanceCount)
		keep = append(keep, insts...)
		if err != nil {
			if ctx.Err() == nil {
				fail(failureText(err))
			}
			return
		}
	}
	if bad, interrupted := ep.await(ctx, keep); interrupted {
		return
	} else if bad != nil {
		fail(bad.err.Error())
		return
	}
	// The kept instances serve gen now: recorded before the promotion, so
	// that a restart in between still finds them valid for the pending
	// generation.
	for _, in := range keep {
		if err := in.setGen(gen); err != nil {
			fail(fmt.Sprintf("record instance %s: %v", in.id, err))
			return
		}
	}
	// Traffic moves to the new fleets before the status says so, so that a
	// client that reads InService finds the route already serving.
	ep.mu.Lock()
	prevServing, prevStatus := ep.serving, ep.status
	ep.serving, ep.status = dep, sagebox.EndpointInService
	ep.mu.Unlock()
	ep.publish()
	unpublish := func() {
		ep.mu.Lock()
		ep.serving, ep.status = prevServing, prevStatus
		ep.mu.Unlock()
		ep.publish()
	}
	var promoted bool
	e2, err := ep.m.cfg.Store.UpdateEndpoint(ctx, ep.name, func(x *sagebox.Endpoint) error {
		promoted = x.Promote(ep.m.now(), gen)
		if promoted {
			x.ProductionVariants = ep.summaries(x.Internal.Current, x.ProductionVariants)
		}
		return nil
	})
	if err != nil {
		unpublish()
		if ctx.Err() == nil {
			ep.log.Error("promote deployment", "generation", gen, "error", err)
			time.AfterFunc(ep.m.cfg.RestartBackoff, ep.poke)
		}
		return
	}
	if !promoted {
		unpublish()
		ep.poke() // replaced by a newer request, or deleted
		return
	}
	ep.log.Info("endpoint in service", "generation", gen, "instances", len(keep))
	// Surplus instances of kept fleets leave the route with the old fleets.
	ep.mu.Lock()
	kept := map[*instance]bool{}
	for _, in := range keep {
		kept[in] = true
	}
	var old []*instance
	for _, in := range ep.insts {
		if !kept[in] && !in.stopping {
			in.stopping = true
			old = append(old, in)
		}
	}
	ep.mu.Unlock()
	ep.setState(e2)
	ep.m.giveCredit(ep.name, ep.m.credit0(ep.name))
	ep.retire(ctx, old, true)
	ep.m.sweepModels(ep.name, e2.Internal.Current)
}

// ensure keeps the serving deployment's fleets at their counts: instances
// that died are replaced, strays stopped.
func (ep *endpoint) ensure(ctx context.Context, e *sagebox.Endpoint) {
	ep.setState(e)
	cur := e.Internal.Current
	ep.retire(ctx, ep.orphans(cur), true)
	if cur == nil {
		return
	}
	var starting []*instance
	for i := range cur.Variants {
		v := &cur.Variants[i]
		insts, err := ep.grow(ctx, v, cur.Generation, v.InstanceCount)
		starting = append(starting, insts...)
		if err != nil {
			if ctx.Err() == nil {
				d := ep.backoff()
				ep.log.Error("replace instance", "variant", v.VariantName, "error", err, "retry_in", d)
				time.AfterFunc(d, ep.poke)
			}
			break
		}
	}
	bad, interrupted := ep.await(ctx, starting)
	if interrupted {
		return
	}
	if bad != nil {
		d := ep.backoff()
		ep.log.Error("replacement instance failed", "instance", bad.id, "error", bad.err, "retry_in", d)
		ep.retire(ctx, []*instance{bad}, false)
		time.AfterFunc(d, ep.poke)
	} else {
		ep.failures = 0
	}
	ep.storeCounts(ctx, cur.Generation)
}

// storeCounts records the serving fleet's instance counts.
func (ep *endpoint) storeCounts(ctx context.Context, gen int) {
	_, err := ep.m.cfg.Store.UpdateEndpoint(ctx, ep.name, func(x *sagebox.Endpoint) error {
		if c := x.Internal.Current; c != nil && c.Generation == gen && x.EndpointStatus == sagebox.EndpointInService {
			x.ProductionVariants = ep.summaries(c, x.ProductionVariants)
		}
		return nil
	})
	if err != nil && ctx.Err() == nil && (ep.m.cfg.NotFound == nil || !errors.Is(err, ep.m.cfg.NotFound)) {
		ep.log.Warn("record instance counts", "error", err)
	}
}

// summaries is DescribeEndpoint's ProductionVariants for dep; an image
// already in old keeps its ResolutionTime.
func (ep *endpoint) summaries(dep *sagebox.Deployment, old []sagebox.ProductionVariantSummary) []sagebox.ProductionVariantSummary {
	now := sagebox.NewTime(ep.m.now())
	resolved := map[string]*sagebox.Time{}
	for _, s := range old {
		for _, im := range s.DeployedImages {
			resolved[s.VariantName+"\x00"+im.SpecifiedImage] = im.ResolutionTime
		}
	}
	var out []sagebox.ProductionVariantSummary
	for i := range dep.Variants {
		v := &dep.Variants[i]
		n := 0
		for _, in := range ep.live(v) {
			if in.isReady() {
				n++
			}
		}
		s := sagebox.ProductionVariantSummary{
			VariantName: v.VariantName, CurrentWeight: v.Weight, DesiredWeight: v.Weight,
			CurrentInstanceCount: n, DesiredInstanceCount: v.InstanceCount,
		}
		for _, c := range v.Model.ContainerList() {
			if c.Image != "" {
				at := resolved[v.VariantName+"\x00"+c.Image]
				if at == nil {
					at = now
				}
				s.DeployedImages = append(s.DeployedImages, sagebox.DeployedImage{SpecifiedImage: c.Image, ResolvedImage: c.Image, ResolutionTime: at})
			}
		}
		out = append(out, s)
	}
	return out
}

// retire takes instances out of the route and stops them; with drain, it
// first waits until their requests in flight are answered.
func (ep *endpoint) retire(ctx context.Context, insts []*instance, drain bool) {
	if len(insts) == 0 {
		return
	}
	ep.mu.Lock()
	for _, in := range insts {
		in.stopping = true
	}
	ep.mu.Unlock()
	ep.publish()
	var wg sync.WaitGroup
	for _, in := range insts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if drain && in.isReady() {
				ep.drain(ctx, in)
			}
			ep.log.Info("stopping instance", "instance", in.id, "variant", in.variant)
			if _, err := in.h.Stop(ctx, ep.m.cfg.StopGrace); err != nil && ctx.Err() == nil {
				ep.log.Warn("stop instance", "instance", in.id, "error", err)
			}
			select {
			case <-in.gone:
				ep.mu.Lock()
				delete(ep.insts, in.id)
				ep.mu.Unlock()
			case <-ctx.Done():
			}
		}()
	}
	wg.Wait()
}

// drain waits until no request is in flight to in (bounded), then a grace.
func (ep *endpoint) drain(ctx context.Context, in *instance) {
	deadline := time.Now().Add(ep.m.cfg.DrainTimeout)
	for ep.m.cfg.Routes.Outstanding(in.id) > 0 && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
	select {
	case <-ctx.Done():
	case <-time.After(ep.m.cfg.DrainGrace):
	}
}

// teardown unpublishes the endpoint and stops every instance.
func (ep *endpoint) teardown(ctx context.Context) {
	ep.m.cfg.Routes.Delete(ep.name)
	ep.adoptDisk(ctx, nil) // any this manager has not seen (no Recover yet)
	ep.mu.Lock()
	var all []*instance
	for _, in := range ep.insts {
		all = append(all, in)
	}
	ep.status = sagebox.EndpointDeleting
	ep.mu.Unlock()
	ep.retire(ctx, all, false)
	ep.m.cfg.Routes.Delete(ep.name)
	if ctx.Err() != nil {
		return
	}
	ep.m.giveCredit(ep.name, ep.m.credit0(ep.name))
	if err := os.RemoveAll(ep.m.epDir(ep.name)); err != nil {
		ep.log.Warn("remove endpoint files", "error", err)
	}
}

// adoptAll re-adopts the instances on disk this manager does not know
// yet: those of e's current or pending fleets are kept, the rest (stale
// generations; every one when e is nil or Deleting) are taken out of
// service at once and stopped beside the caller.
func (ep *endpoint) adoptAll(ctx context.Context, e *sagebox.Endpoint) {
	stale := ep.adoptDisk(ctx, e)
	if e != nil {
		ep.setState(e)
	}
	if len(stale) == 0 {
		return
	}
	ep.m.wg.Add(1)
	go func() {
		defer ep.m.wg.Done()
		ep.retire(ep.m.ctx, stale, false)
	}()
}

// adoptDisk adopts the unknown instances on disk and returns those that
// are not valid for e, marked stopping (never published).
func (ep *endpoint) adoptDisk(ctx context.Context, e *sagebox.Endpoint) []*instance {
	dirs, _ := filepath.Glob(filepath.Join(ep.m.epDir(ep.name), "*", "*", "i-*"))
	var stale []*instance
	for _, dir := range dirs {
		if _, err := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(dir)))); err != nil {
			continue
		}
		ep.mu.Lock()
		_, known := ep.insts[filepath.Base(dir)]
		ep.mu.Unlock()
		if known {
			continue
		}
		in, err := ep.m.adopt(ctx, ep, dir)
		if err != nil {
			ep.log.Warn("instance not re-adopted", "dir", dir, "error", err)
			os.RemoveAll(dir)
			continue
		}
		if in == nil {
			continue // it had ended
		}
		valid := false
		if e != nil && e.EndpointStatus != sagebox.EndpointDeleting {
			for _, d := range []*sagebox.Deployment{e.Internal.Current, e.Internal.Pending} {
				if v := d.Variant(in.variant); v != nil && d.Generation == in.gen() && fleetKey(v) == in.key {
					valid = true
				}
			}
		}
		ep.mu.Lock()
		if !valid {
			in.stopping = true
			stale = append(stale, in)
		}
		ep.mu.Unlock()
		ep.log.Info("instance re-adopted", "instance", in.id, "variant", in.variant, "generation", in.gen(), "current", valid)
	}
	return stale
}
