package open

import (
	"errors"
	"net/url"
	"sort"
	"strings"
)

// params lists the parameters a Postgres connection string sets, by name: a URL's
// query, or a keyword/value string's keywords (libpq syntax: values bare with
// backslash escapes, or single-quoted).
func params(dsn string) (map[string]string, error) {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		out := map[string]string{}
		for k, v := range u.Query() {
			out[k] = v[len(v)-1]
		}
		return out, nil
	}
	out := map[string]string{}
	s := strings.TrimSpace(dsn)
	for s != "" {
		k, rest, ok := strings.Cut(s, "=")
		if !ok {
			return nil, errors.New("a keyword without '=' in the connection string")
		}
		k = strings.TrimSpace(k)
		rest = strings.TrimLeft(rest, " \t\r\n")
		var v strings.Builder
		i := 0
		if strings.HasPrefix(rest, "'") {
			for i = 1; i < len(rest) && rest[i] != '\''; i++ {
				if rest[i] == '\\' && i+1 < len(rest) {
					i++
				}
				v.WriteByte(rest[i])
			}
			if i == len(rest) {
				return nil, errors.New("an unterminated quoted value in the connection string")
			}
			i++
		} else {
			for ; i < len(rest) && !strings.ContainsRune(" \t\r\n", rune(rest[i])); i++ {
				if rest[i] == '\\' && i+1 < len(rest) {
					i++
				}
				v.WriteByte(rest[i])
			}
		}
		out[k] = v.String()
		s = strings.TrimSpace(rest[i:])
	}
	return out, nil
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
