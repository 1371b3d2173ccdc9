package engine

import (
	"context"
	"fmt"

	"github.com/strata-io/strata/catalog"
)

// SCRAM credentials (catalog.Scram) are few and written rarely: both backends run the
// same statements ($N placeholders; SQLite reads them as ?N) in their security
// transaction, which bumps the security version, writes the audit record and notifies
// the nodes (so every change to who may log in travels one path).

// ScramDB is what a backend gives the SCRAM methods.
type ScramDB interface {
	Name() string
	// SecurityTx runs fn in a write transaction that bumps the security version and
	// writes the audit record ctx carries first, and notifies the nodes once it
	// commits.
	SecurityTx(ctx context.Context, fn func(q RegistryQuerier) error) error
	Reader() RegistryQuerier
}

// Scram implements catalog.Scram over DB; a backend embeds it.
type Scram struct{ DB ScramDB }

// UpsertScramCredential stores c, replacing the user's credential of its mechanism.
func (s Scram) UpsertScramCredential(ctx context.Context, c catalog.ScramCredential) error {
	if err := catalog.ValidateScram(c); err != nil {
		return fmt.Errorf("%s: store SCRAM credential: %w", s.DB.Name(), err)
	}
	err := s.DB.SecurityTx(ctx, func(q RegistryQuerier) error {
		_, err := q.Exec(ctx, `INSERT INTO scram_credentials (user_name, mechanism, salt, iterations, stored_key, server_key)
			VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT (user_name, mechanism) DO UPDATE SET salt = excluded.salt, iterations = excluded.iterations,
				stored_key = excluded.stored_key, server_key = excluded.server_key`,
			c.User, int(c.Mechanism), c.Salt, int(c.Iterations), c.StoredKey, c.ServerKey)
		return err
	})
	if err != nil {
		return fmt.Errorf("%s: store SCRAM credential %s of %q: %w", s.DB.Name(), c.Mechanism, c.User, err)
	}
	return nil
}

// DeleteScramCredential deletes one credential.
func (s Scram) DeleteScramCredential(ctx context.Context, user string, m catalog.ScramMechanism) error {
	err := s.DB.SecurityTx(ctx, func(q RegistryQuerier) error {
		n, err := q.Exec(ctx, `DELETE FROM scram_credentials WHERE user_name = $1 AND mechanism = $2`, user, int(m))
		if err == nil && n == 0 {
			return catalog.ErrScramNotFound // rolls back: nothing changed, no audit record
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("%s: delete SCRAM credential %s of %q: %w", s.DB.Name(), m, user, err)
	}
	return nil
}

// ScramCredentials lists every credential.
func (s Scram) ScramCredentials(ctx context.Context) ([]catalog.ScramCredential, error) {
	rows, err := s.DB.Reader().Query(ctx, `SELECT user_name, mechanism, salt, iterations, stored_key, server_key
		FROM scram_credentials ORDER BY user_name, mechanism`)
	if err != nil {
		return nil, fmt.Errorf("%s: list SCRAM credentials: %w", s.DB.Name(), err)
	}
	defer rows.Close()
	var out []catalog.ScramCredential
	for rows.Next() {
		var (
			c          catalog.ScramCredential
			mech, iter int64
		)
		if err := rows.Scan(&c.User, &mech, &c.Salt, &iter, &c.StoredKey, &c.ServerKey); err != nil {
			return nil, fmt.Errorf("%s: list SCRAM credentials: %w", s.DB.Name(), err)
		}
		c.Mechanism, c.Iterations = catalog.ScramMechanism(mech), int32(iter)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: list SCRAM credentials: %w", s.DB.Name(), err)
	}
	return out, nil
}
