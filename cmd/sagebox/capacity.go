package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/sagebox/sagebox/internal/capacity"
	"github.com/sagebox/sagebox/internal/controlplane"
	"github.com/sagebox/sagebox/internal/staging"
)

// capacityOptions are the flags that size the machine's budget for
// training hosts (and, later, endpoint instances).
type capacityOptions struct {
	slots      int
	memoryMiB  int64
	hostMemory int64
}

func (c *capacityOptions) flags(f *pflag.FlagSet) {
	f.IntVar(&c.slots, "capacity-slots", 0, "how many training hosts may run at once (default 4 per CPU)")
	f.Int64Var(&c.memoryMiB, "capacity-memory", 0, "memory in MiB that running hosts may take together (default 3/4 of the machine's)")
	f.Int64Var(&c.hostMemory, "host-memory", 512, "memory in MiB one training host counts against --capacity-memory")
}

// pool builds the machine's budget and what one host takes from it.
func (c *capacityOptions) pool(gpus int) (*capacity.Pool, capacity.Resources, error) {
	slots := c.slots
	if slots == 0 {
		slots = 4 * runtime.NumCPU()
	}
	mem := c.memoryMiB
	if mem == 0 {
		total, err := memTotalMiB()
		if err != nil {
			return nil, capacity.Resources{}, fmt.Errorf("size --capacity-memory: %w", err)
		}
		mem = total * 3 / 4
	}
	if slots < 1 || mem < 1 || c.hostMemory < 1 {
		return nil, capacity.Resources{}, fmt.Errorf("--capacity-slots, --capacity-memory and --host-memory must be positive")
	}
	host := capacity.Resources{Slots: 1, MemoryMiB: c.hostMemory}
	return capacity.NewPool(capacity.Resources{Slots: slots, MemoryMiB: mem, GPUs: gpus}), host, nil
}

// maxHosts is the most hosts one job may have: what the whole budget
// holds, and never more than the API's own limit.
func maxHosts(p *capacity.Pool, host capacity.Resources) int {
	t := p.Total()
	n := t.Slots / host.Slots
	if m := int(t.MemoryMiB / host.MemoryMiB); m < n {
		n = m
	}
	return min(n, controlplane.DefaultMaxInstanceCount)
}

// memTotalMiB reads MemTotal from /proc/meminfo.
func memTotalMiB() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("MemTotal: %w", err)
			}
			return kb / 1024, nil
		}
	}
	return 0, fmt.Errorf("no MemTotal in /proc/meminfo")
}

// localPathPolicy is what file:// may name: the directories the operator
// allows; without any, every path on a loopback server (a single-user
// machine) and none on one that others reach.
func localPathPolicy(addr string, allow []string) staging.LocalPaths {
	if len(allow) > 0 {
		return staging.LocalPaths{Roots: allow}
	}
	if isLoopback(addr) {
		return staging.LocalPaths{}
	}
	return staging.LocalPaths{Deny: true, Why: "it listens on " + addr + " and --allow-local-paths names no directory"}
}
