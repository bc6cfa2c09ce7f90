package s3

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/storage/s3/s3test"
)

// TestStoreRefusesWrongChecksum: the test server verifies the SHA-256 checksum a body is sent
// with, which is what lets an upload go without a read-back: a PutObject, an UploadPart and a
// CompleteMultipartUpload whose checksum is not their bytes' are refused with BadDigest and
// store nothing; with the right ones the object is stored and the store answers the checksum
// (for one completed from parts, the SHA-256 of the parts' SHA-256s, "-" and their count). The
// backend's probe finds that the store verifies, and leaves no upload open.
func TestStoreRefusesWrongChecksum(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "sums")
	c := srv.Client("")
	ctx := context.Background()
	body := []byte("the bytes of a shard")
	right := sha256.Sum256(body)
	wrong := sha256.Sum256(append(body, '.'))
	b64 := func(sum []byte) *string { return aws.String(base64.StdEncoding.EncodeToString(sum)) }
	badDigest := func(what string, err error) {
		t.Helper()
		var api smithy.APIError
		if !errors.As(err, &api) || api.ErrorCode() != "BadDigest" {
			t.Fatalf("%s with a wrong SHA-256 checksum = %v, want BadDigest", what, err)
		}
	}
	_, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("sums"), Key: aws.String("put"),
		Body: bytes.NewReader(body), ChecksumSHA256: b64(wrong[:])})
	badDigest("PutObject", err)
	if _, err := os.Stat(filepath.Join(srv.Root, "sums", "put")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused PutObject stored an object (%v)", err)
	}
	out, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("sums"), Key: aws.String("put"),
		Body: bytes.NewReader(body), ChecksumSHA256: b64(right[:])})
	if err != nil || aws.ToString(out.ChecksumSHA256) != *b64(right[:]) {
		t.Fatalf("PutObject with the right checksum = %v, answered checksum %q", err, aws.ToString(out.ChecksumSHA256))
	}

	mpu, err := c.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: aws.String("sums"), Key: aws.String("mpu"),
		ChecksumAlgorithm: types.ChecksumAlgorithmSha256})
	if err != nil {
		t.Fatal(err)
	}
	part := func(n int32, sum []byte) (*awss3.UploadPartOutput, error) {
		return c.UploadPart(ctx, &awss3.UploadPartInput{Bucket: aws.String("sums"), Key: aws.String("mpu"), UploadId: mpu.UploadId,
			PartNumber: aws.Int32(n), Body: bytes.NewReader(body), ChecksumSHA256: b64(sum)})
	}
	_, err = part(1, wrong[:])
	badDigest("UploadPart", err)
	p1, err := part(1, right[:])
	if err != nil {
		t.Fatal(err)
	}
	composite := sha256.Sum256(right[:])
	complete := func(sum string) error {
		_, err := c.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{Bucket: aws.String("sums"), Key: aws.String("mpu"),
			UploadId: mpu.UploadId, ChecksumSHA256: aws.String(sum), MultipartUpload: &types.CompletedMultipartUpload{
				Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: p1.ETag, ChecksumSHA256: b64(right[:])}}}})
		return err
	}
	badDigest("CompleteMultipartUpload", complete(*b64(wrong[:])+"-1"))
	if err := complete(*b64(composite[:]) + "-1"); err != nil {
		t.Fatal(err)
	}

	b := NewWithClient(c, URL{Bucket: "sums", Prefix: "ds"}, Options{})
	if !b.storeVerifies(ctx, "ds/shard-00000.pks") {
		t.Fatal("the probe found that the test server does not verify checksums")
	}
	if ups := srv.OpenUploads(t, "sums"); len(ups) != 0 {
		t.Fatalf("the probe left open uploads %v", ups)
	}
	if _, err := b.Stat(ctx, "shard-00000.pks"); err == nil {
		t.Fatal("the probe left an object")
	}
}

// countingProxy is a proxy to the test server that counts the GETs of data objects and can
// change the answers as a store that does not verify checksums would give them.
type countingProxy struct {
	endpoint string
	mu       sync.Mutex
	gets     int
	// noSums removes the checksums from every answer (a store that supports none);
	// acceptAll answers a refused UploadPart with 200 (a store that takes any checksum).
	noSums, acceptAll bool
}

func startCountingProxy(t *testing.T, srv *s3test.Server) *countingProxy {
	target, err := url.Parse(srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	p := &countingProxy{}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = target.Scheme, target.Host
			pr.Out.Host = pr.In.Host
		},
		ModifyResponse: func(resp *http.Response) error {
			r := resp.Request
			if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "shard-") {
				p.mu.Lock()
				p.gets++
				p.mu.Unlock()
			}
			if p.noSums {
				for k := range resp.Header {
					if strings.HasPrefix(strings.ToLower(k), "x-amz-checksum-") {
						resp.Header.Del(k)
					}
				}
				if strings.Contains(r.URL.RawQuery, "uploadId") && r.Method == http.MethodPost && resp.StatusCode == http.StatusOK {
					data, err := io.ReadAll(resp.Body)
					if err != nil {
						return err
					}
					data = stripElement(data, "ChecksumSHA256")
					resp.Body = io.NopCloser(bytes.NewReader(data))
					resp.ContentLength = int64(len(data))
					resp.Header.Set("Content-Length", fmt.Sprint(len(data)))
				}
			}
			if p.acceptAll && r.Method == http.MethodPut && strings.Contains(r.URL.RawQuery, "partNumber") && resp.StatusCode == http.StatusBadRequest {
				resp.Body.Close()
				resp.StatusCode, resp.Status = http.StatusOK, "200 OK"
				resp.Body, resp.ContentLength = http.NoBody, 0
				resp.Header = http.Header{"Etag": {`"0123456789abcdef0123456789abcdef"`}}
			}
			return nil
		},
	}
	s := httptest.NewServer(rp)
	t.Cleanup(s.Close)
	p.endpoint = s.URL
	return p
}

// stripElement removes <name>...</name> from an XML answer.
func stripElement(data []byte, name string) []byte {
	open, end := []byte("<"+name+">"), []byte("</"+name+">")
	i := bytes.Index(data, open)
	j := bytes.Index(data, end)
	if i < 0 || j < i {
		return data
	}
	return append(data[:i:i], data[j+len(end):]...)
}

func (p *countingProxy) client() *awss3.Client {
	return awss3.New(awss3.Options{
		BaseEndpoint:               aws.String(p.endpoint),
		Region:                     s3test.Region,
		UsePathStyle:               true,
		Credentials:                credentials.NewStaticCredentialsProvider(s3test.AccessKey, s3test.SecretKey, ""),
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	})
}

// TestPublishVerifiedByStore: a publish to a store that verifies checksums reads no data object
// back (a single PUT and an object of 3 parts); to a store that answers no checksum, or one that
// takes a wrong checksum (its probe), every object is read back (GETs of the data objects), and
// each publish gives the dataset's bytes. PACKER_S3_READBACK=1 reads back on any store.
func TestPublishVerifiedByStore(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "pub")
	const part = 5 << 20
	dir := t.TempDir()
	m := shard.Manifest{Format: shard.FormatShards, Sample: shard.SampleSpec{Shape: []int{1}, DType: shard.Uint8, Layout: "hwc"}}
	for i, size := range []int{1000, 2*part + 77} {
		data := bytes.Repeat([]byte{byte(i + 1), 7, 9, byte(size)}, size/4+1)[:size]
		sum := sha256.Sum256(data)
		m.Files = append(m.Files, shard.FileEntry{Path: fmt.Sprintf("shard-%05d.pks", i), Size: int64(size), SHA256: fmt.Sprintf("%x", sum)})
		if err := os.WriteFile(filepath.Join(dir, m.Files[i].Path), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if data, err := m.Marshal(); err != nil {
		t.Fatal(err)
	} else if err := os.WriteFile(filepath.Join(dir, shard.ManifestName), data, 0o644); err != nil {
		t.Fatal(err)
	}
	for i, c := range []struct {
		noSums, acceptAll, readback bool
		wantGets                    bool
	}{
		{wantGets: false},
		{noSums: true, wantGets: true},
		{acceptAll: true, wantGets: true},
		{readback: true, wantGets: true},
	} {
		t.Run(fmt.Sprintf("noSums=%v,acceptAll=%v,readback=%v", c.noSums, c.acceptAll, c.readback), func(t *testing.T) {
			if c.readback {
				t.Setenv("PACKER_S3_READBACK", "1")
			}
			p := startCountingProxy(t, srv)
			p.noSums, p.acceptAll = c.noSums, c.acceptAll
			b := NewWithClient(p.client(), URL{Bucket: "pub", Prefix: fmt.Sprintf("ds%d", i)}, Options{PartSize: part})
			if err := b.Publish(context.Background(), dir, PublishOptions{}); err != nil {
				t.Fatal(err)
			}
			if got := p.gets > 0; got != c.wantGets {
				t.Fatalf("%d GETs of data objects, want read-back %v", p.gets, c.wantGets)
			}
			for _, fe := range m.Files {
				got, err := os.ReadFile(filepath.Join(srv.Root, "pub", fmt.Sprintf("ds%d", i), fe.Path))
				if err != nil {
					t.Fatal(err)
				}
				if sum := sha256.Sum256(got); fmt.Sprintf("%x", sum) != fe.SHA256 {
					t.Fatalf("%s: the store holds other bytes", fe.Path)
				}
			}
			if ups := srv.OpenUploads(t, "pub"); len(ups) != 0 {
				t.Fatalf("open uploads left: %v", ups)
			}
		})
	}
}
