package s3

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go/middleware"
)

// Writer is the Backend's storage.Writer. Up to one part's bytes it buffers the file and
// Commit sends it in one PutObject; beyond that it starts a multipart upload and sends every
// full part as it fills, up to Options.Parallel parts at once, and Commit sends the last one
// and completes the upload, the moment the object appears, whole. Abort aborts the upload,
// so no part of an aborted file is ever visible (nor kept, once the store has processed the
// abort). It hashes what it sends: Sum is the SHA-256 of the committed bytes.
type Writer struct {
	b         *Backend
	ctx       context.Context
	key       string
	noReplace bool

	buf  []byte
	h    hash.Hash
	size int64
	next int32 // the next part's number

	uploadID string
	sem      chan struct{}
	wg       sync.WaitGroup
	mu       sync.Mutex
	parts    []types.CompletedPart
	err      error // the first failed part's error

	committed, aborted bool

	partSent func(ctx context.Context, key string, part int32) // called after each part is sent, if set
	// unsigned sends the bodies as UNSIGNED-PAYLOAD instead of signing each with its SHA-256:
	// set by Publish over HTTPS (Backend.unsignedPayload), which checks the SHA-256 of what it
	// sent and has the store verify it (checksums) or reads the object back.
	unsigned bool
	// checksums sends every body with its SHA-256 as x-amz-checksum-sha256, which a store that
	// supports checksums verifies, refusing the body (BadDigest) when it does not match; a
	// multipart upload is started with the SHA-256 algorithm, and its completion is sent the
	// composite checksum its parts make (the SHA-256 of their SHA-256s). The sums are computed
	// once and also serve as the signed payload's hash. Set by Publish.
	checksums bool
	partSums  map[int32][]byte // the parts' SHA-256s, by part number (under mu)
	// stored is the checksum the store answered for the committed object (base64, with "-N"
	// for one completed from N parts), and want the one its bytes make: equal when the store
	// computed the SHA-256 of what it stored, part by part, and found it to be what was sent.
	stored, want string
	etag         string // the committed object's ETag, as the store answered
}

func newWriter(ctx context.Context, b *Backend, key string, noReplace bool) *Writer {
	return &Writer{b: b, ctx: ctx, key: key, noReplace: noReplace, h: sha256.New(), next: 1,
		sem: make(chan struct{}, b.opts.Parallel), partSums: map[int32][]byte{}}
}

var errDone = errors.New("the file was already committed or aborted")

// Write buffers p, sending every full part.
func (w *Writer) Write(p []byte) (int, error) {
	if w.committed || w.aborted {
		return 0, errDone
	}
	if err := w.failed(); err != nil {
		return 0, err
	}
	w.h.Write(p)
	w.size += int64(len(p))
	n := len(p)
	for len(p) > 0 {
		if w.buf == nil {
			w.buf = make([]byte, 0, w.b.opts.PartSize)
		}
		k := min(len(p), cap(w.buf)-len(w.buf))
		w.buf = append(w.buf, p[:k]...)
		p = p[k:]
		if len(w.buf) == cap(w.buf) {
			if err := w.sendPart(); err != nil {
				return 0, err
			}
		}
	}
	return n, nil
}

func (w *Writer) failed() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// sendPart starts the upload of the buffered bytes as the next part, in the background once
// a slot is free, starting the multipart upload first where it is the first part.
func (w *Writer) sendPart() error {
	if w.uploadID == "" {
		in := &awss3.CreateMultipartUploadInput{Bucket: aws.String(w.b.url.Bucket), Key: aws.String(w.key)}
		if w.checksums {
			in.ChecksumAlgorithm = types.ChecksumAlgorithmSha256
		}
		out, err := w.b.client.CreateMultipartUpload(w.ctx, in)
		if err != nil {
			return w.b.wrap("CreateMultipartUpload", w.b.objURL(w.key), err)
		}
		w.uploadID = aws.ToString(out.UploadId)
	}
	data, num := w.buf, w.next
	w.buf = nil
	w.next++
	select {
	case w.sem <- struct{}{}:
	case <-w.ctx.Done():
		return w.ctx.Err()
	}
	w.wg.Go(func() {
		defer func() { <-w.sem }()
		in := &awss3.UploadPartInput{
			Bucket: aws.String(w.b.url.Bucket), Key: aws.String(w.key), UploadId: aws.String(w.uploadID),
			PartNumber: aws.Int32(num), Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data))),
		}
		sum, opts := w.bodyOptions(data, nil)
		if sum != nil {
			in.ChecksumSHA256 = aws.String(base64.StdEncoding.EncodeToString(sum))
		}
		out, err := w.b.client.UploadPart(w.ctx, in, opts...)
		w.mu.Lock()
		if err != nil {
			if w.err == nil {
				w.err = w.b.wrap("UploadPart", w.b.objURL(w.key), err)
			}
			w.mu.Unlock()
			return
		}
		w.parts = append(w.parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(num), ChecksumSHA256: in.ChecksumSHA256})
		if sum != nil {
			w.partSums[num] = sum
		}
		w.mu.Unlock()
		if w.partSent != nil {
			w.partSent(w.ctx, w.key, num)
		}
	})
	return nil
}

// Commit sends what is left and makes the object visible: one PutObject for a file smaller
// than a part, else the last part and CompleteMultipartUpload. With noReplace, either is
// conditional (If-None-Match: *). On error nothing is visible; the caller calls Abort.
func (w *Writer) Commit(ctx context.Context) error {
	if w.committed || w.aborted {
		return errDone
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if w.uploadID == "" {
		in := w.b.putInput(w.key, w.buf, w.noReplace)
		// No part was sent: the body is every byte written, whose SHA-256 w.h has.
		sum, opts := w.bodyOptions(w.buf, w.h.Sum(nil))
		if sum != nil {
			w.want = base64.StdEncoding.EncodeToString(sum)
			in.ChecksumSHA256 = aws.String(w.want)
		}
		out, err := w.b.client.PutObject(ctx, in, opts...)
		if err != nil {
			return w.refusedPut(ctx, w.b.wrap("PutObject", w.b.objURL(w.key), err))
		}
		w.committed, w.buf = true, nil
		w.etag, w.stored = aws.ToString(out.ETag), aws.ToString(out.ChecksumSHA256)
		return nil
	}
	if len(w.buf) > 0 {
		if err := w.sendPart(); err != nil {
			return err
		}
	}
	w.wg.Wait()
	if err := w.failed(); err != nil {
		return err
	}
	parts := slices.Clone(w.parts)
	slices.SortFunc(parts, func(a, b types.CompletedPart) int { return int(aws.ToInt32(a.PartNumber) - aws.ToInt32(b.PartNumber)) })
	in := &awss3.CompleteMultipartUploadInput{
		Bucket: aws.String(w.b.url.Bucket), Key: aws.String(w.key), UploadId: aws.String(w.uploadID),
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	}
	if w.noReplace {
		in.IfNoneMatch = aws.String("*")
	}
	if w.checksums {
		h := sha256.New()
		for _, p := range parts {
			h.Write(w.partSums[aws.ToInt32(p.PartNumber)])
		}
		w.want = fmt.Sprintf("%s-%d", base64.StdEncoding.EncodeToString(h.Sum(nil)), len(parts))
		in.ChecksumSHA256 = aws.String(w.want)
	}
	out, err := w.b.client.CompleteMultipartUpload(ctx, in)
	if err != nil {
		return w.b.wrap("CompleteMultipartUpload", w.b.objURL(w.key), err)
	}
	w.committed = true
	w.etag, w.stored = aws.ToString(out.ETag), aws.ToString(out.ChecksumSHA256)
	return nil
}

// StoreVerified reports whether the store answered, for the committed object, the SHA-256
// checksum of the bytes sent (Writer.checksums): it computed the checksum of what it stored
// (of each part, for an object completed from parts) and found it to be what was sent. A store
// that supports no checksums answers none: the object must then be read back to be checked.
func (w *Writer) StoreVerified() bool {
	return w.committed && w.checksums && w.want != "" && w.stored == w.want
}

// bodyOptions are the SHA-256 of a body to send, data (sum where the caller has it, else
// computed; nil unless Writer.checksums), and the request options that sign it:
// UNSIGNED-PAYLOAD (Writer.unsigned), or the sum as the payload's hash, so that the SDK does
// not hash the body a second time.
func (w *Writer) bodyOptions(data, sum []byte) ([]byte, []func(*awss3.Options)) {
	if !w.checksums {
		return nil, payloadOptions(w.unsigned)
	}
	if sum == nil {
		s := sha256.Sum256(data)
		sum = s[:]
	}
	if w.unsigned {
		return sum, payloadOptions(true)
	}
	return sum, []func(*awss3.Options){signedPayload(hex.EncodeToString(sum))}
}

// signedPayload is the request option that signs the body with its SHA-256, sum (hex), known
// already.
func signedPayload(sum string) func(*awss3.Options) {
	set := middleware.FinalizeMiddlewareFunc("packerPayloadHash", func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
		return next.HandleFinalize(v4.SetPayloadHash(ctx, sum), in)
	})
	return func(o *awss3.Options) {
		o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
			return st.Finalize.Insert(set, "ComputePayloadHash", middleware.Before)
		})
	}
}

// Abort waits for the parts in flight and aborts the multipart upload, if one was started. It
// runs on a context of its own (with a time limit), so that a build cancelled by SIGINT still
// aborts its uploads.
func (w *Writer) Abort() error {
	if w.committed || w.aborted {
		return nil
	}
	w.aborted = true
	w.buf = nil
	w.wg.Wait()
	if w.uploadID == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(w.ctx), time.Minute)
	defer cancel()
	_, err := w.b.client.AbortMultipartUpload(ctx, &awss3.AbortMultipartUploadInput{
		Bucket: aws.String(w.b.url.Bucket), Key: aws.String(w.key), UploadId: aws.String(w.uploadID),
	})
	return w.b.wrap("AbortMultipartUpload", w.b.objURL(w.key), err)
}

// Sum is the SHA-256 of the bytes written.
func (w *Writer) Sum() []byte { return w.h.Sum(nil) }

// Size is the number of bytes written.
func (w *Writer) Size() int64 { return w.size }

// payloadOptions are the request options for a body sent unsigned (see Writer.unsigned), or none.
func payloadOptions(unsigned bool) []func(*awss3.Options) {
	if !unsigned {
		return nil
	}
	return []func(*awss3.Options){func(o *awss3.Options) {
		o.APIOptions = append(o.APIOptions, v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware)
	}}
}

// refusedPut is the error of a failed conditional PutObject. A store that refuses the write
// (the name is taken) before reading its body may close the connection while the body is still
// being sent, so the client sees a reset, not the refusal, and its retries the same. Where an
// object is under the name after such a failure, the error also matches fs.ErrExist: the name
// is taken (or the write was made and its answer lost, which callers that must know tell by
// reading the object back, as Publish does).
func (w *Writer) refusedPut(ctx context.Context, err error) error {
	if !w.noReplace || errors.Is(err, fs.ErrExist) || ctx.Err() != nil {
		return err
	}
	if _, herr := w.b.head(ctx, w.key); herr == nil {
		return fmt.Errorf("%w (%w: an object is under the name after the conditional write failed)", err, fs.ErrExist)
	}
	return err
}
