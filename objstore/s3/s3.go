// Package s3 is the object store on Amazon S3 and S3-compatible stores such as MinIO,
// through aws-sdk-go-v2.
//
// Puts are create-only with If-None-Match: *. Every put sends the CRC-32C of its body
// as S3's own checksum (x-amz-checksum-crc32c: the store verifies the bytes it receives)
// and keeps it as user metadata (x-amz-meta-strata-crc32c), which is how a put that
// finds its key taken (412) tells its own earlier attempt — the SDK retried after a
// response was lost — from another writer's object. The payload is not also hashed for
// the signature (UNSIGNED-PAYLOAD): the checksum covers it, and SHA-256 over every
// segment cost a seventh of a node's CPU under produce load.
package s3

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/logging"
	"github.com/aws/smithy-go/middleware"

	"github.com/strata-io/strata/internal/crc32c"
	"github.com/strata-io/strata/internal/ctxwait"
	"github.com/strata-io/strata/internal/sendbody"
	"github.com/strata-io/strata/objstore"
)

// metaCRC32C is the user-metadata key (sent as x-amz-meta-strata-crc32c) holding the
// base64 big-endian CRC-32C of the object's body, as S3 writes checksums. metaSHA256
// (hex SHA-256) is what objects written by earlier versions carry instead.
const (
	metaCRC32C = "strata-crc32c"
	metaSHA256 = "strata-sha256"
)

// defaultPageSize is the most keys one ListObjectsV2 call returns on S3.
const defaultPageSize = 1000

// Config says which bucket to use and how to reach it.
type Config struct {
	// Bucket is required.
	Bucket string
	// Prefix is prepended to every key, with a "/" added when it lacks one; keys passed
	// to and returned by the Store are relative to it. Empty uses the whole bucket.
	Prefix string
	// Endpoint overrides the AWS endpoint, for MinIO and other compatible stores
	// ("http://127.0.0.1:9000"). Empty uses AWS.
	Endpoint string
	// Region defaults to the AWS chain's (AWS_REGION, profile), then to us-east-1 when
	// Endpoint is set. Without an endpoint a region is required.
	Region string
	// PathStyle addresses the bucket in the path (http://host/bucket/key) rather than the
	// host name; MinIO needs it unless it is configured with a domain.
	PathStyle bool
	// AccessKey and SecretKey, when both set, are used instead of the default AWS
	// credential chain (environment, shared files, IAM role).
	AccessKey, SecretKey string
}

// Store is an objstore.Store on one bucket and prefix.
type Store struct {
	client   *awss3.Client
	bucket   string
	prefix   string
	region   string
	log      *slog.Logger
	pageSize int32
}

var (
	_ objstore.Store        = (*Store)(nil)
	_ objstore.CRC32CPutter = (*Store)(nil)
)

// New returns a Store for cfg. It does not contact the store: credentials are resolved
// and the bucket is found on first use (see EnsureBucket).
func New(ctx context.Context, cfg Config, log *slog.Logger) (*Store, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "objstore", "bucket", cfg.Bucket)
	if cfg.Bucket == "" {
		return nil, errors.New("s3: open: no bucket given")
	}
	if (cfg.AccessKey == "") != (cfg.SecretKey == "") {
		return nil, fmt.Errorf("s3: open bucket %s: give both an access key and a secret key, or neither to use the default AWS credential chain", cfg.Bucket)
	}
	opts := []func(*config.LoadOptions) error{
		config.WithLogger(sdkLogger{log}),
	}
	if cfg.Region != "" {
		opts = append(opts, config.WithRegion(cfg.Region))
	}
	if cfg.AccessKey != "" {
		opts = append(opts, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(cfg.AccessKey, cfg.SecretKey, "")))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("s3: open bucket %s: load AWS configuration: %w", cfg.Bucket, err)
	}
	if awsCfg.Region == "" {
		if cfg.Endpoint == "" {
			return nil, fmt.Errorf("s3: open bucket %s: no region: set one in the configuration or AWS_REGION", cfg.Bucket)
		}
		// Compatible stores mostly ignore the region but SigV4 needs one.
		awsCfg.Region = "us-east-1"
	}
	client := awss3.NewFromConfig(awsCfg, func(o *awss3.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.UsePathStyle = cfg.PathStyle
		// The SDK's own client, as configured (timeouts, CA bundle), with connections
		// that write a put's parts uncopied.
		if bc, ok := o.HTTPClient.(*awshttp.BuildableClient); ok {
			o.HTTPClient = partsBodyClient{bc.WithTransportOptions(func(t *http.Transport) {
				t.DialContext = sendbody.Dial(t.DialContext)
			})}
		}
	})
	prefix := strings.TrimLeft(cfg.Prefix, "/")
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return &Store{
		client:   client,
		bucket:   cfg.Bucket,
		prefix:   prefix,
		region:   awsCfg.Region,
		log:      log,
		pageSize: defaultPageSize,
	}, nil
}

// sdkLogger sends the SDK's log lines (retries, checksum warnings) to the injected
// logger rather than to stderr.
type sdkLogger struct{ log *slog.Logger }

func (l sdkLogger) Logf(c logging.Classification, format string, v ...any) {
	if c == logging.Warn {
		l.log.Warn("aws sdk: " + fmt.Sprintf(format, v...))
		return
	}
	l.log.Debug("aws sdk: " + fmt.Sprintf(format, v...))
}

// EnsureBucket creates the bucket if it does not exist.
func (s *Store) EnsureBucket(ctx context.Context) error {
	_, err := s.client.HeadBucket(ctx, &awss3.HeadBucketInput{Bucket: &s.bucket})
	if err == nil {
		return nil
	}
	if !isNotFound(err) {
		return fmt.Errorf("s3: head bucket %s: %w", s.bucket, err)
	}
	in := &awss3.CreateBucketInput{Bucket: &s.bucket}
	if s.region != "us-east-1" {
		// us-east-1 is the default and refuses to be named as a constraint.
		in.CreateBucketConfiguration = &types.CreateBucketConfiguration{
			LocationConstraint: types.BucketLocationConstraint(s.region),
		}
	}
	_, err = s.client.CreateBucket(ctx, in)
	var owned *types.BucketAlreadyOwnedByYou
	if err != nil && !errors.As(err, &owned) {
		return fmt.Errorf("s3: create bucket %s: %w", s.bucket, err)
	}
	s.log.Info("created bucket")
	return nil
}

func (s *Store) key(key string) *string {
	k := s.prefix + key
	return &k
}

// Put creates key with body. See the package documentation for how a retried put is
// recognised.
func (s *Store) Put(ctx context.Context, key string, body []byte) error {
	return s.PutParts(ctx, key, [][]byte{body})
}

// PutParts is Put of the parts laid end to end: the request body streams them (a
// seekable reader, so the SDK can send it again on a retry) under the same checksum
// and create-only condition, and they are never joined in memory.
func (s *Store) PutParts(ctx context.Context, key string, parts [][]byte) error {
	var crc uint32
	for _, p := range parts {
		crc = crc32c.Update(crc, p)
	}
	return s.put(ctx, key, parts, crc)
}

// PutPartsCRC32C implements objstore.CRC32CPutter: PutParts with the caller's CRC-32C,
// which the store verifies against the bytes it receives (BadDigest when they differ).
func (s *Store) PutPartsCRC32C(ctx context.Context, key string, parts [][]byte, crc uint32) error {
	return s.put(ctx, key, parts, crc)
}

func (s *Store) put(ctx context.Context, key string, parts [][]byte, crc uint32) error {
	if err := objstore.CheckKey(key); err != nil {
		return fmt.Errorf("s3: put %s: %w", key, err)
	}
	sum := base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint32(nil, crc))
	size := objstore.PartsLen(parts)
	backoff := 20 * time.Millisecond
	vanished := 0
	for {
		_, err := s.client.PutObject(context.WithValue(ctx, partsKey{}, parts), &awss3.PutObjectInput{
			Bucket:         &s.bucket,
			Key:            s.key(key),
			Body:           objstore.NewPartsReader(parts),
			ContentLength:  aws.Int64(size),
			IfNoneMatch:    aws.String("*"),
			ChecksumCRC32C: aws.String(sum),
			Metadata:       map[string]string{metaCRC32C: sum},
		}, unsignedPayload)
		if err == nil {
			return nil
		}
		code, status := errorCode(err)
		switch {
		case status == http.StatusPreconditionFailed || code == "PreconditionFailed":
			same, err := s.holds(ctx, key, parts, sum)
			if errors.Is(err, objstore.ErrNotExist) && vanished < 3 {
				// Deleted between our put and our look: the key is free again.
				vanished++
				continue
			}
			if err != nil {
				return fmt.Errorf("s3: put %s: key exists, checking its content: %w", key, err)
			}
			if !same {
				return fmt.Errorf("s3: put %s: %w", key, objstore.ErrExists)
			}
			s.log.Debug("put found its key holding the same content: an earlier attempt succeeded", "key", key)
			return nil
		case code == "BadDigest" || code == "XAmzContentChecksumMismatch":
			// The bytes the store received are not those the checksum was made for.
			return fmt.Errorf("s3: put %s: %w: %w", key, objstore.ErrChecksum, err)
		case status == http.StatusConflict && code == "ConditionalRequestConflict":
			// Another put of this key (perhaps our own first attempt) is still in flight:
			// wait for it to settle as 200 or 412.
			s.log.Debug("put conflicts with one in flight: retrying", "key", key, "after", backoff)
			// Jitter spreads out puts that collided together.
			if err := ctxwait.Sleep(ctx, backoff/2+rand.N(backoff)); err != nil {
				return fmt.Errorf("s3: put %s: waiting for a conflicting put: %w", key, err)
			}
			backoff = min(2*backoff, time.Second)
		case status == 0 && ctx.Err() == nil:
			// No answer: the connection broke. A store that refuses a create-only put
			// of an existing key may answer 412 and close before reading a large body
			// (MinIO does), which the client sees as a broken pipe; or our put landed
			// and its answer was lost. The key says which.
			same, herr := s.holds(ctx, key, parts, sum)
			switch {
			case herr == nil && same:
				s.log.Debug("put's connection broke, but the key holds the same content", "key", key, "err", err)
				return nil
			case herr == nil:
				return fmt.Errorf("s3: put %s: %w", key, objstore.ErrExists)
			default:
				return fmt.Errorf("s3: put %s: %w", key, err)
			}
		default:
			return fmt.Errorf("s3: put %s: %w", key, err)
		}
	}
}

// partsKey is the context key under which put hands its parts to partsBodyClient.
type partsKey struct{}

// partsBodyClient sends a put's parts as the request body itself. The SDK wraps the
// body it is given in readers of its own, which hide the PartsReader from the
// connection, so the connection copied every segment through a 32 KiB buffer: the
// request the SDK builds gets a PartsReader of its own over the same parts instead
// (each attempt its own, so a retry never shares a position with an attempt still
// being written), which sendbody's connections write to the socket as it is.
type partsBodyClient struct{ next awss3.HTTPClient }

func (c partsBodyClient) Do(req *http.Request) (*http.Response, error) {
	if parts, ok := req.Context().Value(partsKey{}).([][]byte); ok && req.Method == http.MethodPut &&
		req.Body != nil && req.ContentLength == objstore.PartsLen(parts) {
		sendbody.SetBody(req, func() sendbody.Body { return objstore.NewPartsReader(parts) })
	}
	return c.next.Do(req)
}

// unsignedPayload signs a put as UNSIGNED-PAYLOAD instead of with the body's SHA-256
// (which the SDK computes over plain HTTP): the CRC-32C checksum header, which the store
// verifies, covers the body.
func unsignedPayload(o *awss3.Options) {
	o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("StrataUnsignedPayload",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				return next.HandleInitialize(v4.SetPayloadHash(ctx, "UNSIGNED-PAYLOAD"), in)
			}), middleware.After)
	})
}

// holds reports whether key holds exactly body: same size and stored CRC-32C (or, for
// an object of an earlier version, SHA-256), or, for an object that has neither (not
// written by Strata), the same bytes. sum is body's CRC-32C.
func (s *Store) holds(ctx context.Context, key string, parts [][]byte, sum string) (bool, error) {
	out, err := s.client.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: &s.bucket, Key: s.key(key)})
	if err != nil {
		if isNotFound(err) {
			return false, objstore.ErrNotExist
		}
		return false, err
	}
	if aws.ToInt64(out.ContentLength) != objstore.PartsLen(parts) {
		return false, nil
	}
	for k, v := range out.Metadata {
		switch {
		case strings.EqualFold(k, metaCRC32C):
			return v == sum, nil
		case strings.EqualFold(k, metaSHA256):
			h := sha256.New()
			for _, p := range parts {
				h.Write(p)
			}
			return strings.EqualFold(v, hex.EncodeToString(h.Sum(nil))), nil
		}
	}
	got, err := s.Get(ctx, key)
	if err != nil {
		return false, err
	}
	return objstore.PartsEqual(parts, got), nil
}

// Get returns the whole content of key.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	if err := objstore.CheckKey(key); err != nil {
		return nil, fmt.Errorf("s3: get %s: %w", key, err)
	}
	out, err := s.client.GetObject(ctx, &awss3.GetObjectInput{Bucket: &s.bucket, Key: s.key(key)})
	if err != nil {
		if isNotFound(err) {
			err = objstore.ErrNotExist
		}
		return nil, fmt.Errorf("s3: get %s: %w", key, err)
	}
	defer out.Body.Close()
	size := aws.ToInt64(out.ContentLength)
	var buf bytes.Buffer
	buf.Grow(int(size) + bytes.MinRead) // one allocation: ReadFrom grows when MinRead is free
	if _, err := buf.ReadFrom(out.Body); err != nil {
		return nil, fmt.Errorf("s3: get %s: read body: %w", key, err)
	}
	if out.ContentLength != nil && int64(buf.Len()) != size {
		return nil, fmt.Errorf("s3: get %s: read %d bytes of %d", key, buf.Len(), size)
	}
	return buf.Bytes(), nil
}

// GetRange returns exactly n bytes of key starting at off. A range that does not lie
// inside the object is objstore.ErrRange; n = 0 (checked with a HEAD, as S3 cannot serve
// an empty range) at any off up to the size is empty.
func (s *Store) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	wrap := func(err error) error { return fmt.Errorf("s3: get %s range %d+%d: %w", key, off, n, err) }
	if err := objstore.CheckKey(key); err != nil {
		return nil, wrap(err)
	}
	if off < 0 || n < 0 {
		return nil, wrap(objstore.ErrRange)
	}
	if n == 0 {
		info, err := s.Head(ctx, key)
		if err != nil {
			return nil, wrap(err)
		}
		if off > info.Size {
			return nil, wrap(fmt.Errorf("object has %d bytes: %w", info.Size, objstore.ErrRange))
		}
		return []byte{}, nil
	}
	out, err := s.client.GetObject(ctx, &awss3.GetObjectInput{
		Bucket: &s.bucket,
		Key:    s.key(key),
		Range:  aws.String(fmt.Sprintf("bytes=%d-%d", off, off+n-1)),
	})
	if err != nil {
		code, status := errorCode(err)
		switch {
		case isNotFound(err):
			err = objstore.ErrNotExist
		case status == http.StatusRequestedRangeNotSatisfiable || code == "InvalidRange":
			err = objstore.ErrRange
		}
		return nil, wrap(err)
	}
	defer out.Body.Close()
	start, end, total, ok := parseContentRange(aws.ToString(out.ContentRange))
	if !ok || start != off {
		// A store that ignores Range would hand back the wrong bytes.
		return nil, wrap(fmt.Errorf("unexpected Content-Range %q", aws.ToString(out.ContentRange)))
	}
	if end-start+1 < n {
		return nil, wrap(fmt.Errorf("object has %d bytes: %w", total, objstore.ErrRange))
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(out.Body, buf); err != nil {
		return nil, wrap(fmt.Errorf("read body: %w", err))
	}
	return buf, nil
}

// parseContentRange parses "bytes START-END/TOTAL" (TOTAL may be "*").
func parseContentRange(s string) (start, end, total int64, ok bool) {
	total = -1
	var totalStr string
	rest, found := strings.CutPrefix(s, "bytes ")
	if !found {
		return 0, 0, 0, false
	}
	rng, totalStr, found := strings.Cut(rest, "/")
	if !found {
		return 0, 0, 0, false
	}
	if _, err := fmt.Sscanf(rng, "%d-%d", &start, &end); err != nil || end < start {
		return 0, 0, 0, false
	}
	if totalStr != "*" {
		if _, err := fmt.Sscanf(totalStr, "%d", &total); err != nil {
			return 0, 0, 0, false
		}
	}
	return start, end, total, true
}

// Head returns key's size and modification time.
func (s *Store) Head(ctx context.Context, key string) (objstore.Info, error) {
	if err := objstore.CheckKey(key); err != nil {
		return objstore.Info{}, fmt.Errorf("s3: head %s: %w", key, err)
	}
	out, err := s.client.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: &s.bucket, Key: s.key(key)})
	if err != nil {
		if isNotFound(err) {
			err = objstore.ErrNotExist
		}
		return objstore.Info{}, fmt.Errorf("s3: head %s: %w", key, err)
	}
	return objstore.Info{Key: key, Size: aws.ToInt64(out.ContentLength), Modified: aws.ToTime(out.LastModified)}, nil
}

// Delete removes key; S3 answers a delete of a missing key with success too.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := objstore.CheckKey(key); err != nil {
		return fmt.Errorf("s3: delete %s: %w", key, err)
	}
	_, err := s.client.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: &s.bucket, Key: s.key(key)})
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("s3: delete %s: %w", key, err)
	}
	return nil
}

// List calls fn for every key starting with prefix, in the lexical (UTF-8 byte) order
// S3 lists in, one ListObjectsV2 page at a time.
func (s *Store) List(ctx context.Context, prefix string, fn func(objstore.Info) error) error {
	p := awss3.NewListObjectsV2Paginator(s.client, &awss3.ListObjectsV2Input{
		Bucket:  &s.bucket,
		Prefix:  aws.String(s.prefix + prefix),
		MaxKeys: aws.Int32(s.pageSize),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("s3: list %q: %w", prefix, err)
		}
		for _, o := range page.Contents {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("s3: list %q: %w", prefix, err)
			}
			info := objstore.Info{
				Key:      strings.TrimPrefix(aws.ToString(o.Key), s.prefix),
				Size:     aws.ToInt64(o.Size),
				Modified: aws.ToTime(o.LastModified),
			}
			if err := fn(info); err != nil {
				return fmt.Errorf("s3: list %q: %w", prefix, err)
			}
		}
	}
	return nil
}

// errorCode returns the S3 error code and HTTP status of err, when it has them.
func errorCode(err error) (code string, status int) {
	var api smithy.APIError
	if errors.As(err, &api) {
		code = api.ErrorCode()
	}
	var resp interface{ HTTPStatusCode() int }
	if errors.As(err, &resp) {
		status = resp.HTTPStatusCode()
	}
	return code, status
}

// isNotFound reports whether err says the key (or, for HEAD, which has no body to tell
// them apart, the bucket) does not exist. A missing bucket on other calls is a
// configuration error, not a missing object.
func isNotFound(err error) bool {
	code, status := errorCode(err)
	switch code {
	case "NoSuchKey", "NotFound":
		return true
	case "NoSuchBucket":
		return false
	}
	return status == http.StatusNotFound && code == ""
}
