package s3

// Retries. A request the store answers with a 5xx (500, 502, 503, 504), a throttle code
// (SlowDown), or that fails on the connection (a reset, a connection closed before the
// response) is sent again by the SDK's standard retryer, configured here: at most maxAttempts
// tries, with an exponential, jittered backoff between them (retryBackoff), and no client-side
// retry quota (a burst of faults on many parallel requests retries each of them, rather than
// failing the ones that find the quota spent). A response body cut short (the connection
// dropped mid-body, or a body shorter than its Content-Length) is past the SDK's retries: the
// reads here ask again for the bytes still missing (bodyRetry), with the same bound and
// backoff, pinned to the object's ETag. An error after the last try says how many were made.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
)

// maxAttempts bounds the tries of one request, and of one read of a response body.
const maxAttempts = 5

// backoffBase and backoffMax shape the delay before try n+1: a random duration between half
// and all of backoffBase·2^(n-1), at most backoffMax (0.1-0.2 s, 0.2-0.4 s, 0.4-0.8 s,
// 0.8-1.6 s for the four retries of maxAttempts = 5).
const (
	backoffBase = 200 * time.Millisecond
	backoffMax  = 5 * time.Second
)

// retryBackoff is the retryer's backoff (retry.BackoffDelayer) and bodyRetry's.
type retryBackoff struct{}

func (retryBackoff) BackoffDelay(attempt int, _ error) (time.Duration, error) {
	d := backoffBase << min(attempt-1, 16)
	if d > backoffMax || d <= 0 {
		d = backoffMax
	}
	return d/2 + rand.N(d/2+1), nil
}

// newRetryer is the retryer of the backend's clients (New).
func newRetryer() aws.Retryer {
	return retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = maxAttempts
		o.MaxBackoff = backoffMax
		o.Backoff = retryBackoff{}
		o.RateLimiter = ratelimit.None
	})
}

// errShortBody is a response body that ended before its Content-Length, or before the bytes
// asked for.
var errShortBody = errors.New("the store sent fewer bytes than it announced (the connection was cut, or the body was shorter than its Content-Length)")

// transientBody reports whether err, from reading a response body, is worth asking again:
// the body cut short, or the connection reset or timed out.
func transientBody(err error) bool {
	if errors.Is(err, errShortBody) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// bodyRetry runs try, a request and the read of its body, until it succeeds, fails otherwise
// than transiently in its body (inBody: the request itself succeeded; its own retries are the
// SDK's), or has run maxAttempts times; it waits retryBackoff between tries. The last try's
// error is returned, after maxAttempts tries as a retry.MaxAttemptsError (the count).
func bodyRetry(ctx context.Context, try func() (inBody bool, err error)) error {
	for attempt := 1; ; attempt++ {
		inBody, err := try()
		if err == nil || !inBody || !transientBody(err) || ctx.Err() != nil {
			return err
		}
		if attempt == maxAttempts {
			return &retry.MaxAttemptsError{Attempt: attempt, Err: err}
		}
		d, _ := retryBackoff{}.BackoffDelay(attempt, err)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// attempts is the number of tries an error reports it took (its retry.MaxAttemptsError), or 0.
func attempts(err error) int {
	var ma *retry.MaxAttemptsError
	if errors.As(err, &ma) {
		return ma.Attempt
	}
	return 0
}

// afterAttempts is the suffix of an error message that gave up after n tries.
func afterAttempts(n int) string {
	if n <= 1 {
		return ""
	}
	return fmt.Sprintf("; gave up after %d attempts", n)
}
