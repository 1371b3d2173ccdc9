package connect

import (
	"bytes"
	"regexp"
	"slices"
	"strings"
)

// Nothing the connect runtime answers — validation errors, refusals, task status
// traces — may carry what its caller may not read: a value a config provider resolved
// (the operator's secret: the config shows the reference), or a record's bytes (a
// trace is readable by anyone who may describe the connector, who may not read the
// topic).

// secrets are values config provider references resolved to.
type secrets []string

// minSecret is the shortest resolved value redacted from free text: shorter ones
// would blank out ordinary words and numbers of every message. A key's own messages
// show its reference instead whatever its length (validate).
const minSecret = 3

func (s secrets) add(v string) secrets {
	if len(v) < minSecret || slices.Contains(s, v) {
		return s
	}
	s = append(s, v)
	// Longest first, so a value containing another is replaced whole.
	slices.SortFunc(s, func(a, b string) int { return len(b) - len(a) })
	return s
}

// redact replaces every resolved value in msg.
func (s secrets) redact(msg string) string {
	for _, v := range s {
		msg = strings.ReplaceAll(msg, v, hidden)
	}
	return msg
}

var (
	quoted    = regexp.MustCompile(`'[^']*'|"(?:[^"\\]|\\.)*"|` + "`[^`]*`")
	wordLike  = regexp.MustCompile(`[\p{L}\p{N}_.\-+/=@:]{4,}`)
	recordCut = "…"
)

// scrubRecord removes from msg, an error about a record, whatever may be of the record:
// every quoted run (converters and transforms quote what they could not read), and
// every word of four or more characters that occurs in its key, value or headers
// (shorter ones are the message's own words too often: "not", "the").
// What names the record — topic, partition, offset — is the caller's to add outside
// msg.
func scrubRecord(msg string, parts ...[]byte) string {
	msg = quoted.ReplaceAllString(msg, `"`+recordCut+`"`)
	return wordLike.ReplaceAllStringFunc(msg, func(w string) string {
		for _, p := range parts {
			if len(p) > 0 && bytes.Contains(p, []byte(w)) {
				return recordCut
			}
		}
		return w
	})
}
