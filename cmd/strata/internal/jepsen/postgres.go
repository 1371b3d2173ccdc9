package jepsen

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/strata-io/strata/internal/redact"
	"github.com/strata-io/strata/internal/testkit/privatepg"
)

// PrivatePostgres is a Postgres of the run's own (package privatepg), which the
// pg-restart fault stops with -m immediate and starts again.
type PrivatePostgres = privatepg.Instance

// CreateDatabase creates a fresh database on the server base points at (a role that
// may CREATE DATABASE) and returns its DSN.
func CreateDatabase(ctx context.Context, base string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return "", fmt.Errorf("jepsen: connect to %s: %w", redact.String(base), err)
	}
	defer conn.Close(ctx)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "strata_torture_" + hex.EncodeToString(b)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("jepsen: create database: %w", err)
	}
	u, err := url.Parse(base)
	if err != nil {
		return "", err
	}
	u.Path = "/" + name
	return u.String(), nil
}
