package modelserver

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sagebox/sagebox/internal/proc"
	"github.com/sagebox/sagebox/internal/wire"
	"golang.org/x/sys/unix"
)

// The fake worker is this test binary re-executed (the helper-process
// pattern): TestMain runs fakeWorkerMain instead of the tests when
// FAKE_SAGEBOX_WORKER=1. It speaks the real protocol and behaves according
// to its environment and to the request bodies:
//
//	FAKE_LOAD=ok|fail|hang|exit|crash  what LOAD does (default ok)
//	FAKE_LOAD_DELAY=<duration>         sleep before answering LOAD
//	FAKE_LOAD_FAIL_UNTIL=<n>           fail LOAD until n loads were recorded
//	FAKE_STATE_DIR=<dir>               records: load-<pid>.json, batches.log
//	FAKE_DAEMON=1                      start a setsid() daemon (sleep), recorded as daemon-<pid>
//	FAKE_HOLD=0                        answer each INFER with its own write
//	                                   (default: hold answers back while the
//	                                   next INFER is buffered, as worker.py)
//
// Bodies: "crash" exits 3 (after writing "boom" to stderr), "oom" SIGKILLs
// itself, "sigterm" sends itself SIGTERM, "hang" never answers,
// "status:<code>" fails that request with <code>, "sleep:<duration>"
// delays the batch; anything else is echoed.

// TestMain also runs internal/proc's supervisor when the test binary is
// re-executed as "<binary> exec-shim ..." (Config.Supervisor of the
// tests), before looking at FAKE_SAGEBOX_WORKER: the supervisor runs with
// the worker's environment.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "exec-shim" {
		os.Exit(proc.RunSupervisor(context.Background(), os.Args[2:]))
	}
	if os.Getenv("FAKE_SAGEBOX_WORKER") == "1" {
		os.Exit(fakeWorkerMain())
	}
	os.Exit(m.Run())
}

// loadRecord is what the fake worker writes when it gets LOAD.
type loadRecord struct {
	PID        int       `json:"pid"`
	Load       wire.Load `json:"load"`
	Cwd        string    `json:"cwd"`
	PythonPath string    `json:"pythonpath"`
	Args       []string  `json:"args"`
	// Secret is SAGEBOX_CREDENTIALS as the worker sees it (must be "").
	Secret string `json:"secret"`
}

func fakeWorkerMain() int {
	var sock string
	for i, a := range os.Args {
		if a == "--socket" && i+1 < len(os.Args) {
			sock = os.Args[i+1]
		}
	}
	state := os.Getenv("FAKE_STATE_DIR")
	mode := os.Getenv("FAKE_LOAD")
	if mode == "exit" {
		fmt.Fprintln(os.Stderr, "ImportError: No module named 'inference'")
		return 1
	}
	conn, err := net.Dial("unix", sock)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake worker: dial:", err)
		return 2
	}
	hello, _ := wire.AppendJSON(nil, wire.TypeHello, wire.Hello{Version: wire.Version, PID: os.Getpid(), Python: "fake"})
	conn.Write(hello)
	br := bufio.NewReader(conn)
	rd := wire.NewReader(br, 64<<20)
	p, err := rd.ReadFrameOf(wire.TypeLoad, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake worker: read LOAD:", err)
		return 2
	}
	var load wire.Load
	if err := wire.DecodeJSON(wire.TypeLoad, p, &load); err != nil {
		return 2
	}
	if os.Getenv("FAKE_DAEMON") == "1" {
		// A daemon of the handler's: a session of its own, no pipes to us.
		d := exec.Command("sleep", "100")
		d.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := d.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "fake worker: daemon:", err)
			return 2
		}
		os.WriteFile(filepath.Join(state, fmt.Sprintf("daemon-%d", d.Process.Pid)), nil, 0o644)
	}
	cwd, _ := os.Getwd()
	rec, _ := json.Marshal(loadRecord{PID: os.Getpid(), Load: load, Cwd: cwd, PythonPath: os.Getenv("PYTHONPATH"), Args: os.Args[1:],
		Secret: os.Getenv("SAGEBOX_CREDENTIALS")})
	if state != "" {
		os.WriteFile(filepath.Join(state, fmt.Sprintf("load-%d.json", os.Getpid())), rec, 0o644)
	}
	fmt.Println("fake worker loading", load.WorkerID)
	if d, err := time.ParseDuration(os.Getenv("FAKE_LOAD_DELAY")); err == nil {
		time.Sleep(d)
	}
	if n, err := strconv.Atoi(os.Getenv("FAKE_LOAD_FAIL_UNTIL")); err == nil {
		matches, _ := filepath.Glob(filepath.Join(state, "load-*.json"))
		if len(matches) < n {
			mode = "fail"
		}
	}
	switch mode {
	case "hang":
		select {}
	case "crash":
		fmt.Fprintln(os.Stderr, "Segmentation fault in model_fn")
		return 4
	case "fail":
		b, _ := wire.AppendJSON(nil, wire.TypeLoaded, wire.Loaded{OK: false, Error: &wire.ErrorInfo{
			Type: "FileNotFoundError", Message: "model.pt not found", Traceback: "Traceback (most recent call last):\nFileNotFoundError: model.pt not found\n"}})
		conn.Write(b)
		time.Sleep(time.Hour) // the front end kills us
		return 0
	}
	b, _ := wire.AppendJSON(nil, wire.TypeLoaded, wire.Loaded{OK: true, BatchAware: true})
	conn.Write(b)

	// Like the real worker: record progress in the page and hold answers
	// back while the next INFER is already buffered (FAKE_HOLD=0: never).
	var page []byte
	if load.Progress != "" {
		if f, err := os.OpenFile(load.Progress, os.O_RDWR, 0); err == nil {
			page, _ = unix.Mmap(int(f.Fd()), 0, 16, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
			f.Close()
		}
	}
	mark := func(id uint64, running bool) {
		if page == nil {
			return
		}
		var t int64
		if running {
			t = monotonicNow()
		}
		binary.LittleEndian.PutUint64(page[0:8], id)
		binary.LittleEndian.PutUint64(page[8:16], uint64(t))
	}
	nextBuffered := func() bool {
		h, err := br.Peek(br.Buffered())
		return err == nil && len(h) >= wire.HeaderSize && len(h) >= 4+int(binary.BigEndian.Uint32(h))
	}
	hold := page != nil && os.Getenv("FAKE_HOLD") != "0"
	var pending []byte

	var reqs []wire.Request
	for {
		p, err := rd.ReadFrameOf(wire.TypeInfer, nil)
		if err != nil {
			return 0 // EOF: asked to stop
		}
		reqs, err = wire.DecodeInfer(p, reqs)
		if err != nil {
			fmt.Fprintln(os.Stderr, "fake worker:", err)
			return 2
		}
		if state != "" {
			f, _ := os.OpenFile(filepath.Join(state, "batches.log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
			fmt.Fprintf(f, "%d\n", len(reqs))
			f.Close()
		}
		start := time.Now()
		mark(reqs[0].ID, true)
		res := wire.Result{}
		for _, r := range reqs {
			body := string(r.Body)
			switch {
			case body == "crash":
				fmt.Fprintln(os.Stderr, "boom")
				os.Exit(3)
			case body == "oom":
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {}
			case body == "sigterm":
				// (SIGSEGV would be caught by the Go runtime and turned
				// into exit code 2; SIGTERM is not.)
				syscall.Kill(os.Getpid(), syscall.SIGTERM)
				select {}
			case body == "hang":
				select {}
			case strings.HasPrefix(body, "wait:"):
				// Runs until the file named after the colon exists.
				for _, err := os.Stat(strings.TrimPrefix(body, "wait:")); err != nil; _, err = os.Stat(strings.TrimPrefix(body, "wait:")) {
					time.Sleep(2 * time.Millisecond)
				}
			case strings.HasPrefix(body, "sleep:"):
				d, _ := time.ParseDuration(strings.TrimPrefix(body, "sleep:"))
				time.Sleep(d)
			}
			if code, ok := strings.CutPrefix(body, "status:"); ok {
				n, _ := strconv.Atoi(code)
				res.Responses = append(res.Responses, wire.Response{ID: r.ID, Status: uint16(n),
					ErrorType: "TestError", ErrorMessage: "forced " + code, Traceback: "Traceback (most recent call last):\nTestError: forced " + code + "\n"})
				continue
			}
			hdrs := []wire.Header{
				{Name: "X-Batch-Size", Value: strconv.Itoa(len(reqs))},
				{Name: "X-Worker-Pid", Value: strconv.Itoa(os.Getpid())},
				{Name: "X-Worker-Id", Value: strconv.Itoa(load.WorkerID)},
				{Name: "X-Request-Content-Type", Value: r.ContentType},
				{Name: "X-Request-Accept", Value: r.Accept},
				{Name: "Content-Length", Value: "999"}, // must be ignored
			}
			for _, h := range r.Headers {
				if strings.EqualFold(h.Name, "X-Amzn-SageMaker-Custom-Attributes") {
					hdrs = append(hdrs, wire.Header{Name: "X-Amzn-SageMaker-Custom-Attributes", Value: "echo:" + h.Value})
				}
			}
			ct := r.Accept
			if ct == "" {
				ct = load.DefaultAccept
			}
			res.Responses = append(res.Responses, wire.Response{ID: r.ID, Status: 200, ContentType: ct, Headers: hdrs, Body: r.Body})
		}
		res.HandlerNanos = uint64(time.Since(start))
		mark(reqs[0].ID, false)
		pending = wire.AppendResult(pending, &res)
		if hold && nextBuffered() {
			continue
		}
		if _, err := conn.Write(pending); err != nil {
			return 0
		}
		pending = pending[:0]
	}
}
