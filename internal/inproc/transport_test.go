package inproc

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestTransportStreams proves bodies are not buffered: the client reads the
// first chunk while the handler is still blocked before writing the second.
func TestTransportStreams(t *testing.T) {
	gate := make(chan struct{})
	handlerDone := make(chan error, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/a b/c" || r.URL.RawQuery != "x=1" || r.Host != "dirhub.local" || r.RequestURI != "/a%20b/c?x=1" {
			t.Errorf("server request: path %q query %q host %q uri %q", r.URL.Path, r.URL.RawQuery, r.Host, r.RequestURI)
		}
		w.Header().Set("X-Test", "1")
		w.Write([]byte("first"))
		<-gate
		_, err := w.Write([]byte("second"))
		handlerDone <- err
	})
	client := &http.Client{Transport: Transport(h)}
	resp, err := client.Get("http://dirhub.local/a%20b/c?x=1")
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("X-Test") != "1" || resp.ContentLength != -1 {
		t.Errorf("response %d %v len %d", resp.StatusCode, resp.Header, resp.ContentLength)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != "first" {
		t.Fatalf("first chunk: %q %v", buf, err)
	}
	close(gate)
	rest, err := io.ReadAll(resp.Body)
	if err != nil || string(rest) != "second" {
		t.Errorf("rest: %q %v", rest, err)
	}
	resp.Body.Close()
	if err := <-handlerDone; err != nil {
		t.Errorf("handler write: %v", err)
	}
}

func TestTransportContentLengthAndHEAD(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "10")
		if r.Method == http.MethodHead {
			return
		}
		body, _ := io.ReadAll(r.Body)
		w.Write(body[:min(len(body), 4)]) // short of the declared 10
	})
	client := &http.Client{Transport: Transport(h)}
	resp, err := client.Head("http://x/f")
	if err != nil || resp.ContentLength != 10 || resp.Body != http.NoBody {
		t.Fatalf("HEAD: %v, len %d", err, resp.ContentLength)
	}
	resp, err = client.Post("http://x/f", "text/plain", strings.NewReader("abcdefg"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(got) != "abcd" || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("short body: %q, %v; want io.ErrUnexpectedEOF", got, err)
	}
}

// TestTransportCancelAndClose checks that the handler's writes fail once the
// client closes the body or its context ends, so no goroutine is stranded.
func TestTransportCancelAndClose(t *testing.T) {
	wrote := make(chan error, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusPartialContent)
		var err error
		for err == nil {
			_, err = w.Write(make([]byte, 1024))
		}
		wrote <- err
	})
	client := &http.Client{Transport: Transport(h)}

	resp, err := client.Get("http://x/f")
	if err != nil || resp.StatusCode != 206 {
		t.Fatalf("%v %v", resp, err)
	}
	resp.Body.Close()
	if err := <-wrote; err == nil {
		t.Error("handler writes succeed after Close")
	}

	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://x/f", nil)
	resp, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.ReadFull(resp.Body, make([]byte, 10))
	cancel()
	if err := <-wrote; err == nil {
		t.Error("handler writes succeed after the context ended")
	}
	if _, err := io.ReadAll(resp.Body); !errors.Is(err, context.Canceled) {
		t.Errorf("read after cancel: %v", err)
	}
	resp.Body.Close()

	// A context already done, and one ending before the header is written.
	if _, err := client.Do(req); !errors.Is(err, context.Canceled) {
		t.Errorf("done context: %v", err)
	}
	started, block := make(chan struct{}), make(chan struct{})
	slow := &http.Client{Transport: Transport(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-r.Context().Done()
		close(block)
	}))}
	ctx2, cancel2 := context.WithCancel(context.Background())
	req2, _ := http.NewRequestWithContext(ctx2, "GET", "http://x/f", nil)
	errc := make(chan error, 1)
	go func() { _, err := slow.Do(req2); errc <- err }()
	<-started
	cancel2()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("cancel before header: %v", err)
	}
	<-block
}

func TestTransportPanicBecomes500(t *testing.T) {
	client := &http.Client{Transport: Transport(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }))}
	resp, err := client.Get("http://x/")
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 500 || err == nil {
		t.Errorf("panic: %d, body error %v", resp.StatusCode, err)
	}
}
