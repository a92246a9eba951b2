package main

import (
	"strings"
	"testing"

	"github.com/sagebox/sagebox/internal/training/local"
)

func TestParseRunAs(t *testing.T) {
	if r, err := parseRunAs("", "", 1000); r != nil || err != nil {
		t.Errorf("off by default: got %+v, %v", r, err)
	}
	for _, tt := range []struct {
		name, uids string
		euid       int
		err        string
	}{
		{"", "100-200", 1000, "need the server to run as root"},
		{"nobody", "", 1000, "need the server to run as root"},
		{"nobody", "100-200", 0, "exclude each other"},
		{"root", "", 0, "that is root"},
		{"", "0-10", 0, "want FIRST-LAST"},
		{"", "20-10", 0, "want FIRST-LAST"},
		{"", "20", 0, "want FIRST-LAST"},
		{"no-such-user-x", "", 0, "--run-as"},
	} {
		if _, err := parseRunAs(tt.name, tt.uids, tt.euid); err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("parseRunAs(%q, %q, %d) = %v, want an error with %q", tt.name, tt.uids, tt.euid, err, tt.err)
		}
	}
	if r, err := parseRunAs("", "60000-60099", 0); err != nil || *r != (local.RunAs{UID: 60000, Count: 100}) {
		t.Errorf("range: %+v, %v", r, err)
	}
	if r, err := parseRunAs("65534", "", 0); err != nil || r.UID != 65534 || r.Count != 0 {
		t.Errorf("by uid: %+v, %v", r, err)
	}
}
