package security

import (
	"crypto/x509"
	"fmt"
	"regexp"
	"strings"
)

// CertRules map a client certificate's subject (its distinguished name, RFC 2253:
// "CN=alice,OU=eng,O=Acme") to a principal, as Kafka's ssl.principal.mapping.rules do:
// a comma-separated list of RULE:pattern/replacement/[L|U] and DEFAULT, tried in order.
// A rule applies when its pattern matches the whole name; the principal is "User:" and
// the replacement ($1 for the first group), lower- or upper-cased with L or U. DEFAULT
// takes the whole name. A name no rule matches is refused.
type CertRules struct {
	rules []certRule
}

type certRule struct {
	def     bool
	re      *regexp.Regexp
	replace string
	fold    byte // 'L', 'U' or 0
}

// ParseCertRules reads a rule list; "" is DEFAULT alone.
func ParseCertRules(s string) (*CertRules, error) {
	cr := &CertRules{}
	rest := strings.TrimSpace(s)
	if rest == "" {
		rest = "DEFAULT"
	}
	for rest != "" {
		var r certRule
		var err error
		switch {
		case strings.HasPrefix(rest, "DEFAULT"):
			r.def, rest = true, rest[len("DEFAULT"):]
		case strings.HasPrefix(rest, "RULE:"):
			if r, rest, err = parseRule(rest[len("RULE:"):]); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("principal rules: %q: want RULE:pattern/replacement/[L|U] or DEFAULT, comma-separated", truncateRule(rest))
		}
		rest = strings.TrimSpace(rest)
		if rest != "" {
			after, ok := strings.CutPrefix(rest, ",")
			if !ok {
				return nil, fmt.Errorf("principal rules: %q: rules are separated by commas", truncateRule(rest))
			}
			rest = strings.TrimSpace(after)
		}
		cr.rules = append(cr.rules, r)
	}
	return cr, nil
}

// parseRule reads pattern/replacement/[LU] (a slash inside either written \/).
func parseRule(s string) (certRule, string, error) {
	pattern, rest, ok := cutUnescaped(s)
	if !ok {
		return certRule{}, "", fmt.Errorf("principal rules: RULE:%s: want RULE:pattern/replacement/", truncateRule(s))
	}
	replace, rest, ok := cutUnescaped(rest)
	if !ok {
		return certRule{}, "", fmt.Errorf("principal rules: RULE:%s: the replacement ends with /", truncateRule(s))
	}
	r := certRule{replace: replace}
	if rest != "" && (rest[0] == 'L' || rest[0] == 'U') {
		r.fold, rest = rest[0], rest[1:]
	}
	re, err := regexp.Compile("^(?:" + pattern + ")$")
	if err != nil {
		return certRule{}, "", fmt.Errorf("principal rules: pattern %q: %w", pattern, err)
	}
	r.re = re
	return r, rest, nil
}

func cutUnescaped(s string) (before, after string, ok bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && i+1 < len(s) && s[i+1] == '/':
			b.WriteByte('/')
			i++
		case s[i] == '/':
			return b.String(), s[i+1:], true
		default:
			b.WriteByte(s[i])
		}
	}
	return "", "", false
}

func truncateRule(s string) string {
	if len(s) > 48 {
		return s[:48] + "…"
	}
	return s
}

// Principal maps a subject's distinguished name to a principal.
func (cr *CertRules) Principal(dn string) (string, error) {
	for _, r := range cr.rules {
		if r.def {
			return "User:" + dn, nil
		}
		if !r.re.MatchString(dn) {
			continue
		}
		name := r.re.ReplaceAllString(dn, r.replace)
		switch r.fold {
		case 'L':
			name = strings.ToLower(name)
		case 'U':
			name = strings.ToUpper(name)
		}
		if name == "" {
			return "", fmt.Errorf("%w: the principal rule for %q gives an empty name", ErrAuthFailed, dn)
		}
		return "User:" + name, nil
	}
	return "", fmt.Errorf("%w: no principal rule matches the certificate subject %q", ErrAuthFailed, dn)
}

// CertPrincipal maps a verified client certificate to its principal.
func (g *Guard) CertPrincipal(cert *x509.Certificate) (string, error) {
	rules := g.cfg.CertRules
	if rules == nil {
		rules = &CertRules{rules: []certRule{{def: true}}}
	}
	return rules.Principal(cert.Subject.String())
}
