package s3

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
)

// ErrAccess is what an Error matches (errors.Is) when the store refused the credentials or
// the access: a 403, or an unknown key id or a bad signature.
var ErrAccess = errors.New("access denied")

// ErrChanged is what an Error matches when a read pinned to the ETag an object was opened with
// (If-Match) was refused: the object was replaced or changed since it was opened.
var ErrChanged = errors.New("the object changed since it was opened")

// Error is a failed request to the store: the operation, the object (or bucket) it was for,
// and the store's answer. It never holds a credential: the message is the store's error code
// and message (which never echo the secret key, since it is never sent), and is scrubbed of
// the backend's secret key and session token all the same. It matches (errors.Is)
// fs.ErrNotExist for a missing object or bucket, fs.ErrExist for a refused conditional write,
// ErrChanged for a read refused because the object changed since it was opened, ErrAccess for
// refused credentials, and the context's error for a cancelled request.
type Error struct {
	Op     string // the S3 operation: HeadObject, GetObject, PutObject, ...
	URL    URL    // the object (or the bucket, with an empty Prefix)
	Status int    // the HTTP status, 0 when no response came
	Code   string // the store's error code (NoSuchKey, AccessDenied, ...), if any
	Msg    string // what went wrong, secret-free
	// Attempts is the number of tries made before giving up, where the request (or the read of
	// its body) was retried; 0 where it was not.
	Attempts int
	kind     error // fs.ErrNotExist, fs.ErrExist, ErrChanged, ErrAccess, a context error, or nil
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s: %s", e.URL, e.Op, e.Msg) }

func (e *Error) Unwrap() error { return e.kind }

// accessCodes are the error codes of refused credentials or access. Some stores answer them
// with other statuses than 403 (the test server answers an unknown key id with 404 and
// XAdminUserNotFound), so the code decides, not the status.
var accessCodes = map[string]bool{
	"AccessDenied":                true,
	"AllAccessDisabled":           true,
	"AccountProblem":              true,
	"ExpiredToken":                true,
	"InvalidAccessKeyId":          true,
	"InvalidClientTokenId":        true,
	"InvalidSecurity":             true,
	"InvalidToken":                true,
	"SignatureDoesNotMatch":       true,
	"TokenRefreshRequired":        true,
	"UnrecognizedClientException": true,
}

// regionCodes are the error codes of a request sent to, or signed for, another region than
// the bucket's.
var regionCodes = map[string]bool{
	"AuthorizationHeaderMalformed":       true, // signed for another region (with the region expected)
	"IllegalLocationConstraintException": true,
	"PermanentRedirect":                  true, // the bucket is in another region (HTTP 301)
}

// genericCode reports whether code says no more than the status: the SDK's name for a
// response without a body (a HEAD request's), or none.
func genericCode(code string) bool {
	switch code {
	case "", "NotFound", "Forbidden", "BadRequest", "MovedPermanently":
		return true
	}
	return false
}

// wrap turns an SDK error into an *Error for op on u, scrubbing secrets from its text. The
// store's error code decides what the error is; the HTTP status only where the response
// carried no code (a HEAD request's has no body: see head, which asks again with a GET).
func (b *Backend) wrap(op string, u URL, err error) error {
	if err == nil {
		return nil
	}
	e := &Error{Op: op, URL: u, Attempts: attempts(err)}
	var re *awshttp.ResponseError
	region := ""
	if errors.As(err, &re) {
		e.Status = re.HTTPStatusCode()
		if re.Response != nil {
			region = re.Response.Header.Get("X-Amz-Bucket-Region")
		}
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		e.Code = api.ErrorCode()
	}
	storeSays := func() string {
		if api == nil {
			var ma *retry.MaxAttemptsError
			if errors.As(err, &ma) {
				return ma.Err.Error() // the count goes at the end of the message
			}
			return err.Error()
		}
		if m := api.ErrorMessage(); m != "" && m != e.Code {
			return e.Code + ": " + m
		}
		return e.Code
	}
	generic := genericCode(e.Code)
	switch {
	case errors.Is(err, context.Canceled):
		e.kind, e.Msg = context.Canceled, "cancelled"
	case errors.Is(err, context.DeadlineExceeded):
		e.kind, e.Msg = context.DeadlineExceeded, "timed out"
	case e.Code == "NoSuchBucket":
		e.kind, e.Msg = fs.ErrNotExist, fmt.Sprintf("bucket %q does not exist", u.Bucket)
	case e.Code == "NoSuchKey" || e.Status == 404 && generic:
		e.kind, e.Msg = fs.ErrNotExist, "no such object"
	case e.Code == "PreconditionFailed" || e.Status == 412 && generic:
		if op == "CopyObject" || op == "UploadPartCopy" || op == "HeadObject" {
			// copies (and the HEAD of a source's first part) are pinned to the ETag the
			// source was checked with; no other HEAD is conditional
			e.kind, e.Msg = ErrChanged, "the source object was replaced or changed since it was checked (the copy, pinned to the version checked, was refused)"
		} else if op == "GetObject" {
			// reads are pinned to the ETag the object was opened (or listed) with
			e.kind, e.Msg = ErrChanged, "the object was replaced or changed since it was opened (the read, pinned to the version opened, was refused rather than mix two versions); reopen it"
		} else {
			e.kind, e.Msg = fs.ErrExist, "the object exists or changed (the conditional request was refused)"
		}
	case e.Code == "RequestTimeTooSkewed":
		e.Msg = fmt.Sprintf("the store refused the request because this machine's clock differs from the store's by too much (%s): set the clock", e.Code)
	case accessCodes[e.Code] || strings.HasSuffix(e.Code, "UserNotFound") || e.Status == 403 && generic:
		code := e.Code
		if code == "" {
			code = "Forbidden"
		}
		e.kind = ErrAccess
		e.Msg = fmt.Sprintf("access to bucket %q denied (%s): check the credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, the shared credentials file) and the bucket's permissions", u.Bucket, code)
	case regionCodes[e.Code] || e.Status == 301 && generic:
		in := "another region"
		if region != "" {
			in = fmt.Sprintf("region %q", region)
		}
		e.Msg = fmt.Sprintf("bucket %q is in %s, not the one the requests are signed for (%s): set AWS_REGION (or the profile's region) to the bucket's region", u.Bucket, in, storeSays())
	case e.Code == "SlowDown" || e.Status == 503:
		e.Msg = fmt.Sprintf("the store is overloaded and asked to slow down, and the retries ran out (%s, HTTP %d); try again later", storeSays(), e.Status)
	default:
		e.Msg = storeSays()
		if e.Status != 0 {
			e.Msg += fmt.Sprintf(" (HTTP %d)", e.Status)
		}
	}
	e.Msg = b.scrub(e.Msg) + afterAttempts(e.Attempts)
	return e
}

// head is a HEAD request for key. A HEAD response has no body, so a refused one carries no
// error code: its 404 may be a missing object, a missing bucket, or (on some stores) an
// unknown access key id; its 400 or 403 says no more. A refused HEAD is therefore asked again
// as a one-byte ranged GET of the key, whose response carries the store's code, and the
// error is the GET's. A GET that succeeds (the object appeared in between, or is empty) is
// answered by one more HEAD.
func (b *Backend) head(ctx context.Context, key string) (*awss3.HeadObjectOutput, error) {
	in := &awss3.HeadObjectInput{Bucket: aws.String(b.url.Bucket), Key: aws.String(key)}
	out, err := b.client.HeadObject(ctx, in)
	if err == nil {
		return out, nil
	}
	var re *awshttp.ResponseError
	if !errors.As(err, &re) || re.HTTPStatusCode() < 300 || re.HTTPStatusCode() >= 500 || ctx.Err() != nil {
		return nil, b.wrap("HeadObject", b.objURL(key), err)
	}
	got, gerr := b.client.GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String(b.url.Bucket), Key: aws.String(key), Range: aws.String("bytes=0-0")})
	if gerr == nil {
		got.Body.Close()
	}
	var api smithy.APIError
	if gerr == nil || errors.As(gerr, &api) && api.ErrorCode() == "InvalidRange" {
		if out, err = b.client.HeadObject(ctx, in); err == nil {
			return out, nil
		}
		return nil, b.wrap("HeadObject", b.objURL(key), err)
	}
	return nil, b.wrap("HeadObject", b.objURL(key), gerr)
}

// scrub replaces the backend's secrets in s, should a message ever carry one.
func (b *Backend) scrub(s string) string {
	for _, secret := range b.secrets {
		if len(secret) >= 8 {
			s = strings.ReplaceAll(s, secret, "[redacted]")
		}
	}
	return s
}
