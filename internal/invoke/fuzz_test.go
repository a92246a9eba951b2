package invoke

import (
	"net/http"
	"strings"
	"testing"
)

// FuzzParseRequest: any path and header values give an endpoint name and
// a request, or an AWS-style ValidationError; never a panic, and a valid
// name with plain headers is always accepted.
func FuzzParseRequest(f *testing.F) {
	f.Add("/endpoints/ep/invocations", "application/x-npy", "trace=1", "AllTraffic", "c1", "id-1")
	f.Add("/endpoints//invocations", "", "", "", "", "")
	f.Add("/endpoints/a/b/invocations", "\xff", strings.Repeat("x", 1025), "bad_name", "-", " ")
	f.Add("/endpoints/a-b--c/invocations", "text/csv", "", "v-1", "", strings.Repeat("é", 64))
	f.Fuzz(func(t *testing.T, path, ct, ca, variant, container, id string) {
		name, ok := EndpointName(path)
		if !ok {
			if strings.HasPrefix(path, "/endpoints/") && strings.HasSuffix(path, "/invocations") {
				mid := strings.TrimSuffix(strings.TrimPrefix(path, "/endpoints/"), "/invocations")
				if mid != "" && !strings.Contains(mid, "/") && len(path) > len("/endpoints//invocations") {
					t.Fatalf("%q refused", path)
				}
			}
			return
		}
		if "/endpoints/"+name+"/invocations" != path {
			t.Fatalf("%q → name %q", path, name)
		}
		h := http.Header{}
		h["Content-Type"] = []string{ct}
		h[HeaderCustomAttributes] = []string{ca}
		h[HeaderTargetVariant] = []string{variant}
		h[HeaderTargetContainer] = []string{container}
		h[HeaderInferenceID] = []string{id}
		req, e := parseRequest(name, h)
		if e != nil {
			if e.code != CodeValidation || e.status != http.StatusBadRequest || !strings.Contains(e.msg, "validation error") {
				t.Fatalf("error %+v", e)
			}
			return
		}
		if req.endpoint != name || req.contentType != ct || req.customAttrs != ca || req.targetVariant != variant ||
			req.targetContainer != container || req.inferenceID != id {
			t.Fatalf("parsed %+v", req)
		}
		if !validName(name, 63) {
			t.Fatalf("invalid name %q accepted", name)
		}
	})
}

// FuzzPickVariant: the weighted pick only ever returns a variant with a
// weight above zero and an instance.
func FuzzPickVariant(f *testing.F) {
	f.Add(1.0, 0.0, 3.0, 0.5)
	f.Add(0.0, 0.0, 0.0, 0.99)
	f.Fuzz(func(t *testing.T, w1, w2, w3, u float64) {
		if u < 0 || u >= 1 || u != u {
			return
		}
		tab := NewTable()
		var vs []Variant
		for i, w := range []float64{w1, w2, w3} {
			if w != w || w > 1e300 {
				return
			}
			vs = append(vs, Variant{Name: string(rune('a' + i)), Weight: w, Instances: []Instance{{ID: string(rune('a' + i)), Addr: "unix:/x"}}})
		}
		tab.Set("ep", &Route{Status: "InService", Variants: vs})
		_, rt := tab.lookup("EP")
		v := rt.pickVariant(u)
		if v == nil {
			if w1 > 0 || w2 > 0 || w3 > 0 {
				t.Fatalf("weights %v %v %v: nothing picked", w1, w2, w3)
			}
			return
		}
		if v.weight <= 0 {
			t.Fatalf("picked %s of weight %v", v.name, v.weight)
		}
	})
}
