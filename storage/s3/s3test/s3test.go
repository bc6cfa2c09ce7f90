// Package s3test runs a real S3 server on loopback for tests: versitygw
// (github.com/versity/versitygw) with its posix backend in a temporary folder, installed by
// scripts/setup.sh (or scripts/s3-server.sh install) into the cache folder. Tests that need it
// call Start, which skips the test, saying how to install the server, when the binary is
// absent.
package s3test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
)

// Version is the versitygw release the tests run (scripts/s3-server.sh pins the same).
const Version = "v1.8.0"

// The root account of the test server. Not a secret: it exists only in the tests' server.
const (
	AccessKey = "packer-test-access"
	SecretKey = "packer-test-secret-9f3c1a7e"
	Region    = "us-east-1"
)

// Binary is the path of the versitygw binary: $PACKER_VERSITYGW, or versitygw in the
// cache folder where scripts/s3-server.sh installs it.
func Binary() string {
	if p := os.Getenv("PACKER_VERSITYGW"); p != "" {
		return p
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "packer", "versitygw-"+Version, "versitygw")
}

// Server is a running test server.
type Server struct {
	Endpoint string // http://127.0.0.1:PORT
	Root     string // the posix backend's folder: one folder per bucket
	cmd      *exec.Cmd
}

// Start starts a server for the test and stops it when the test ends. The test is skipped
// when the binary is absent.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := Binary()
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("PACKER_REQUIRE_S3") == "1" {
			t.Fatalf("no S3 test server at %s, and PACKER_REQUIRE_S3=1 (install it with: bash scripts/s3-server.sh install)", bin)
		}
		t.Skipf("no S3 test server at %s (install it with: bash scripts/s3-server.sh install)", bin)
	}
	root := t.TempDir()
	var s *Server
	for attempt := 0; ; attempt++ {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		cmd := exec.Command(bin, "--access", AccessKey, "--secret", SecretKey, "--region", Region,
			"--port", addr, "posix", root)
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		dieWithParent(cmd)
		if err := cmd.Start(); err != nil {
			t.Fatalf("start %s: %v", bin, err)
		}
		s = &Server{Endpoint: "http://" + addr, Root: root, cmd: cmd}
		if err := s.wait(); err == nil {
			break
		} else if attempt == 2 {
			s.stop()
			t.Fatalf("the S3 test server did not start: %v\n%s", err, out.String())
		}
		s.stop() // the port was taken between freePort and the server's listen: another one
	}
	t.Cleanup(s.stop)
	return s
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// wait polls the server until it answers HTTP, or its process exits.
func (s *Server) wait() error {
	exited := make(chan error, 1)
	go func() { exited <- s.cmd.Wait() }()
	for {
		select {
		case err := <-exited:
			s.cmd.Process = nil
			return fmt.Errorf("the server exited: %v", err)
		default:
		}
		if resp, err := http.Get(s.Endpoint + "/"); err == nil {
			resp.Body.Close()
			go func() { <-exited }()
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *Server) stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Kill()
	}
}

// Env is the environment a packer command needs to reach the server with the test account:
// to be added to os.Environ().
func (s *Server) Env() []string {
	return []string{
		"AWS_ACCESS_KEY_ID=" + AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + SecretKey,
		"AWS_REGION=" + Region,
		"AWS_ENDPOINT_URL=" + s.Endpoint,
		"AWS_CONFIG_FILE=" + os.DevNull,
		"AWS_SHARED_CREDENTIALS_FILE=" + os.DevNull,
		"AWS_EC2_METADATA_DISABLED=true",
	}
}

// SetEnv sets Env in the test's own environment (t.Setenv), for code that builds its client
// from the standard chain in this process.
func (s *Server) SetEnv(t *testing.T) {
	t.Helper()
	for _, kv := range s.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	t.Setenv("AWS_PROFILE", "")
}

// Client is an SDK client of the server with the test account (or with the given secret key,
// to test refused credentials).
func (s *Server) Client(secret string) *awss3.Client { return s.ClientKeys("", secret) }

// Bucket creates a bucket.
func (s *Server) Bucket(t testing.TB, name string) {
	t.Helper()
	if _, err := s.Client("").CreateBucket(context.Background(), &awss3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("create bucket %s: %v", name, err)
	}
}

// OpenUploads lists the multipart uploads open in the bucket.
func (s *Server) OpenUploads(t testing.TB, bucket string) []string {
	t.Helper()
	out, err := s.Client("").ListMultipartUploads(context.Background(), &awss3.ListMultipartUploadsInput{Bucket: aws.String(bucket)})
	if err != nil {
		t.Fatalf("list multipart uploads of %s: %v", bucket, err)
	}
	var keys []string
	for _, u := range out.Uploads {
		keys = append(keys, aws.ToString(u.Key))
	}
	return keys
}

// ClientKeys is an SDK client of the server with the given access key id and secret key (an
// empty one is the test account's), to test refused credentials.
func (s *Server) ClientKeys(access, secret string) *awss3.Client {
	if access == "" {
		access = AccessKey
	}
	if secret == "" {
		secret = SecretKey
	}
	return awss3.New(awss3.Options{
		BaseEndpoint:               aws.String(s.Endpoint),
		Region:                     Region,
		UsePathStyle:               true,
		Credentials:                credentials.NewStaticCredentialsProvider(access, secret, ""),
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	})
}
