package bodytimeout

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// server answers with the number of body bytes read, or the read error.
func server(t *testing.T, idle time.Duration, errs chan<- error) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		if errs != nil {
			errs <- err
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprint(w, n)
	}), idle))
	t.Cleanup(srv.Close)
	return srv
}

func TestStalledBodyIsCut(t *testing.T) {
	const idle = 300 * time.Millisecond
	errs := make(chan error, 1)
	srv := server(t, idle, errs)
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	fmt.Fprintf(c, "PUT /x HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n%s", strings.Repeat("x", 1000))
	select {
	case err := <-errs:
		if !errors.Is(err, ErrStalled) {
			t.Fatalf("handler read error = %v, want ErrStalled", err)
		}
		if d := time.Since(start); d < idle/2 || d > 10*idle {
			t.Errorf("cut after %s, want about %s", d, idle)
		}
	case <-time.After(20 * idle):
		t.Fatal("a stalled body was still being read after 20 idle periods")
	}
	// The server hangs up: the connection reaches EOF (after any answer).
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.Copy(io.Discard, c); err != nil {
		t.Fatalf("connection not closed by the server: %v", err)
	}
}

func TestSlowButSteadyBodyIsNotCut(t *testing.T) {
	const idle = 300 * time.Millisecond
	srv := server(t, idle, nil)
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const n = 8 // one byte every idle/2: 4 idle periods in all
	fmt.Fprintf(c, "PUT /x HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", n)
	for range n {
		time.Sleep(idle / 2)
		if _, err := c.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(b) != fmt.Sprint(n) {
		t.Fatalf("slow upload answered %d %q, want 200 %d", resp.StatusCode, b, n)
	}
}

func TestResponseAfterBodyIsNotCut(t *testing.T) {
	// A handler that works longer than idle after reading its body (and
	// reads it again at EOF later) must still answer, and its context must
	// not be cancelled.
	const idle = 200 * time.Millisecond
	srv := httptest.NewServer(Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		time.Sleep(idle / 2)
		r.Body.Read(make([]byte, 1))
		select {
		case <-time.After(3 * idle):
			io.WriteString(w, "done")
		case <-r.Context().Done():
			http.Error(w, "cancelled", http.StatusInternalServerError)
		}
	}), idle))
	defer srv.Close()
	resp, err := http.Post(srv.URL, "text/plain", strings.NewReader("body"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if string(b) != "done" {
		t.Fatalf("answer %d %q, want done", resp.StatusCode, b)
	}
}
