// Package open turns a bucket URL from the command line or configuration into an
// objstore.Store.
//
//	file:///var/lib/strata/objects        filesystem store (embedded mode)
//	/var/lib/strata/objects, ./objects    the same, as a plain path
//	s3://bucket                           S3, the whole bucket
//	s3://bucket/some/prefix               S3, keys under some/prefix/
//	s3://bucket/p?endpoint=http://127.0.0.1:9000&path_style=true&region=us-east-1
//	                                      MinIO or another compatible store
//	s3://KEY:SECRET@bucket/p              explicit credentials (prefer the environment)
//
// Without credentials in the URL, S3 uses the default AWS chain: AWS_ACCESS_KEY_ID and
// AWS_SECRET_ACCESS_KEY, shared files, or the instance's role.
package open

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/strata-io/strata/internal/redact"
	"github.com/strata-io/strata/objstore"
	"github.com/strata-io/strata/objstore/fs"
	"github.com/strata-io/strata/objstore/s3"
)

// Open returns the store rawURL names. It does not contact S3 (Parse, then
// Target.Open with Options.CreateBucket, creates the bucket where that is wanted).
func Open(ctx context.Context, rawURL string, log *slog.Logger) (objstore.Store, error) {
	t, err := Parse(rawURL)
	if err != nil {
		return nil, err
	}
	return t.Open(ctx, log, Options{})
}

// Target is what a bucket URL names: a directory (the filesystem store) or an S3
// bucket and prefix. It says which, so a caller needs no look at the store it opens.
type Target struct{ t target }

// Parse checks rawURL and says what it names, opening nothing.
func Parse(rawURL string) (Target, error) {
	t, err := parse(rawURL)
	return Target{t}, err
}

// Dir is the filesystem store in dir, taken as a path (never a URL).
func Dir(dir string) Target { return Target{target{dir: filepath.Clean(dir)}} }

// Dir is the filesystem store's directory, "" for S3.
func (t Target) Dir() string { return t.t.dir }

// URI names the target as table formats name files in it (Iceberg's locations):
// file:///dir, or s3://bucket/prefix without the endpoint, credentials or options.
func (t Target) URI() string {
	if t.t.dir != "" {
		return "file://" + filepath.ToSlash(t.t.dir)
	}
	return strings.TrimSuffix("s3://"+t.t.s3.Bucket+"/"+strings.Trim(t.t.s3.Prefix, "/"), "/")
}

// Options are how a target is opened.
type Options struct {
	// CreateBucket creates an S3 bucket that is missing (MinIO, development); it needs
	// the s3:CreateBucket permission. A directory is always created.
	CreateBucket bool
}

// Open opens the store. Only with Options.CreateBucket does it contact S3.
func (t Target) Open(ctx context.Context, log *slog.Logger, o Options) (objstore.Store, error) {
	// Checked one by one so a failure returns a nil interface, not a typed nil.
	if t.t.dir != "" {
		st, err := fs.New(t.t.dir)
		if err != nil {
			return nil, err
		}
		return st, nil
	}
	st, err := s3.New(ctx, t.t.s3, log)
	if err != nil {
		return nil, err
	}
	if o.CreateBucket {
		if err := st.EnsureBucket(ctx); err != nil {
			return nil, fmt.Errorf("create bucket: %w", err)
		}
	}
	return st, nil
}

// target is what a URL names: a directory or an S3 configuration.
type target struct {
	dir string
	s3  s3.Config
}

const usage = "use file:///absolute/path, a plain path, or s3://bucket/prefix?endpoint=URL&path_style=true&region=REGION"

// bucketName is S3's rule for (non-legacy) bucket names.
var bucketName = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)

func parse(rawURL string) (target, error) {
	bad := func(format string, args ...any) (target, error) {
		return target{}, fmt.Errorf("objstore: open %q: %s", redact.String(rawURL), fmt.Sprintf(format, args...))
	}
	if strings.TrimSpace(rawURL) == "" {
		return bad("empty bucket URL: %s", usage)
	}
	scheme, _, hasScheme := strings.Cut(rawURL, "://")
	if !hasScheme {
		if strings.Contains(rawURL, "?") {
			return bad("a plain path takes no query: %s", usage)
		}
		return target{dir: filepath.Clean(rawURL)}, nil
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		if ue, ok := err.(*url.Error); ok {
			err = ue.Err // without the URL, which may hold a secret
		}
		return bad("%v: %s", err, usage)
	}
	switch strings.ToLower(scheme) {
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return bad("a file URL has no host (%q): write three slashes, file:///absolute/path", u.Host)
		}
		if u.RawQuery != "" || u.User != nil {
			return bad("a file URL takes no query or user: write file:///absolute/path")
		}
		if u.Path == "" || !filepath.IsAbs(u.Path) {
			return bad("a file URL needs an absolute path: write file:///absolute/path, or give a plain relative path")
		}
		return target{dir: filepath.Clean(u.Path)}, nil
	case "s3":
		return parseS3(u, bad)
	}
	return bad("unsupported scheme %q: %s", scheme, usage)
}

func parseS3(u *url.URL, bad func(string, ...any) (target, error)) (target, error) {
	if u.Host == "" {
		return bad("no bucket: write s3://bucket/prefix")
	}
	if u.Port() != "" {
		return bad("the bucket is the host part and takes no port: give the store's address as ?endpoint=http://host:port")
	}
	if !bucketName.MatchString(u.Host) || strings.Contains(u.Host, "..") {
		return bad("%q is not a valid bucket name: 3-63 lowercase letters, digits, dots and hyphens, starting and ending with a letter or digit", u.Host)
	}
	cfg := s3.Config{Bucket: u.Host, Prefix: strings.Trim(u.Path, "/")}
	if strings.Contains(u.Path, "//") {
		return bad("prefix %q has an empty segment", u.Path)
	}
	if u.User != nil {
		pass, ok := u.User.Password()
		if u.User.Username() == "" || !ok || pass == "" {
			return bad("credentials in the URL need both parts, s3://ACCESS_KEY:SECRET_KEY@bucket; or leave them out and set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
		}
		cfg.AccessKey, cfg.SecretKey = u.User.Username(), pass
	}
	pathStyleSet := false
	for k, vs := range u.Query() {
		if len(vs) != 1 {
			return bad("query parameter %q given %d times", k, len(vs))
		}
		v := vs[0]
		switch k {
		case "endpoint":
			e, err := url.Parse(v)
			if err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" {
				return bad("endpoint %q is not an http:// or https:// URL with a host, such as endpoint=http://127.0.0.1:9000", v)
			}
			if e.Path != "" && e.Path != "/" || e.RawQuery != "" {
				return bad("endpoint %q has a path or query: give only scheme, host and port, and put the bucket and prefix in the s3:// URL", v)
			}
			cfg.Endpoint = strings.TrimSuffix(v, "/")
		case "path_style":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return bad("path_style=%q: want true or false", v)
			}
			cfg.PathStyle, pathStyleSet = b, true
		case "region":
			if v == "" {
				return bad("region is empty: leave it out to use AWS_REGION")
			}
			cfg.Region = v
		default:
			return bad("unknown query parameter %q: known are endpoint, path_style and region", k)
		}
	}
	if cfg.Endpoint != "" && !pathStyleSet {
		// A custom endpoint is almost always MinIO or similar, which answers only
		// path-style requests unless configured with a domain.
		cfg.PathStyle = true
	}
	return target{s3: cfg}, nil
}
