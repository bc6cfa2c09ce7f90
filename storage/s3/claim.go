package s3

// Control objects: the small objects a build or a merge keeps at the top of its OUT's prefix
// while it writes there, to say that it owns the prefix. Each is written with a conditional
// write (If-None-Match: * to take a free prefix, If-Match: the ETag last seen to take over or
// update one), so that of two commands writing to one prefix at once exactly one owns it; and
// each names its owner (a random token, the host, the process, when it started), so that the
// other one's error can say who owns it. They are removed before the command ends; one left by
// a killed command is a leftover as its objects are (refused without --force, removed with it).

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/packer-dev/packer/shard"
)

// CheckpointName is the object in which a build that uploads its shards as it goes
// (StreamStage) keeps its checkpoint and the record of its uploads, so that --resume on
// another machine finds them.
const CheckpointName = ".packer-checkpoint.json"

// ClaimName is the object a merge by server-side copy (CopyPublish) writes first, to own the
// prefix it copies into.
const ClaimName = ".packer-claim.json"

// controlObject reports whether name (relative to the prefix) is a control object.
func controlObject(name string) bool {
	return name == CheckpointName || name == ClaimName || segmentName(name)
}

// maxControlSize bounds a control object read back: a checkpoint holds a journal (bounded as a
// manifest) and the record of the uploads (about as large).
var maxControlSize = 3 * int64(shard.MaxManifestSize)

// ErrTakenOver is what an error matches when another command owns the prefix: its control
// object was written by another build or merge (or removed) since this one last wrote it. The
// command stops, and deletes nothing: what is there may be the other one's.
var ErrTakenOver = errors.New("another packer command owns this prefix")

// owner names the command that wrote a control object.
type owner struct {
	Token   string `json:"owner"`
	Host    string `json:"host,omitempty"`
	PID     int    `json:"pid,omitempty"`
	Started string `json:"started,omitempty"`
}

// newOwner is a new owner: this process, now, with a random token.
func newOwner() (owner, error) {
	var r [16]byte
	if _, err := rand.Read(r[:]); err != nil {
		return owner{}, err
	}
	host, _ := os.Hostname()
	return owner{Token: hex.EncodeToString(r[:]), Host: host, PID: os.Getpid(), Started: time.Now().UTC().Format(time.RFC3339)}, nil
}

// String names the owner for an error message.
func (o owner) String() string {
	if o.Host == "" && o.PID == 0 {
		return "another packer command"
	}
	return fmt.Sprintf("the packer command of pid %d on host %q (started %s)", o.PID, o.Host, o.Started)
}

// putControl writes the control object name with data on the condition that it is still the
// object of ETag match ("": that there is none), and returns its new ETag. A refused write is an
// error matching ErrTakenOver, naming the owner there now; a write whose answer was lost but
// that was made (the object reads back as data) succeeds.
func (b *Backend) putControl(ctx context.Context, name string, data []byte, match string) (string, error) {
	key := b.url.keyPrefix() + name
	in := &awss3.PutObjectInput{Bucket: aws.String(b.url.Bucket), Key: aws.String(key), Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data)))}
	if match == "" {
		in.IfNoneMatch = aws.String("*")
	} else {
		in.IfMatch = aws.String(match)
	}
	out, err := b.client.PutObject(ctx, in)
	if err == nil {
		return aws.ToString(out.ETag), nil
	}
	err = b.wrap("PutObject", b.objURL(key), err)
	if !errors.Is(err, fs.ErrExist) && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	got, etag, rerr := b.readControl(ctx, name)
	if rerr == nil && string(got) == string(data) {
		return etag, nil // an earlier attempt of this write was made
	}
	return "", fmt.Errorf("%s: %w: %s (%v)", b.objURL(key), ErrTakenOver, b.controlOwner(got), err)
}

// readControl reads the control object name whole: nil, "", nil where there is none.
func (b *Backend) readControl(ctx context.Context, name string) ([]byte, string, error) {
	r, err := b.openStore(ctx, name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	if r.size > maxControlSize {
		return nil, "", fmt.Errorf("%s: %d bytes, more than packer writes there (%d): not packer's", b.objURL(r.key), r.size, maxControlSize)
	}
	data := make([]byte, r.size)
	if _, err := r.ReadAt(data, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, "", err
	}
	return data, r.etag, nil
}

// controlOwner names the owner recorded in the control object data.
func (b *Backend) controlOwner(data []byte) string {
	var o owner
	if data == nil {
		return "it was removed by another packer command"
	}
	if json.Unmarshal(data, &o) != nil || o.Token == "" {
		return "it is not what packer writes there"
	}
	return "it is owned by " + o.String()
}

// dropControl deletes the control object name if it is still the one of ETag etag (one this
// command wrote); otherwise it fails matching ErrTakenOver and deletes nothing.
func (b *Backend) dropControl(ctx context.Context, name, etag string) error {
	data, now, err := b.readControl(ctx, name)
	if err != nil {
		return err
	}
	key := b.url.keyPrefix() + name
	if now != etag {
		return fmt.Errorf("%s: %w: %s", b.objURL(key), ErrTakenOver, b.controlOwner(data))
	}
	return b.deleteKeys(ctx, []string{key})
}

// claim is a merge's hold on the prefix it copies into: its ClaimName object.
type claim struct {
	b    *Backend
	etag string
}

// claimPrefix writes the merge's ClaimName object, which must not exist: a merge that finds
// one fails, naming the merge that wrote it, before it copies anything.
func (b *Backend) claimPrefix(ctx context.Context) (*claim, error) {
	o, err := newOwner()
	if err != nil {
		return nil, err
	}
	data, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	etag, err := b.putControl(ctx, ClaimName, data, "")
	if err != nil {
		return nil, fmt.Errorf("%s: another merge or build is writing there: %w", b.url, err)
	}
	c := &claim{b: b, etag: etag}
	if err := b.otherControl(ctx, CheckpointName); err != nil {
		return nil, errors.Join(fmt.Errorf("%s: a build is writing there: %w", b.url, err), c.release())
	}
	return c, nil
}

// release deletes the claim, on a context of its own (a cancelled merge still cleans up).
func (c *claim) release() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return c.b.dropControl(ctx, ClaimName, c.etag)
}

// otherControl fails, matching ErrTakenOver and naming its owner, where the control object
// name of another kind of command is there: a build's checkpoint seen by a merge, or a merge's
// claim seen by a build. The two write different objects, which no conditional write keeps
// apart, so each looks for the other's once its own is written: of two that passed their
// check of the prefix at once, at least one finds the other's (the store reads its writes).
func (b *Backend) otherControl(ctx context.Context, name string) error {
	data, _, err := b.readControl(ctx, name)
	if err != nil || data == nil {
		return err
	}
	return fmt.Errorf("%s: %w: %s", b.objURL(b.url.keyPrefix()+name), ErrTakenOver, b.controlOwner(data))
}
