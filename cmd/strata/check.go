package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/strata-io/strata/catalog"
	catopen "github.com/strata-io/strata/catalog/open"
	"github.com/strata-io/strata/check"
	"github.com/strata-io/strata/objstore/open"
)

func checkCommand() (*command, func(context.Context, *env, *command, []string) error) {
	c := newCommand("check", "strata check --catalog postgres://... --bucket s3://bucket/prefix [--verify]",
		`Compares the catalog with the bucket and reports every difference: a live segment whose
object is missing, has another size, or whose footer disagrees with its chunk rows; chunk rows
that overlap; objects without a catalog row older than --sweep-age. It only reads (opening the
catalog applies its migrations, as a node would). Exit code 1 when anything differs.`)
	cat := c.fs.String("catalog", "", "catalog `DSN`, as for serve: postgres://..., a libpq \"host=... dbname=...\" string, or an existing SQLite file (check never creates one)")
	bucket := c.fs.String("bucket", "", "object store `URL`, as for serve: s3://bucket/prefix?endpoint=... or file:///dir")
	sweepAge := c.fs.Duration("sweep-age", 2*30*time.Second, "objects without a row younger than this may be uploads still committing and are not reported: twice the nodes' --commit-timeout")
	verify := c.fs.Bool("verify", false, "decode every batch of every live object, not only its footer (reads every byte)")
	c.shareEnv("catalog", "bucket") // the nodes' own: strata check beside a node reads its environment
	format := &oneOfFlag{"text", []string{"text", "json"}}
	c.fs.Var(format, "format", "output `format`: text or json")
	return c, func(ctx context.Context, e *env, c *command, args []string) error {
		if len(args) > 0 {
			return usagef(c.name, "unexpected argument %q (flags start with --)", args[0])
		}
		var bad []string
		// Never Create: a mistyped path must not become an empty catalog whose every
		// object is reported stray.
		target, err := catalogFlag(*cat, catopen.Options{}, nil)
		if err != nil {
			bad = append(bad, err.Error())
		}
		if *bucket == "" {
			bad = append(bad, "--bucket is required: the bucket the nodes use, e.g. --bucket s3://my-bucket/strata")
		}
		if *sweepAge <= 0 {
			bad = append(bad, fmt.Sprintf("--sweep-age %s: want a positive duration, twice the nodes' --commit-timeout", *sweepAge))
		}
		if len(bad) > 0 {
			return badFlags(c.name, bad)
		}
		log := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		store, err := open.Open(ctx, *bucket, log)
		if err != nil {
			return fmt.Errorf("%w (check --bucket)", err)
		}
		cc, err := target.Open(ctx, catalog.Options{Logger: log})
		if err != nil {
			return fmt.Errorf("open catalog %s: %w", target, err)
		}
		defer cc.Close()
		r, err := check.Run(ctx, cc, store, check.Options{SweepAge: *sweepAge, Verify: *verify, Log: log})
		if err != nil {
			return err
		}
		if format.val == "json" {
			enc := json.NewEncoder(e.stdout)
			enc.SetIndent("", "  ")
			if err := enc.Encode(r); err != nil {
				return err
			}
		} else {
			r.WriteText(e.stdout)
		}
		if !r.OK() {
			return fmt.Errorf("%d differences between the catalog and the bucket", len(r.Problems))
		}
		return nil
	}
}
