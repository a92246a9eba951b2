package modelserver

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log"
	"log/slog"
	"mime/multipart"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// rawExchange writes raw to a new connection and reads n responses.
func rawExchange(t *testing.T, ts *testServer, raw string, n int) []*http.Response {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.http.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	var out []*http.Response
	for range n {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("response %d: %v", len(out)+1, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body = io.NopCloser(bytes.NewReader(body))
		out = append(out, resp)
	}
	return out
}

func bodyOf(r *http.Response) string {
	b, _ := io.ReadAll(r.Body)
	return string(b)
}

// Pipelined requests on one connection are answered in order.
func TestHTTPPipelining(t *testing.T) {
	ts := startTestServer(t, testOptions{workers: 2})
	var raw strings.Builder
	for _, b := range []string{"one", "sleep:50ms", "three"} {
		raw.WriteString("POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: ")
		raw.WriteString(strconv.Itoa(len(b)) + "\r\n\r\n" + b)
	}
	rs := rawExchange(t, ts, raw.String(), 3)
	for i, want := range []string{"one", "sleep:50ms", "three"} {
		if rs[i].StatusCode != 200 || bodyOf(rs[i]) != want {
			t.Fatalf("response %d: %d, want echo of %q", i+1, rs[i].StatusCode, want)
		}
	}
}

// HTTP/1.0 clients get an answer and the connection closes after it.
func TestHTTP10(t *testing.T) {
	ts := startTestServer(t, testOptions{})
	rs := rawExchange(t, ts, "POST /invocations HTTP/1.0\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello", 1)
	if rs[0].StatusCode != 200 || bodyOf(rs[0]) != "hello" || !rs[0].Close {
		t.Fatalf("%d close=%v", rs[0].StatusCode, rs[0].Close)
	}
}

// curl sends Expect: 100-continue for bodies over 1 KiB.
func TestHTTPExpectContinue(t *testing.T) {
	ts := startTestServer(t, testOptions{mutate: func(c *Config) { c.MaxPayload = 100 }})
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.http.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(conn)
	io.WriteString(conn, "POST /invocations HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
	line, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100") {
		t.Fatalf("interim response %q, %v", line, err)
	}
	br.ReadString('\n') // the blank line after 100 Continue
	io.WriteString(conn, "hello")
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 || bodyOf(resp) != "hello" {
		t.Fatalf("after 100-continue: %v %v", resp, err)
	}
	// Over the limit: refused before the body is sent.
	io.WriteString(conn, "POST /invocations HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 500\r\n\r\n")
	resp, err = http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 413 {
		t.Fatalf("oversize with Expect: %v %v", resp, err)
	}
}

// multipart/form-data reaches the handler byte for byte (the HTTP layer
// must not parse or consume it).
func TestMultipartBodyPassesThrough(t *testing.T) {
	ts := startTestServer(t, testOptions{})
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, _ := mw.CreateFormFile("image", "cat.png")
	fw.Write([]byte("\x89PNG fake image bytes"))
	mw.WriteField("threshold", "0.5")
	mw.Close()
	resp, err := http.Post(ts.http.URL+"/invocations", mw.FormDataContentType(), bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !bytes.Equal(got, buf.Bytes()) {
		t.Fatalf("%d: body changed on the way (%d bytes in, %d out)", resp.StatusCode, buf.Len(), len(got))
	}
	if ct := resp.Header.Get("X-Request-Content-Type"); ct != mw.FormDataContentType() {
		t.Fatalf("content type %q, want %q", ct, mw.FormDataContentType())
	}
}

// FuzzHTTP feeds arbitrary bytes to the HTTP layer of a server whose model
// is not loaded (so no worker is involved): whatever arrives, every answer
// is a well-formed HTTP response with a status the server documents, and
// the server survives.
func FuzzHTTP(f *testing.F) {
	for _, seed := range []string{
		"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}",
		"POST /invocations HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
		"POST /models/model/invoke HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\nabc",
		"DELETE /invocations HTTP/1.1\r\nHost: x\r\n\r\nGET /nope HTTP/1.0\r\n\r\n",
		"POST /invocations HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n",
		"GET /_sagebox/health HTTP/1.1\r\nHost: x\r\n\r\n",
		"\x00\x01\x02 / HTTP/9.9\r\n\r\n",
	} {
		f.Add([]byte(seed))
	}
	cfg := DefaultConfig()
	cfg.ModelDir = f.TempDir()
	cfg.MaxPayload = 1 << 10
	// No worker ever loads: invocations wait this long in the queue, then 503.
	cfg.RequestTimeout = 20 * time.Millisecond
	srv, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		f.Fatal(err)
	}
	hs := srv.HTTPServer(log.New(io.Discard, "", 0))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	go hs.Serve(ln)
	f.Cleanup(func() { hs.Shutdown(context.Background()) })
	allowed := map[int]bool{100: true, 200: true, 400: true, 404: true, 405: true, 408: true, 413: true,
		414: true, 417: true, 431: true, 500: true, 501: true, 503: true, 505: true}
	f.Fuzz(func(t *testing.T, in []byte) {
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		go func() {
			conn.Write(in)
			conn.(*net.TCPConn).CloseWrite()
		}()
		br := bufio.NewReader(conn)
		for {
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					t.Fatalf("no answer and no close within 5 s for %q", in)
				}
				break // the server closed the connection
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if !allowed[resp.StatusCode] {
				t.Fatalf("status %d for %q", resp.StatusCode, in)
			}
		}
	})
}
