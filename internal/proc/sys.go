package proc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// procStat is what /proc/<pid>/stat says about a process.
type procStat struct {
	state byte
	ppid  int
	pgid  int
	start uint64 // field 22: start time in clock ticks since boot
}

func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	// pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return procStat{}, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(s[i+2:])
	// f[0] is field 3 (state); field n is f[n-3].
	if len(f) < 20 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	st := procStat{state: f[0][0]}
	st.ppid, _ = strconv.Atoi(f[1])
	st.pgid, _ = strconv.Atoi(f[2])
	st.start, err = strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return procStat{}, fmt.Errorf("/proc/%d/stat: start time: %w", pid, err)
	}
	return st, nil
}

// startTime is the start time of pid, or 0 when it is gone.
func startTime(pid int) uint64 {
	st, err := readStat(pid)
	if err != nil {
		return 0
	}
	return st.start
}

// StartTime is the start time of process pid, in clock ticks since boot
// (field 22 of /proc/<pid>/stat), or 0 when there is no such process.
// Together with the pid it names one process for as long as the machine
// runs: see Running.
func StartTime(pid int) uint64 { return startTime(pid) }

// Running reports whether process pid is still the one that started at
// start (StartTime), and not a zombie. A pid now used by another program
// is not running.
func Running(pid int, start uint64) bool { return identity{PID: pid, Start: start}.alive() }

// identity is a pid together with the start time that makes it unique.
type identity struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start_ticks"`
}

// alive reports whether the process id names is still the one recorded
// (same pid and start time) and not a zombie.
func (id identity) alive() bool {
	if id.PID <= 0 || id.Start == 0 {
		return false
	}
	st, err := readStat(id.PID)
	return err == nil && st.start == id.Start && st.state != 'Z'
}

// children lists the processes whose parent is pid.
func children(pid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := readStat(p); err == nil && st.ppid == pid {
			out = append(out, p)
		}
	}
	return out
}

// groupAlive reports whether any process is in group pgid.
func groupAlive(pgid int) bool {
	if pgid <= 0 {
		return false
	}
	err := syscall.Kill(-pgid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// oomKills returns the OOM-kill count of this process's memory cgroup
// (cgroup v2 memory.events or v1 memory.oom_control), or -1 when unknown.
func oomKills() int64 {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return -1
	}
	var candidates []string
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			candidates = append(candidates, filepath.Join("/sys/fs/cgroup", parts[2], "memory.events"))
		case strings.Contains(","+parts[1]+",", ",memory,"):
			candidates = append(candidates, filepath.Join("/sys/fs/cgroup/memory", parts[2], "memory.oom_control"))
		}
	}
	for _, path := range candidates {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
				if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
					return n
				}
			}
		}
	}
	return -1
}

// signalName is "SIGKILL" for SIGKILL, and so on.
func signalName(s syscall.Signal) string {
	if n := unixSignalName(s); n != "" {
		return n
	}
	return "signal " + strconv.Itoa(int(s))
}
