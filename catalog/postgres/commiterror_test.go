package postgres

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/internal/engine"
)

// connClosed stands for pgx's "conn closed" lock error, which says it is safe to
// retry even when the connection closed while a sent statement's answer was awaited.
type connClosed struct{}

func (connClosed) Error() string     { return "conn closed" }
func (connClosed) SafeToRetry() bool { return true }

// TestCommitErrorDefiniteness: only a statement's ERROR (and a connection that could not
// be made) makes a failed commit definite; an error that ended the session — FATAL from an
// immediate shutdown or a terminated backend — may follow a commit that landed, so it
// must leave the outcome unknown for the writer to settle.
func TestCommitErrorDefiniteness(t *testing.T) {
	plan := &engine.Plan{Segment: catalog.Segment{Key: "segments/k"}}
	for _, tc := range []struct {
		name     string
		err      error
		definite bool
	}{
		{"statement error", &pgconn.PgError{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: "40P01"}, true},
		{"immediate shutdown", &pgconn.PgError{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: "57P01"}, false},
		{"crash of another backend", &pgconn.PgError{Severity: "FATAL", Code: "57P02"}, false},
		{"terminated backend, localized severity", &pgconn.PgError{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: "57P01"}, false},
		{"panic", &pgconn.PgError{Severity: "PANIC", Code: "XX000"}, false},
		{"connection lost mid-call", io.ErrUnexpectedEOF, false},
		{"could not connect", &pgconn.ConnectError{}, true},
		// pgx's "conn closed" while it waited for the answer: marked safe to retry,
		// yet the statement was sent and may have committed.
		{"conn closed, marked safe to retry", connClosed{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := (&Catalog{}).commitError(context.Background(), plan, tc.err)
			if err == nil {
				t.Fatal("no error")
			}
			if got := errors.Is(err, catalog.ErrCommitFailed); got != tc.definite {
				t.Errorf("definite failure = %v, want %v (%v)", got, tc.definite, err)
			}
		})
	}
}
