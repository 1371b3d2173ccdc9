package open

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-io/strata/objstore/fs"
	"github.com/strata-io/strata/objstore/s3"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		url     string
		want    target
		wantErr string // substring of the error; "" wants success
	}{
		{url: "file:///var/lib/strata", want: target{dir: "/var/lib/strata"}},
		{url: "file://localhost/var/lib/strata/", want: target{dir: "/var/lib/strata"}},
		{url: "/var/lib/strata", want: target{dir: "/var/lib/strata"}},
		{url: "./data/objects/", want: target{dir: "data/objects"}},
		{url: "objects", want: target{dir: "objects"}},
		{url: "s3://my-bucket", want: target{s3: s3.Config{Bucket: "my-bucket"}}},
		{url: "s3://my-bucket/", want: target{s3: s3.Config{Bucket: "my-bucket"}}},
		{url: "s3://my-bucket/strata/prod/", want: target{s3: s3.Config{Bucket: "my-bucket", Prefix: "strata/prod"}}},
		{
			url:  "s3://strata/dev?endpoint=http://127.0.0.1:9000&path_style=true&region=us-east-1",
			want: target{s3: s3.Config{Bucket: "strata", Prefix: "dev", Endpoint: "http://127.0.0.1:9000", PathStyle: true, Region: "us-east-1"}},
		},
		{
			// A custom endpoint implies path style unless told otherwise.
			url:  "s3://strata?endpoint=https://minio.internal:9000/",
			want: target{s3: s3.Config{Bucket: "strata", Endpoint: "https://minio.internal:9000", PathStyle: true}},
		},
		{
			url:  "s3://strata?endpoint=https://s3.example.com&path_style=false",
			want: target{s3: s3.Config{Bucket: "strata", Endpoint: "https://s3.example.com"}},
		},
		{url: "s3://b.example.com?region=eu-west-1", want: target{s3: s3.Config{Bucket: "b.example.com", Region: "eu-west-1"}}},
		{url: "s3://AKID:s3cr%2Ft@strata/p", want: target{s3: s3.Config{Bucket: "strata", Prefix: "p", AccessKey: "AKID", SecretKey: "s3cr/t"}}},

		{url: "", wantErr: "empty bucket URL"},
		{url: "gs://bucket", wantErr: `unsupported scheme "gs"`},
		{url: "file://var/lib/strata", wantErr: "three slashes"},
		{url: "file:///var/lib?x=1", wantErr: "takes no query"},
		{url: "objects?x=1", wantErr: "plain path takes no query"},
		{url: "s3:///prefix", wantErr: "no bucket"},
		{url: "s3://127.0.0.1:9000/bucket", wantErr: "takes no port"},
		{url: "s3://My_Bucket", wantErr: "not a valid bucket name"},
		{url: "s3://ab", wantErr: "not a valid bucket name"},
		{url: "s3://b..c", wantErr: "not a valid bucket name"},
		{url: "s3://bucket/a//b", wantErr: "empty segment"},
		{url: "s3://bucket?endpoint=127.0.0.1:9000", wantErr: "not an http:// or https:// URL"},
		{url: "s3://bucket?endpoint=http://host:9000/bucket", wantErr: "has a path or query"},
		{url: "s3://bucket?path_style=yes", wantErr: "want true or false"},
		{url: "s3://bucket?region=", wantErr: "region is empty"},
		{url: "s3://bucket?pathstyle=true", wantErr: `unknown query parameter "pathstyle"`},
		{url: "s3://bucket?region=a&region=b", wantErr: "given 2 times"},
		{url: "s3://AKID@bucket", wantErr: "need both parts"},
		{url: "s3://AKID:topsecret@bucket?bogus=1", wantErr: "unknown query parameter"},
	} {
		got, err := parse(tc.url)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("parse(%q) = %+v, %v; want an error containing %q", tc.url, got, err, tc.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), "topsecret") {
				t.Errorf("parse(%q): error shows the secret: %v", tc.url, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("parse(%q): %v", tc.url, err)
			continue
		}
		if got != tc.want {
			t.Errorf("parse(%q) = %+v, want %+v", tc.url, got, tc.want)
		}
	}
}

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	st, err := Open(t.Context(), "file://"+dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if f, ok := st.(*fs.Store); !ok || f.Root() != dir {
		t.Errorf("Open(file://%s) = %T, want *fs.Store at %s", dir, st, dir)
	}
	// Opening S3 does not contact it, so this needs no MinIO.
	st, err = Open(t.Context(), "s3://strata/x?endpoint=http://127.0.0.1:1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := st.(*s3.Store); !ok {
		t.Errorf("Open(s3://…) = %T, want *s3.Store", st)
	}
	if _, err := Open(t.Context(), "ftp://x", nil); err == nil {
		t.Error("Open(ftp://x) succeeded")
	}
}

// TestTargetDir: a target says whether it is a directory, and which, before anything
// is opened; a path given as a directory is never read as a URL.
func TestTargetDir(t *testing.T) {
	for url, want := range map[string]string{
		"file:///var/lib/strata": "/var/lib/strata",
		"./objects":              "objects",
		"s3://strata/x":          "",
	} {
		tg, err := Parse(url)
		if err != nil || tg.Dir() != want {
			t.Errorf("Parse(%q).Dir() = %q, %v; want %q", url, tg.Dir(), err, want)
		}
	}
	if got := Dir("data/objects?v=1").Dir(); got != "data/objects?v=1" {
		t.Errorf("Dir(a path with a query mark).Dir() = %q", got)
	}
	dir := filepath.Join(t.TempDir(), "made")
	st, err := Dir(dir).Open(t.Context(), nil, Options{CreateBucket: true})
	if f, ok := st.(*fs.Store); err != nil || !ok || f.Root() != dir {
		t.Errorf("Dir(%s).Open = %T %v, want *fs.Store there", dir, st, err)
	}
}
