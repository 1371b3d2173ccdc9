package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/strata-io/strata/catalog"
)

// Push subscriptions (catalog.PushSubscriptions) are one row per share group, written
// when an operator changes one and when the push role takes or extends its lease, so,
// as the table topics' state, both backends run the same statements through TablesDB;
// the rules are here, once.

// Every change moves updated_ms forward, by one when the clock has not (two changes in
// one millisecond), so a reader's Updated names the version it read (PausePush).

// Push implements catalog.PushSubscriptions over DB; a backend embeds it.
type Push struct{ DB TablesDB }

var _ catalog.PushSubscriptions = Push{}

func (p Push) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %s: %w", p.DB.Name(), op, err)
}

func (p Push) now(ctx context.Context, q RegistryQuerier) (int64, error) {
	return Tables(p).now(ctx, q)
}

const pushColumns = `group_id, settings, paused, last_error, secret, created_ms, updated_ms`

func scanPush(rows RegistryRows) (catalog.PushSubscription, error) {
	var (
		s                catalog.PushSubscription
		settings         string
		paused           int64
		created, updated int64
	)
	if err := rows.Scan(&s.Group, &settings, &paused, &s.LastError, &s.Secret, &created, &updated); err != nil {
		return s, err
	}
	group, lastErr, secret := s.Group, s.LastError, s.Secret
	if err := json.Unmarshal([]byte(settings), &s); err != nil {
		return s, fmt.Errorf("read the settings of %q: %w", group, err)
	}
	s.Group, s.LastError, s.Secret, s.Paused = group, lastErr, secret, paused != 0
	s.Created, s.Updated = time.UnixMilli(created), time.UnixMilli(updated)
	return s, nil
}

func pushRows(ctx context.Context, q RegistryQuerier, where string, args ...any) ([]catalog.PushSubscription, error) {
	rows, err := q.Query(ctx, `SELECT `+pushColumns+` FROM push_subscriptions `+where, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []catalog.PushSubscription
	for rows.Next() {
		s, err := scanPush(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// PutPushSubscription implements catalog.PushSubscriptions.
func (p Push) PutPushSubscription(ctx context.Context, s catalog.PushSubscription) (catalog.PushSubscription, bool, error) {
	s = s.WithDefaults()
	if err := s.Check(); err != nil {
		return s, false, p.wrap("put push subscription", err)
	}
	settings, err := json.Marshal(s)
	if err != nil {
		return s, false, p.wrap("put push subscription", err)
	}
	created := false
	var out catalog.PushSubscription
	err = p.DB.WriteTx(ctx, func(q RegistryQuerier) error {
		now, err := p.now(ctx, q)
		if err != nil {
			return err
		}
		n, err := q.Exec(ctx, `UPDATE push_subscriptions SET settings = $2, updated_ms = CASE WHEN $3 > updated_ms THEN $3 ELSE updated_ms + 1 END WHERE group_id = $1`, s.Group, string(settings), now)
		if err != nil {
			return fmt.Errorf("update the subscription: %w", err)
		}
		if n == 0 {
			if s.Secret == "" {
				return fmt.Errorf("%w: a new subscription needs a signing secret", catalog.ErrInvalidPushSubscription)
			}
			if _, err := q.Exec(ctx, `INSERT INTO push_subscriptions (group_id, settings, secret, created_ms, updated_ms) VALUES ($1, $2, $3, $4, $4)`,
				s.Group, string(settings), s.Secret, now); err != nil {
				return fmt.Errorf("insert the subscription: %w", err)
			}
			created = true
		}
		got, err := pushRows(ctx, q, `WHERE group_id = $1`, s.Group)
		if err != nil || len(got) != 1 {
			return fmt.Errorf("read the subscription back: %d rows, %w", len(got), err)
		}
		out = got[0]
		return nil
	})
	return out, created, p.wrap(fmt.Sprintf("put push subscription of group %q", s.Group), err)
}

// PushSubscription implements catalog.PushSubscriptions.
func (p Push) PushSubscription(ctx context.Context, group string) (catalog.PushSubscription, error) {
	got, err := pushRows(ctx, p.DB.Reader(), `WHERE group_id = $1`, group)
	if err == nil && len(got) == 0 {
		err = catalog.ErrPushNotFound
	}
	if err != nil {
		return catalog.PushSubscription{}, p.wrap(fmt.Sprintf("read push subscription of group %q", group), err)
	}
	return got[0], nil
}

// PushSubscriptionList implements catalog.PushSubscriptions.
func (p Push) PushSubscriptionList(ctx context.Context) ([]catalog.PushSubscription, error) {
	got, err := pushRows(ctx, p.DB.Reader(), `ORDER BY group_id`)
	return got, p.wrap("list push subscriptions", err)
}

// update runs one statement on group's row, ErrPushNotFound when there is none.
func (p Push) update(ctx context.Context, op, group, stmt string, args ...any) error {
	err := p.DB.WriteTx(ctx, func(q RegistryQuerier) error {
		now, err := p.now(ctx, q)
		if err != nil {
			return err
		}
		n, err := q.Exec(ctx, stmt, append([]any{group, now}, args...)...)
		if err != nil {
			return err
		}
		if n == 0 {
			return catalog.ErrPushNotFound
		}
		return nil
	})
	return p.wrap(fmt.Sprintf("%s of group %q", op, group), err)
}

// DeletePushSubscription implements catalog.PushSubscriptions.
func (p Push) DeletePushSubscription(ctx context.Context, group string) error {
	err := p.DB.WriteTx(ctx, func(q RegistryQuerier) error {
		n, err := q.Exec(ctx, `DELETE FROM push_subscriptions WHERE group_id = $1`, group)
		if err == nil && n == 0 {
			err = catalog.ErrPushNotFound
		}
		return err
	})
	return p.wrap(fmt.Sprintf("delete push subscription of group %q", group), err)
}

// SetPushState implements catalog.PushSubscriptions.
func (p Push) SetPushState(ctx context.Context, group string, paused bool, lastError string) error {
	v := 0
	if paused {
		v = 1
	}
	if len(lastError) > 2000 {
		lastError = lastError[:2000]
	}
	return p.update(ctx, "set push state", group, `UPDATE push_subscriptions SET paused = $3, last_error = $4, updated_ms = CASE WHEN $2 > updated_ms THEN $2 ELSE updated_ms + 1 END WHERE group_id = $1`, v, lastError)
}

// PausePush implements catalog.PushSubscriptions.
func (p Push) PausePush(ctx context.Context, group string, seen time.Time, lastError string) (bool, error) {
	if len(lastError) > 2000 {
		lastError = lastError[:2000]
	}
	n := int64(0)
	err := p.DB.WriteTx(ctx, func(q RegistryQuerier) error {
		now, err := p.now(ctx, q)
		if err != nil {
			return err
		}
		n, err = q.Exec(ctx, `UPDATE push_subscriptions SET paused = 1, last_error = $3, updated_ms = CASE WHEN $4 > updated_ms THEN $4 ELSE updated_ms + 1 END WHERE group_id = $1 AND updated_ms = $2`,
			group, seen.UnixMilli(), lastError, now)
		return err
	})
	return n == 1, p.wrap(fmt.Sprintf("pause push subscription of group %q", group), err)
}

// RotatePushSecret implements catalog.PushSubscriptions.
func (p Push) RotatePushSecret(ctx context.Context, group, secret string) error {
	if secret == "" {
		return p.wrap("rotate push secret", fmt.Errorf("%w: an empty secret", catalog.ErrInvalidPushSubscription))
	}
	return p.update(ctx, "rotate push secret", group, `UPDATE push_subscriptions SET secret = $3, updated_ms = CASE WHEN $2 > updated_ms THEN $2 ELSE updated_ms + 1 END WHERE group_id = $1`, secret)
}

// AcquirePushLease implements catalog.PushSubscriptions.
func (p Push) AcquirePushLease(ctx context.Context, group, holder string, ttl time.Duration) (catalog.PushLease, bool, error) {
	if holder == "" || ttl <= 0 {
		return catalog.PushLease{}, false, p.wrap("acquire push lease", fmt.Errorf("%w: a lease needs a holder and a positive ttl", catalog.ErrInvalidPushSubscription))
	}
	l := catalog.PushLease{Group: group, Holder: holder}
	ok := false
	err := p.DB.WriteTx(ctx, func(q RegistryQuerier) error {
		now, err := p.now(ctx, q)
		if err != nil {
			return err
		}
		rows, err := q.Query(ctx, `SELECT holder, token, expires_ms FROM push_subscriptions WHERE group_id = $1 FOR UPDATE`, group)
		if err != nil {
			return err
		}
		var got []leaseRow
		for rows.Next() {
			var r leaseRow
			if err := rows.Scan(&r.holder, &r.token, &r.expires); err != nil {
				rows.Close()
				return err
			}
			got = append(got, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		expires := now + ttl.Milliseconds()
		switch {
		case len(got) == 0:
			return errDone // no subscription
		case got[0].holder == holder && got[0].expires > now:
			l.Token = got[0].token
		case got[0].holder == "" || got[0].expires <= now:
			l.Token = got[0].token + 1
		default:
			return errDone // held by another
		}
		if _, err := q.Exec(ctx, `UPDATE push_subscriptions SET holder = $2, token = $3, expires_ms = $4 WHERE group_id = $1`,
			group, holder, l.Token, expires); err != nil {
			return fmt.Errorf("write the lease: %w", err)
		}
		ok = true
		return nil
	})
	if errors.Is(err, errDone) {
		err = nil
	}
	return l, ok, p.wrap(fmt.Sprintf("acquire push lease of group %q", group), err)
}

// ReleasePushLease implements catalog.PushSubscriptions.
func (p Push) ReleasePushLease(ctx context.Context, l catalog.PushLease) error {
	err := p.DB.WriteTx(ctx, func(q RegistryQuerier) error {
		_, err := q.Exec(ctx, `UPDATE push_subscriptions SET holder = '', expires_ms = 0 WHERE group_id = $1 AND holder = $2 AND token = $3`,
			l.Group, l.Holder, l.Token)
		return err
	})
	return p.wrap(fmt.Sprintf("release push lease of group %q", l.Group), err)
}
