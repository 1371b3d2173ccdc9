package s3

import (
	"io"
	"net/url"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/strata-io/strata/objstore"
	"github.com/strata-io/strata/objstore/objstoretest"
)

// minioReader reads what a Store wrote with minio-go, a client that shares no code
// with aws-sdk-go-v2: keys, sizes, bytes and checksums as another tool sees them.
type minioReader struct {
	c              *minio.Client
	bucket, prefix string
}

// readBack is the conformance suite's read-back through minio-go, for stores on cfg's
// server.
func readBack(cfg Config) objstoretest.ReadBack {
	return objstoretest.ReadBack{
		New: func(t *testing.T, s objstore.Store) objstoretest.Reader {
			st := s.(*Store)
			u, err := url.Parse(cfg.Endpoint)
			if err != nil {
				t.Fatal(err)
			}
			c, err := minio.New(u.Host, &minio.Options{
				Creds:        credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""),
				Secure:       u.Scheme == "https",
				Region:       cfg.Region,
				BucketLookup: minio.BucketLookupPath,
			})
			if err != nil {
				t.Fatal(err)
			}
			return &minioReader{c: c, bucket: st.bucket, prefix: st.prefix}
		},
		// S3's own checksum, verified by the server at upload, and the copy Strata keeps
		// in user metadata to recognise a retried put.
		Checksums: []string{"x-amz-checksum-crc32c", "x-amz-meta-strata-crc32c"},
	}
}

func (r *minioReader) List(t *testing.T) []objstoretest.RawObject {
	var out []objstoretest.RawObject
	for o := range r.c.ListObjects(t.Context(), r.bucket, minio.ListObjectsOptions{Prefix: r.prefix, Recursive: true}) {
		if o.Err != nil {
			t.Fatalf("minio-go: list %s/%s: %v", r.bucket, r.prefix, o.Err)
		}
		out = append(out, objstoretest.RawObject{Key: strings.TrimPrefix(o.Key, r.prefix), Size: o.Size})
	}
	return out
}

func (r *minioReader) Get(t *testing.T, key string) objstoretest.RawObject {
	obj, err := r.c.GetObject(t.Context(), r.bucket, r.prefix+key, minio.GetObjectOptions{Checksum: true})
	if err != nil {
		t.Fatalf("minio-go: get %s: %v", key, err)
	}
	defer obj.Close()
	st, err := obj.Stat() // the GET's own headers
	if err != nil {
		t.Fatalf("minio-go: stat %s: %v", key, err)
	}
	body, err := io.ReadAll(obj) // verified against the full-object checksum at EOF
	if err != nil {
		t.Fatalf("minio-go: read %s: %v", key, err)
	}
	sums := map[string]string{}
	if st.ChecksumCRC32C != "" {
		sums["x-amz-checksum-crc32c"] = st.ChecksumCRC32C
	}
	for k, v := range st.UserMetadata {
		sums["x-amz-meta-"+strings.ToLower(k)] = v
	}
	return objstoretest.RawObject{Key: key, Size: st.Size, Body: body, Checksums: sums}
}
