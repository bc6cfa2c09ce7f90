package s3

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"hash"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
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
	// sent and reads every object back.
	unsigned bool
}

func newWriter(ctx context.Context, b *Backend, key string, noReplace bool) *Writer {
	return &Writer{b: b, ctx: ctx, key: key, noReplace: noReplace, h: sha256.New(), next: 1,
		sem: make(chan struct{}, b.opts.Parallel)}
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
		out, err := w.b.client.CreateMultipartUpload(w.ctx, &awss3.CreateMultipartUploadInput{
			Bucket: aws.String(w.b.url.Bucket), Key: aws.String(w.key),
		})
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
		out, err := w.b.client.UploadPart(w.ctx, &awss3.UploadPartInput{
			Bucket: aws.String(w.b.url.Bucket), Key: aws.String(w.key), UploadId: aws.String(w.uploadID),
			PartNumber: aws.Int32(num), Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data))),
		}, payloadOptions(w.unsigned)...)
		w.mu.Lock()
		if err != nil {
			if w.err == nil {
				w.err = w.b.wrap("UploadPart", w.b.objURL(w.key), err)
			}
			w.mu.Unlock()
			return
		}
		w.parts = append(w.parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(num)})
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
		if err := w.b.putSmall(ctx, w.key, w.buf, w.noReplace, payloadOptions(w.unsigned)...); err != nil {
			return err
		}
		w.committed, w.buf = true, nil
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
	if _, err := w.b.client.CompleteMultipartUpload(ctx, in); err != nil {
		return w.b.wrap("CompleteMultipartUpload", w.b.objURL(w.key), err)
	}
	w.committed = true
	return nil
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
