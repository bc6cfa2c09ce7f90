package s3

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
)

// ErrAccess is what an Error matches (errors.Is) when the store refused the credentials or
// the access: a 403, or an unknown key id or a bad signature.
var ErrAccess = errors.New("access denied")

// Error is a failed request to the store: the operation, the object (or bucket) it was for,
// and the store's answer. It never holds a credential: the message is the store's error code
// and message (which never echo the secret key, since it is never sent), and is scrubbed of
// the backend's secret key and session token all the same. It matches (errors.Is)
// fs.ErrNotExist for a missing object or bucket, fs.ErrExist for a refused conditional write,
// ErrAccess for refused credentials, and the context's error for a cancelled request.
type Error struct {
	Op     string // the S3 operation: HeadObject, GetObject, PutObject, ...
	URL    URL    // the object (or the bucket, with an empty Prefix)
	Status int    // the HTTP status, 0 when no response came
	Code   string // the store's error code (NoSuchKey, AccessDenied, ...), if any
	Msg    string // what went wrong, secret-free
	kind   error  // fs.ErrNotExist, fs.ErrExist, ErrAccess, a context error, or nil
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s: %s", e.URL, e.Op, e.Msg) }

func (e *Error) Unwrap() error { return e.kind }

// wrap turns an SDK error into an *Error for op on u, scrubbing secrets from its text.
func (b *Backend) wrap(op string, u URL, err error) error {
	if err == nil {
		return nil
	}
	e := &Error{Op: op, URL: u}
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		e.Status = re.HTTPStatusCode()
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		e.Code = api.ErrorCode()
	}
	switch {
	case errors.Is(err, context.Canceled):
		e.kind, e.Msg = context.Canceled, "cancelled"
	case errors.Is(err, context.DeadlineExceeded):
		e.kind, e.Msg = context.DeadlineExceeded, "timed out"
	case e.Code == "NoSuchBucket":
		e.kind, e.Msg = fs.ErrNotExist, fmt.Sprintf("bucket %q does not exist", u.Bucket)
	case e.Code == "NoSuchKey" || e.Code == "NotFound" || e.Status == 404 && e.Code != "NoSuchUpload":
		e.kind, e.Msg = fs.ErrNotExist, "no such object"
	case e.Code == "PreconditionFailed" || e.Status == 412:
		e.kind, e.Msg = fs.ErrExist, "the object exists or changed (the conditional request was refused)"
	case e.Status == 403 || e.Code == "AccessDenied" || e.Code == "InvalidAccessKeyId" || e.Code == "SignatureDoesNotMatch":
		code := e.Code
		if code == "" {
			code = "Forbidden"
		}
		e.kind = ErrAccess
		e.Msg = fmt.Sprintf("access to bucket %q denied (%s): check the credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, the shared credentials file) and the bucket's permissions", u.Bucket, code)
	default:
		if api != nil {
			e.Msg = api.ErrorCode() + ": " + api.ErrorMessage()
		} else {
			e.Msg = err.Error()
		}
		if e.Status != 0 {
			e.Msg += fmt.Sprintf(" (HTTP %d)", e.Status)
		}
	}
	e.Msg = b.scrub(e.Msg)
	return e
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
