package s3

// Stalls. A connection to the store that makes no progress (no byte read or written) for the
// stall timeout is cut: each Read and each Write of at most stallChunk bytes on it must make
// progress within the timeout, or it fails with a StallError. The request it belongs to then
// fails as after a reset, and is retried (the SDK's retryer for requests, bodyRetry for the
// bodies read), with the count of attempts in the error once they are spent.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
)

// DefaultStallTimeout is the stall timeout of a backend whose Options set none.
const DefaultStallTimeout = 60 * time.Second

// stallChunk is the most bytes one write on a connection is given the stall timeout for: a
// large part is written in these steps, each of which must make progress in time.
const stallChunk = 64 << 10

// StallError is the error of a read or write on a connection to the store that made no
// progress for the stall timeout. It is a connection error (retried as a reset is).
type StallError struct {
	Op      string // "read" or "write"
	Timeout time.Duration
}

func (e *StallError) Error() string {
	return fmt.Sprintf("the connection to the store stalled: no byte could be %s for %v (PACKER_S3_STALL_TIMEOUT)", map[string]string{"read": "read", "write": "written"}[e.Op], e.Timeout)
}

// ConnectionError marks the error as one the SDK's retryer retries.
func (e *StallError) ConnectionError() bool { return true }

// Temporary and the net.Error methods: a stall is a timeout, worth another try.
func (e *StallError) Temporary() bool { return true }

type stallNetError struct{ *StallError }

func (e stallNetError) Timeout() bool { return true }

// stallConn is a connection whose reads and writes fail with a StallError when they make no
// progress for d.
type stallConn struct {
	net.Conn
	d time.Duration
}

func (c *stallConn) Read(p []byte) (int, error) {
	c.Conn.SetReadDeadline(time.Now().Add(c.d))
	n, err := c.Conn.Read(p)
	return n, c.stalled("read", err)
}

func (c *stallConn) Write(p []byte) (int, error) {
	var done int
	for len(p) > 0 {
		k := min(len(p), stallChunk)
		c.Conn.SetWriteDeadline(time.Now().Add(c.d))
		n, err := c.Conn.Write(p[:k])
		done += n
		if err != nil {
			return done, c.stalled("write", err)
		}
		// The answer is not due before the request is written: a read waiting on the
		// connection (the transport's, from before the request) gets the timeout afresh.
		c.Conn.SetReadDeadline(time.Now().Add(c.d))
		p = p[k:]
	}
	return done, nil
}

func (c *stallConn) stalled(op string, err error) error {
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		return stallNetError{&StallError{Op: op, Timeout: c.d}}
	}
	return err
}

// idleConns is the most idle connections to the store a backend keeps for reuse. The SDK's
// default keeps 10, fewer than a build has requests in flight (16 objects fetched ahead of the
// decoders, plus the decoders' own, the parts of uploads and their checks): every request
// beyond that would open a connection and close it after one use.
const idleConns = 64

// stallClient is the HTTP client of a backend with the stall timeout d: the SDK's default
// client whose connections are stallConns, and which keeps up to idleConns of them for reuse.
func stallClient(d time.Duration) *awshttp.BuildableClient {
	return awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		tr.MaxIdleConns = max(tr.MaxIdleConns, idleConns)
		tr.MaxIdleConnsPerHost = idleConns
		dial := tr.DialContext
		if dial == nil {
			dial = (&net.Dialer{}).DialContext
		}
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &stallConn{Conn: c, d: d}, nil
		}
	})
}
