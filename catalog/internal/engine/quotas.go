package engine

import (
	"context"
	"fmt"
	"sort"

	"github.com/strata-io/strata/catalog"
)

// Quotas (catalog.Quotas) and the caps per principal: a few rows written rarely, so
// both backends run the same statements ($N placeholders; SQLite reads them as ?N).
// A change is a security change: it runs in the backend's security transaction, which
// bumps the version the nodes poll and notifies them.

// QuotaBackend is what a backend gives the quota scripts.
type QuotaBackend interface {
	// SecurityTx runs fn in a write transaction that first bumps the security version
	// and writes the audit record ctx carries, and wakes the nodes' security watchers
	// once it commits.
	SecurityTx(ctx context.Context, fn func(q RegistryQuerier) error) error
}

// AlterQuotas implements catalog.Quotas (AlterQuotas).
func (m Methods) AlterQuotas(ctx context.Context, alts []catalog.QuotaAlteration) error {
	for _, a := range alts {
		if err := catalog.ValidateQuotaAlteration(a); err != nil {
			return err
		}
	}
	err := m.DB.SecurityTx(ctx, func(q RegistryQuerier) error {
		for _, a := range alts {
			for _, k := range a.Remove {
				if _, err := q.Exec(ctx, `DELETE FROM quotas WHERE user_name = $1 AND client_id = $2 AND quota_key = $3`,
					a.Entity.User, a.Entity.ClientID, k); err != nil {
					return err
				}
			}
			keys := make([]string, 0, len(a.Set))
			for k := range a.Set {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				if _, err := q.Exec(ctx, `INSERT INTO quotas (user_name, client_id, quota_key, value) VALUES ($1, $2, $3, $4)
					ON CONFLICT (user_name, client_id, quota_key) DO UPDATE SET value = excluded.value`,
					a.Entity.User, a.Entity.ClientID, k, a.Set[k]); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s: alter quotas: %w", m.DB.Name(), err)
	}
	return nil
}

// QuotaEntries implements catalog.Quotas (QuotaEntries).
func (m Methods) QuotaEntries(ctx context.Context) ([]catalog.QuotaEntry, error) {
	rows, err := m.DB.Reader().Query(ctx, `SELECT user_name, client_id, quota_key, value FROM quotas ORDER BY user_name, client_id, quota_key`)
	if err != nil {
		return nil, fmt.Errorf("%s: list quotas: %w", m.DB.Name(), err)
	}
	defer rows.Close()
	var out []catalog.QuotaEntry
	for rows.Next() {
		var (
			e catalog.QuotaEntity
			k string
			v float64
		)
		if err := rows.Scan(&e.User, &e.ClientID, &k, &v); err != nil {
			return nil, fmt.Errorf("%s: list quotas: %w", m.DB.Name(), err)
		}
		if n := len(out); n == 0 || out[n-1].Entity != e {
			out = append(out, catalog.QuotaEntry{Entity: e, Values: map[string]float64{}})
		}
		out[len(out)-1].Values[k] = v
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: list quotas: %w", m.DB.Name(), err)
	}
	return out, nil
}

// The kinds of creation a principal's caps count.
const (
	OwnedTopic     = "topic"
	OwnedConnector = "connector"
)

// CheckOwnerCap is the first step of a creation transaction of the given kind whose
// context carries an owner (catalog.WithOwner): it takes the owner's row lock — the
// first lock such a transaction takes (docs/design.md's lock order), so that two
// creations by one principal on any nodes serialise here — and refuses, wrapping
// catalog.ErrCapReached, when the principal already owns its cap. name is the
// connector being stored (an update of one the principal has does not count twice).
// Without an owner it does nothing.
func CheckOwnerCap(ctx context.Context, q RegistryQuerier, kind, name string) error {
	o, ok := catalog.OwnerOf(ctx)
	if !ok {
		return nil
	}
	if _, err := q.Exec(ctx, `INSERT INTO quota_principals (principal, creations) VALUES ($1, 1)
		ON CONFLICT (principal) DO UPDATE SET creations = quota_principals.creations + 1`, o.Principal); err != nil {
		return fmt.Errorf("lock principal %s: %w", o.Principal, err)
	}
	limit, count := o.TopicCap, `SELECT count(*) FROM topic_owners o JOIN topics t ON t.id = o.topic_id
		WHERE o.principal = $1 AND t.deleted_at IS NULL`
	key, args := catalog.QuotaTopicCount, []any{o.Principal}
	if kind == OwnedConnector {
		limit, key = o.ConnectCap, catalog.QuotaConnectorCount
		count, args = `SELECT count(*) FROM connectors WHERE principal = $1 AND name <> $2`, []any{o.Principal, name}
	}
	if limit < 0 {
		return nil
	}
	rows, err := q.Query(ctx, count, args...)
	if err != nil {
		return fmt.Errorf("count %ss of %s: %w", kind, o.Principal, err)
	}
	defer rows.Close()
	var n int64
	for rows.Next() {
		if err := rows.Scan(&n); err != nil {
			return fmt.Errorf("count %ss of %s: %w", kind, o.Principal, err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("count %ss of %s: %w", kind, o.Principal, err)
	}
	if n >= limit {
		return fmt.Errorf("%w: %s has %d %ss and its %s is %d", catalog.ErrCapReached, o.Principal, n, kind, key, limit)
	}
	return nil
}

// CreateOwnedTopic is a topic creation's script inside its transaction: the owner's
// cap (CheckOwnerCap, under its row lock), then insert — the backend's statements,
// answering the new topic's id — then the record that the owner ctx carries owns it
// (its topic_count counts it while it lives).
func CreateOwnedTopic(ctx context.Context, q RegistryQuerier, name string, insert func() (int64, error)) error {
	if err := CheckOwnerCap(ctx, q, OwnedTopic, name); err != nil {
		return err
	}
	id, err := insert()
	if err != nil {
		return err
	}
	o, ok := catalog.OwnerOf(ctx)
	if !ok {
		return nil
	}
	if _, err := q.Exec(ctx, `INSERT INTO topic_owners (topic_id, principal) VALUES ($1, $2)`, id, o.Principal); err != nil {
		return fmt.Errorf("record the owner of topic %d: %w", id, err)
	}
	return nil
}
