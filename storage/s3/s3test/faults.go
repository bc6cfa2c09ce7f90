package s3test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Fault is a fault the proxy injects into one exchange.
type Fault int

const (
	None        Fault = iota
	Status500         // 500 InternalError, without reaching the server
	SlowDown          // 503 SlowDown, without reaching the server
	Stall             // no answer, and the request's body not read, for StallFor (then the connection is cut)
	DropBody          // the server's response, its connection dropped halfway through the body
	LongLength        // the server's response announcing a Content-Length longer than its body
	ShortLength       // the server's response announcing a Content-Length shorter than its body
	StallBody         // the server's response, stopping halfway through the body for StallFor (then cut)
	LostAnswer        // the request carried out by the server, its answer replaced by a 500 InternalError (one lost on its way back)
)

func (f Fault) String() string {
	return [...]string{"none", "500", "503 SlowDown", "stalled before the answer", "dropped mid-body", "Content-Length too long", "Content-Length too short", "stalled mid-body", "answer lost"}[f]
}

// Stalls is a plan that stalls about a third of all requests once (no answer; a GET with a
// body: halfway through it) and faults no request twice: a client that cuts a stalled
// connection and tries again gets every answer right.
func Stalls(r *http.Request, n, body int) Fault {
	h := fnv.New32a()
	io.WriteString(h, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery+" "+r.Header.Get("Range"))
	k := h.Sum32()
	switch {
	case n > 0 || k%3 != 0:
		return None
	case objectGet(r) && body == 0 && k>>2%2 == 0:
		return StallBody
	}
	return Stall
}

// FaultPlan decides the fault of a request: n is how many times the same request (method,
// path, query and Range) came before, body how many body faults its object has had.
type FaultPlan func(r *http.Request, n, body int) Fault

// Bursts is a plan that faults about half of all requests, each at most twice (a burst of 500
// and 503 answers, or one body fault on a GET with a body), and every object's body at most once:
// a client that retries each request at least three times, and asks again for the rest of a
// body cut short, gets every answer right.
func Bursts(r *http.Request, n, body int) Fault {
	h := fnv.New32a()
	io.WriteString(h, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery+" "+r.Header.Get("Range"))
	k := h.Sum32()
	switch {
	case k%2 == 0:
		return None
	case objectGet(r) && body == 0 && n == 0 && k>>1%4 != 0:
		return []Fault{DropBody, LongLength, ShortLength}[k>>3%3]
	case n < 2:
		return []Fault{Status500, SlowDown}[(k>>1+uint32(n))%2]
	}
	return None
}

// objectGet reports whether r is a GetObject request (a GET with a body to cut: not a listing).
func objectGet(r *http.Request) bool {
	q := r.URL.Query()
	return r.Method == http.MethodGet && (len(q) == 0 || q.Get("x-id") == "GetObject")
}

// Always is a plan that gives every request matching method the fault f.
func Always(method string, f Fault) FaultPlan {
	return func(r *http.Request, _, _ int) Fault {
		if r.Method == method {
			return f
		}
		return None
	}
}

// FaultProxy is an HTTP proxy between a client and the test server that injects faults by
// its plan. Point AWS_ENDPOINT_URL (or a client's endpoint) at Endpoint.
type FaultProxy struct {
	Endpoint string
	// StallFor is how long a Stall or StallBody fault holds the exchange before the proxy cuts
	// the connection, unless the client gives up first (default 10 s). Set it before the
	// first request.
	StallFor time.Duration

	mu       sync.Mutex
	plan     FaultPlan
	seen     map[string]int
	bodies   map[string]int
	injected map[Fault]int
}

// StartFaultProxy starts a proxy to s with the plan, stopped when the test ends.
func StartFaultProxy(t testing.TB, s *Server, plan FaultPlan) *FaultProxy {
	t.Helper()
	target, err := url.Parse(s.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	p := &FaultProxy{plan: plan, seen: map[string]int{}, bodies: map[string]int{}, injected: map[Fault]int{}}
	rp := &httputil.ReverseProxy{
		// Each write reaches the client at once: a body cut halfway arrives halfway.
		FlushInterval: -1,
		// The request goes on with the Host it was signed for (the proxy's).
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = target.Scheme, target.Host
			pr.Out.Host = pr.In.Host
		},
		ModifyResponse: func(resp *http.Response) error {
			switch resp.Request.Context().Value(faultKey{}) {
			case DropBody:
				resp.Body = &cutBody{r: resp.Body, left: resp.ContentLength / 2}
			case StallBody:
				resp.Body = &cutBody{r: resp.Body, left: resp.ContentLength / 2, hold: p.stallFor(), ctx: resp.Request.Context()}
			case LongLength:
				if resp.ContentLength < 0 {
					break
				}
				resp.ContentLength += 100
				resp.Header.Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
			case LostAnswer:
				resp.Body.Close()
				body := errorDoc("InternalError", "We encountered an internal error. Please try again.")
				resp.StatusCode, resp.Status = http.StatusInternalServerError, "500 Internal Server Error"
				resp.Body, resp.ContentLength = io.NopCloser(strings.NewReader(body)), int64(len(body))
				resp.Header = http.Header{"Content-Type": {"application/xml"}, "Content-Length": {strconv.Itoa(len(body))}}
			case ShortLength:
				if resp.ContentLength > 1 {
					resp.ContentLength /= 2
					resp.Header.Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
				}
			}
			return nil
		},
		ErrorLog: quiet,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f := p.decide(r)
		switch f {
		case Status500:
			s3Error(w, http.StatusInternalServerError, "InternalError", "We encountered an internal error. Please try again.")
			return
		case SlowDown:
			s3Error(w, http.StatusServiceUnavailable, "SlowDown", "Please reduce your request rate.")
			return
		case Stall:
			t := time.NewTimer(p.stallFor())
			defer t.Stop()
			select {
			case <-r.Context().Done():
			case <-t.C:
			}
			panic(http.ErrAbortHandler) // cut the connection, unanswered
		}
		rp.ServeHTTP(w, r.WithContext(contextWith(r, f)))
	}))
	// A proxied response whose body is cut aborts its connection: keep the log quiet.
	srv.Config.ErrorLog = quiet
	p.Endpoint = srv.URL
	t.Cleanup(srv.Close)
	return p
}

func (p *FaultProxy) decide(r *http.Request) Fault {
	key := r.Method + " " + r.URL.Path + "?" + r.URL.RawQuery + " " + r.Header.Get("Range")
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.seen[key]
	p.seen[key]++
	f := p.plan(r, n, p.bodies[r.URL.Path])
	body := f >= DropBody && f <= StallBody
	if body && r.Method == http.MethodHead {
		f, body = None, false // a HEAD answer has no body to cut
	}
	if body {
		p.bodies[r.URL.Path]++
	}
	if f != None {
		p.injected[f]++
	}
	return f
}

// SetPlan replaces the proxy's plan.
func (p *FaultProxy) SetPlan(plan FaultPlan) {
	p.mu.Lock()
	p.plan = plan
	p.mu.Unlock()
}

// Injected is how many faults of each kind the proxy injected.
func (p *FaultProxy) Injected() map[Fault]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := make(map[Fault]int, len(p.injected))
	for k, v := range p.injected {
		m[k] = v
	}
	return m
}

// Summary describes Injected in words, for a test's log.
func (p *FaultProxy) Summary() string {
	var parts []string
	inj := p.Injected()
	for f := Status500; f <= LostAnswer; f++ {
		parts = append(parts, fmt.Sprintf("%s: %d", f, inj[f]))
	}
	return strings.Join(parts, ", ")
}

type faultKey struct{}

var quiet = log.New(io.Discard, "", 0)

func contextWith(r *http.Request, f Fault) context.Context {
	return context.WithValue(r.Context(), faultKey{}, f)
}

// errorDoc is an S3 error document.
func errorDoc(code, msg string) string {
	return fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s</Message><RequestId>fault-proxy</RequestId></Error>`, code, msg)
}

// s3Error answers with an S3 error document.
func s3Error(w http.ResponseWriter, status int, code, msg string) {
	body := errorDoc(code, msg)
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	io.WriteString(w, body)
}

func (p *FaultProxy) stallFor() time.Duration {
	if p.StallFor > 0 {
		return p.StallFor
	}
	return 10 * time.Second
}

// cutBody reads left bytes of r, then (after holding for hold, or until ctx is done, where hold
// is set) fails: the proxy then aborts the connection.
type cutBody struct {
	r    io.ReadCloser
	left int64
	hold time.Duration
	ctx  context.Context
}

var errCut = errors.New("fault proxy: body cut")

func (c *cutBody) Read(p []byte) (int, error) {
	if c.left <= 0 {
		if c.hold > 0 {
			t := time.NewTimer(c.hold)
			defer t.Stop()
			select {
			case <-c.ctx.Done():
			case <-t.C:
			}
		}
		return 0, errCut
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

func (c *cutBody) Close() error { return c.r.Close() }
