package redact

import (
	"errors"
	"io/fs"
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"postgres://u:hunter2@db:5432/strata?sslmode=disable", "postgres://u:xxxxx@db:5432/strata?sslmode=disable"},
		{"postgresql://db/strata", "postgresql://db/strata"},
		{"postgres://u@db/strata?password=hunter2&sslmode=verify-full", "postgres://u@db/strata?password=xxxxx&sslmode=verify-full"},
		{"postgres://u@db/strata?sslpassword=hunter2", "postgres://u@db/strata?sslpassword=xxxxx"},
		{"postgres://u@db/strata?pass%77ord=hunter2", "postgres://u@db/strata?pass%77ord=xxxxx"},
		// A multi-host authority; an unparsable URL (a stray %).
		{"postgres://u:hunter2@h1:5432,h2:5432/db?password=hunter2", "postgres://u:xxxxx@h1:5432,h2:5432/db?password=xxxxx"},
		{"postgres://u:hun%ter2@db/x", "postgres://xxxxx@db/x"},
		{"s3://AKIA:hunter2@bucket/p?endpoint=http://127.0.0.1:9000", "s3://AKIA:xxxxx@bucket/p?endpoint=http://127.0.0.1:9000"},
		{"host=db user=u password=hunter2 dbname=strata", "host=db user=u password=xxxxx dbname=strata"},
		{"host=db password = 'hunter 2' sslmode=verify-full", "host=db password = xxxxx sslmode=verify-full"},
		{`host=db password='it\'s hunter2' dbname=x`, "host=db password=xxxxx dbname=x"},
		{`password=hunter\ 2 host=db`, "password=xxxxx host=db"},
		{"host=db sslpassword=hunter2", "host=db sslpassword=xxxxx"},
		{"./catalog.db", "./catalog.db"},
		{"sqlite:/var/lib/strata/catalog.db", "sqlite:/var/lib/strata/catalog.db"},
		{"", ""},
	} {
		if got := String(tc.in); got != tc.want {
			t.Errorf("String(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if strings.Contains(String(tc.in), "hunter") {
			t.Errorf("String(%q) shows the password", tc.in)
		}
	}
}

func TestSecrets(t *testing.T) {
	msg := "connect to `user=u password=hunter2`: hunter2 refused"
	if got := Secrets(msg, "hunter2", ""); got != "connect to `user=u password=xxxxx`: xxxxx refused" {
		t.Errorf("Secrets = %q", got)
	}
	if got := Secrets("port 5432", "p"); got != "port 5432" {
		t.Errorf("a one-letter secret garbled the message: %q", got)
	}
	err := Error(fmtErr("dial hunter2", fs.ErrNotExist), "hunter2")
	if err.Error() != "dial xxxxx" || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Error = %q, Is(ErrNotExist) %v", err, errors.Is(err, fs.ErrNotExist))
	}
	if Error(nil, "x") != nil {
		t.Error("Error(nil) is not nil")
	}
}

type wrapped struct {
	msg string
	err error
}

func (w wrapped) Error() string { return w.msg }
func (w wrapped) Unwrap() error { return w.err }

func fmtErr(msg string, err error) error { return wrapped{msg, err} }
