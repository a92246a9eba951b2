package main

import (
	"errors"
	"fmt"
	"os/user"
	"strconv"
	"strings"

	"github.com/sagebox/sagebox/internal/training/local"
)

// parseRunAs turns --run-as USER or --run-as-uids FIRST-LAST into the
// local driver's RunAs (nil when neither is given). Both need the server
// to run as root (euid is its effective uid).
func parseRunAs(name, uids string, euid int) (*local.RunAs, error) {
	if name == "" && uids == "" {
		return nil, nil
	}
	if name != "" && uids != "" {
		return nil, errors.New("--run-as and --run-as-uids exclude each other")
	}
	if euid != 0 {
		return nil, errors.New("--run-as and --run-as-uids need the server to run as root (it starts each job as another user)")
	}
	if name != "" {
		u, err := user.Lookup(name)
		if err != nil {
			if u, err = user.LookupId(name); err != nil {
				return nil, fmt.Errorf("--run-as: %w", err)
			}
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("--run-as %s: %w", name, err)
		}
		if uid == 0 {
			return nil, fmt.Errorf("--run-as %s: that is root", name)
		}
		return &local.RunAs{UID: uint32(uid), GID: uint32(gid)}, nil
	}
	a, b, ok := strings.Cut(uids, "-")
	first, err1 := strconv.ParseUint(a, 10, 32)
	last, err2 := strconv.ParseUint(b, 10, 32)
	if !ok || err1 != nil || err2 != nil || first == 0 || last < first {
		return nil, fmt.Errorf("--run-as-uids %q: want FIRST-LAST, 0 < FIRST <= LAST", uids)
	}
	return &local.RunAs{UID: uint32(first), Count: int(last-first) + 1}, nil
}
