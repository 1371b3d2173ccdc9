// Package redact is the one place that hides secrets in connection strings before
// they are printed: catalog DSNs (Postgres URLs and libpq keyword/value strings),
// bucket URLs with credentials, and error messages that may quote either.
//
// Everything that can reach a log line, an error, a --help default or a panic goes
// through String (a connection string whose shape is known) or Secrets (free text in
// which known secret values must not appear).
package redact

import (
	"net/url"
	"regexp"
	"strings"
)

// Mask replaces a hidden value.
const Mask = "xxxxx"

// secretKeys are the parameter names whose values are secrets, in a URL query or a
// keyword/value string (compared lower-case, without '_' and '-'), as libpq, pgx and
// the S3 URL forms name them.
var secretKeys = map[string]bool{
	"password": true, "sslpassword": true, "pass": true, "pwd": true,
	"secret": true, "secretkey": true, "secretaccesskey": true, "token": true, "sessiontoken": true,
	"apikey": true, "apikeys": true,
}

func isSecretKey(k string) bool {
	k = strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(strings.TrimSpace(k)))
	return secretKeys[k]
}

// String returns s with every secret it can recognise masked: the password of a
// URL's user information (any scheme), the values of secret query parameters
// (password=, sslpassword=, ...), and the values of secret keys in a libpq
// keyword/value string (password='...'). Other text comes back unchanged. It never
// fails: a string it cannot parse is masked from the first secret-looking part on.
func String(s string) string {
	if s == "" {
		return s
	}
	if scheme, rest, ok := strings.Cut(s, "://"); ok && isScheme(scheme) {
		return redactURL(s, scheme, rest)
	}
	if looksKeywordValue(s) {
		return redactKeywordValue(s)
	}
	return s
}

func isScheme(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		alpha := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		if !alpha && (i == 0 || !(r >= '0' && r <= '9' || r == '+' || r == '-' || r == '.')) {
			return false
		}
	}
	return true
}

func redactURL(s, scheme, rest string) string {
	if u, err := url.Parse(s); err == nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), Mask)
		}
		if u.RawQuery != "" {
			u.RawQuery = redactQuery(u.RawQuery)
		}
		return u.String()
	}
	// Unparsable (e.g. a stray '%'): hide everything between "://" and the last '@' of
	// the authority, and the query, which may carry a password.
	authority, path, hasPath := strings.Cut(rest, "/")
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		authority = Mask + "@" + authority[at+1:]
	}
	out := scheme + "://" + authority
	if hasPath {
		out += "/" + path
	}
	if p, q, ok := strings.Cut(out, "?"); ok {
		out = p + "?" + redactQuery(q)
	}
	return out
}

// redactQuery masks secret values in a raw query, keeping the rest as written.
func redactQuery(raw string) string {
	parts := strings.Split(raw, "&")
	for i, p := range parts {
		k, _, ok := strings.Cut(p, "=")
		if dk, err := url.QueryUnescape(k); err == nil {
			k = dk
		}
		if ok && isSecretKey(k) {
			parts[i] = strings.SplitN(p, "=", 2)[0] + "=" + Mask
		}
	}
	return strings.Join(parts, "&")
}

// keywordValue finds a libpq keyword at the start of a string: "host=", "user = ".
var keywordValue = regexp.MustCompile(`^\s*[A-Za-z_][A-Za-z0-9_]*\s*=`)

func looksKeywordValue(s string) bool { return keywordValue.MatchString(s) }

// kvPair is one keyword and its value as written: key, '=', then a quoted value
// (backslash escapes inside) or a run of non-space characters (backslash escapes).
var kvPair = regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_]*)(\s*=\s*)('(?:[^'\\]|\\.)*'?|(?:[^\s\\]|\\.?)*)`)

func redactKeywordValue(s string) string {
	return kvPair.ReplaceAllStringFunc(s, func(m string) string {
		sub := kvPair.FindStringSubmatch(m)
		if !isSecretKey(sub[1]) {
			return m
		}
		return sub[1] + sub[2] + Mask
	})
}

// Secrets returns text with every occurrence of each secret replaced by Mask: the
// last line of defence for messages built by libraries (a driver's error may quote
// its connection string). Secrets shorter than 4 bytes are left alone: masking every
// "p" of a message would make it unreadable, and such a password protects nothing.
func Secrets(text string, secrets ...string) string {
	for _, s := range secrets {
		if len(s) >= 4 {
			text = strings.ReplaceAll(text, s, Mask)
		}
	}
	return text
}

// Error wraps err so that its message has the secrets masked (Secrets) while
// errors.Is and errors.As still see the original chain.
func Error(err error, secrets ...string) error {
	if err == nil {
		return nil
	}
	return &redacted{err: err, msg: Secrets(err.Error(), secrets...)}
}

type redacted struct {
	err error
	msg string
}

func (r *redacted) Error() string { return r.msg }
func (r *redacted) Unwrap() error { return r.err }
