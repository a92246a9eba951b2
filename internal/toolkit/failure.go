package toolkit

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/sagebox/sagebox"
)

// Failure reasons follow what SageMaker shows:
//
//	AlgorithmError: <first 1024 characters of output/failure>
//
// where output/failure is the script's own text when it wrote one (it
// wins), else what the toolkit writes for a failed user process:
//
//	ExecuteUserScriptError:
//	ExitCode 1
//	ErrorMessage "<exception and last traceback lines from the log>"
//	Command "<argv>"
//
// Problems with the job's inputs are "ClientError: ...", pip failures
// "ClientError: InstallRequirementsError: ...", and sagebox's own trouble
// "InternalServerError: ...".

// maxFailureText is how much of output/failure becomes FailureReason.
const maxFailureText = sagebox.MaxFailureReason

// maxErrorMessage bounds the ErrorMessage part we generate, so that the
// exception survives the 1024-character cut together with the command.
const maxErrorMessage = 700

// AlgorithmError is the FailureReason for a failure file's text.
func AlgorithmError(failureText string) string {
	return "AlgorithmError: " + sagebox.TruncateRunes(strings.ToValidUTF8(failureText, "\uFFFD"), maxFailureText)
}

// ReadFailureFile returns the content of output/failure, if there is one.
// Only a regular file counts: sagebox reads it with its own privileges, so
// a symlink the script planted there (to a file the script itself cannot
// read) is not followed.
func ReadFailureFile(ws Workspace) (string, bool) {
	f, err := os.OpenFile(ws.FailureFile(), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", false
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return "", false
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return "", false
	}
	return string(b), true
}

// WriteFailureFile writes text to output/failure unless the script already
// wrote one (the toolkit's behaviour), and returns the file's content.
func WriteFailureFile(ws Workspace, text string) (string, error) {
	if own, ok := ReadFailureFile(ws); ok {
		return own, nil
	}
	f, err := os.OpenFile(ws.FailureFile(), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if errors.Is(err, fs.ErrExist) {
		if own, ok := ReadFailureFile(ws); ok {
			return own, nil
		}
		return text, nil // not a regular file: left alone, not followed
	}
	if err != nil {
		return text, fmt.Errorf("write failure file: %w", err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		return text, fmt.Errorf("write failure file: %w", err)
	}
	return text, nil
}

// ExecuteUserScriptError is the toolkit's text for a user process that
// exited non-zero. A process killed by a signal reports 128+signal, as the
// toolkit's shell did; SIGKILL gets its OutOfMemory hint.
func ExecuteUserScriptError(exitCode int, signal, errorMessage string, argv []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "ExecuteUserScriptError:\nExitCode %d\nErrorMessage \"%s\"\n", exitCode, errorMessage)
	if signal == "SIGKILL" || exitCode == 137 {
		b.WriteString("ExtraInfo \"OutOfMemory: Process killed by SIGKILL (signal 9)\"\n")
	}
	fmt.Fprintf(&b, "Command \"%s\"", ShellJoin(argv))
	return b.String()
}

// c10dNoName is torch.distributed's warning (c10d socket.cpp) for a name
// getaddrinfo says does not exist (EAI_NONAME, -2) or has no address of
// the family asked (EAI_ADDRFAMILY, -9: what a name only libnss-wrapper
// knows gives the store), which the store's client retries every second
// until its timeout.
var c10dNoName = regexp.MustCompile(`\[c10d\] The (?:IPv4|IPv6) network addresses of \(([^,()\s]+), \d+\) cannot be retrieved \(gai error: -(?:2|9) - `)

// UnresolvedHost is the host name in a torch.distributed warning that it
// cannot resolve that name, or "".
func UnresolvedHost(line string) string {
	if m := c10dNoName.FindStringSubmatch(line); m != nil {
		return m[1]
	}
	return ""
}

// UnresolvedHostError is the failure text of a host whose
// torch.distributed store could not resolve name; hosts are the job's.
func UnresolvedHostError(name string, hosts []string) string {
	known := strings.Join(hosts, ", ")
	for _, h := range hosts {
		if h == name {
			return fmt.Sprintf("HostNameError: torch.distributed cannot resolve the job's host name %q: on this machine the job's "+
				"host names resolve only through libnss-wrapper, which torch's c10d store bypasses (sagebox gives each host its "+
				"own /etc/hosts only when it runs as root; see the server's log). Use torch_distributed (torchrun), or run sagebox as root", name)
		}
	}
	return fmt.Sprintf("HostNameError: torch.distributed cannot resolve host name %q (Name or service not known) and would retry it "+
		"until its timeout; this job's hosts are %s (SM_HOSTS), its master is MASTER_ADDR=%s", name, known, hosts[0])
}

// InstallError is the FailureReason for a failed pip install.
func InstallError(kind string, err error, command []string) string {
	msg := LastLines(err.Error(), 12)
	return sagebox.TruncateRunes(fmt.Sprintf("ClientError: %s:\nExitCode 1\nErrorMessage \"%s\"\nCommand \"%s\"", kind, msg, ShellJoin(command)), maxFailureText)
}

// LastLines is the last n lines of s, trimmed.
func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// ErrorCapture remembers, from a host's log, what the failure message
// needs: the last Python traceback (preferring one whose frames are in the
// user's code), toolkit-style error lines, and the last lines. It is small
// and persisted with the tail offset, so a re-adopted job still has it.
type ErrorCapture struct {
	Tail     []string `json:"tail,omitempty"`
	Cur      []string `json:"cur,omitempty"`      // traceback being read
	CurDone  int      `json:"cur_done,omitempty"` // lines since the exception line, 0 = not yet
	CurTag   string   `json:"cur_tag,omitempty"`  // launcher tag of the traceback's lines
	Last     []string `json:"last,omitempty"`     // last complete traceback
	User     []string `json:"user,omitempty"`     // last traceback with a frame in code/
	ErrLines []string `json:"err_lines,omitempty"`
	Gloo     bool     `json:"gloo,omitempty"`
	// Unresolved is the first host name torch.distributed's store could
	// not resolve in unresolvedRepeats warnings in a row (UnresolvedHost):
	// it retries such a name every second until its timeout (30 minutes
	// by default), so the runner ends the host.
	Unresolved string `json:"unresolved,omitempty"`
	NoName     string `json:"no_name,omitempty"` // the name of the last such warnings
	NoNames    int    `json:"no_names,omitempty"`
}

// unresolvedRepeats is how many of torch.distributed's warnings that a
// name does not resolve (one a second) make it a failure.
const unresolvedRepeats = 3

const (
	captureTail     = 20
	captureTBLines  = 60
	captureErrLines = 20
	tracebackHeader = "Traceback (most recent call last):"
)

// launcherPrefix matches the tags torchrun (--tee) and mpirun
// (--tag-output) put before each line of a worker.
var launcherPrefix = regexp.MustCompile(`^\[[^\]]{1,40}\](<std\w+>)?:`)

var errorName = regexp.MustCompile(`[A-Za-z]*(Error|Exception)\b`)

// Clone is a deep copy of c.
func (c ErrorCapture) Clone() ErrorCapture {
	cp := func(s []string) []string {
		if s == nil {
			return nil
		}
		return append([]string(nil), s...)
	}
	c.Tail, c.Cur, c.Last, c.User, c.ErrLines = cp(c.Tail), cp(c.Cur), cp(c.Last), cp(c.User), cp(c.ErrLines)
	return c
}

// Add takes the next line of the log; codeDir is the host's code/
// directory, where the user's frames are.
func (c *ErrorCapture) Add(line, codeDir string) {
	tag := launcherPrefix.FindString(line)
	line = line[len(tag):]
	if c.Cur != nil && tag != c.CurTag {
		// Another process's line (torchrun's own report after a worker's
		// traceback): the worker's traceback is over.
		c.closeTraceback(codeDir)
	}
	c.Tail = appendCapped(c.Tail, line, captureTail)
	if strings.Contains(line, "terminate called after throwing an instance of 'gloo::EnforceNotMet'") {
		c.Gloo = true
	}
	if name := UnresolvedHost(line); name != "" && c.Unresolved == "" {
		if name != c.NoName {
			c.NoName, c.NoNames = name, 0
		}
		if c.NoNames++; c.NoNames >= unresolvedRepeats {
			c.Unresolved = name
		}
	}
	if len(c.ErrLines) > 0 || errorName.MatchString(line) {
		t := strings.TrimSpace(line)
		dup := false
		for _, l := range c.ErrLines {
			dup = dup || l == t
		}
		if !dup && len(c.ErrLines) < captureErrLines {
			c.ErrLines = append(c.ErrLines, t)
		}
	}
	switch {
	case strings.HasPrefix(strings.TrimSpace(line), tracebackHeader):
		c.closeTraceback(codeDir)
		c.Cur, c.CurTag = []string{tracebackHeader}, tag
	case c.Cur != nil:
		c.Cur = appendCapped(c.Cur, line, captureTBLines)
		if c.CurDone > 0 {
			c.CurDone++
		} else if line != "" && line[0] != ' ' && line[0] != '\t' {
			c.CurDone = 1 // the exception line
		}
		if c.CurDone > 5 {
			c.closeTraceback(codeDir)
		}
	}
}

func (c *ErrorCapture) closeTraceback(codeDir string) {
	if c.Cur == nil {
		return
	}
	c.Last = c.Cur
	for _, l := range c.Cur {
		if strings.HasPrefix(strings.TrimSpace(l), "File \""+codeDir) {
			c.User = c.Cur
			break
		}
	}
	c.Cur, c.CurDone, c.CurTag = nil, 0, ""
}

func appendCapped(lines []string, line string, max int) []string {
	if len(line) > 1000 {
		line = line[:1000] + "..."
	}
	lines = append(lines, line)
	if len(lines) > max {
		// Keep a traceback's header line.
		if lines[0] == tracebackHeader {
			lines = append(lines[:1], lines[len(lines)-max+1:]...)
		} else {
			lines = lines[len(lines)-max:]
		}
	}
	return lines
}

// Message builds the ErrorMessage for a failed process: the chosen
// traceback's last frame and exception, else the toolkit-style error
// lines, else the last lines of output.
func (c ErrorCapture) Message(codeDir string) string {
	c.closeTraceback(codeDir)
	tb := c.User
	if tb == nil {
		tb = c.Last
	}
	var lines []string
	switch {
	case tb != nil:
		last := 1
		for i, l := range tb {
			if strings.HasPrefix(strings.TrimSpace(l), "File \"") {
				last = i
			}
		}
		lines = append([]string{tracebackHeader}, tb[last:]...)
	case len(c.ErrLines) > 0:
		lines = c.ErrLines
	default:
		lines = c.Tail
		if len(lines) > 5 {
			lines = lines[len(lines)-5:]
		}
	}
	msg := strings.TrimRight(strings.Join(lines, "\n"), "\n")
	if n := utf8.RuneCountInString(msg); n > maxErrorMessage {
		r := []rune(msg)
		msg = "..." + string(r[n-maxErrorMessage:])
	}
	return msg
}
