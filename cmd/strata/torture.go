package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	catopen "github.com/strata-io/strata/catalog/open"
	"github.com/strata-io/strata/cmd/strata/internal/jepsen"
	"github.com/strata-io/strata/internal/redact"
	"github.com/strata-io/strata/internal/testkit/privatepg"
)

func tortureCommand() (*command, func(context.Context, *env, *command, []string) error) {
	c := newCommand("torture", "strata torture [--duration 10m] [--classes kill,pause,...] --postgres DSN --s3-endpoint URL",
		`Runs the reliability harness (package cmd/strata/internal/jepsen): for each fault class, a fresh cluster of
'strata serve' processes (this binary), a fresh catalog and bucket, a workload of producers and
consumers whose every operation is recorded, faults injected in windows for --duration, then
healing, a final read of everything and a check of the history. Prints a table per class: records
ok / failed / unknown, and lost, unseen, inconsistent, duplicate, nonmonotonic, skipping,
refused-but-visible records, group-offset anomalies and (with --kafka) transaction anomalies —
aborted reads, torn transactions, lost committed outputs, duplicate outputs, input offsets
committed without their outputs — which must all be 0.
Needs Postgres (a role that may CREATE DATABASE; the pg-* classes start a private instance with
initdb) and MinIO. Exit code 1 when any class finds an anomaly.`)
	duration := c.fs.Duration("duration", time.Minute, "how long each fault class runs")
	classes := c.fs.String("classes", strings.Join(jepsen.Classes, ","), "comma-separated fault `classes`, each run alone: "+strings.Join(jepsen.Classes, ", ")+"; process faults joined with '+' run together (kill+pg-cut)")
	quiet := c.fs.Duration("quiet", 2*time.Second, "time without faults between fault windows")
	active := c.fs.Duration("active", 4*time.Second, "how long each fault window lasts")
	pg := c.fs.String("postgres", "", "`DSN` of a Postgres server where fresh databases may be created (default $STRATA_TEST_POSTGRES)")
	endpoint := c.fs.String("s3-endpoint", "", "MinIO `URL` (default $STRATA_TEST_S3_ENDPOINT)")
	accessKey := c.fs.String("s3-access-key", "", "MinIO access `key` (default $STRATA_TEST_S3_ACCESS_KEY)")
	secretKey := c.fs.String("s3-secret-key", "", "MinIO secret `key` (default $STRATA_TEST_S3_SECRET_KEY)")
	region := c.fs.String("s3-region", "", "`region` (default $STRATA_TEST_S3_REGION)")
	recheck := c.fs.String("history", "", "check the history.json `file` of an earlier run again and print its anomalies, instead of running")
	dir := c.fs.String("dir", "", "`directory` for process logs and each class's history.json (default: a new temporary directory, kept)")
	kafkaClients := c.fs.Bool("kafka", false, "add the Kafka-client workload: the nodes serve the Kafka protocol, franz-go idempotent producers, group members (a classic and a KIP-848 group) and transactional consume-transform-produce sessions run beside the HTTP clients (process classes only)")
	return c, func(ctx context.Context, e *env, c *command, args []string) error {
		if len(args) > 0 {
			return usagef(c.name, "unexpected argument %q (flags start with --)", args[0])
		}
		if *recheck != "" {
			return recheckHistory(e, *recheck)
		}
		orEnv := func(v *string, name string) {
			if *v == "" {
				*v = e.getenv(name)
			}
		}
		orEnv(pg, "STRATA_TEST_POSTGRES")
		orEnv(endpoint, "STRATA_TEST_S3_ENDPOINT")
		orEnv(accessKey, "STRATA_TEST_S3_ACCESS_KEY")
		orEnv(secretKey, "STRATA_TEST_S3_SECRET_KEY")
		orEnv(region, "STRATA_TEST_S3_REGION")
		var bad []string
		if p := torturePostgresProblem(*pg); p != "" {
			bad = append(bad, p)
		}
		if *endpoint == "" {
			bad = append(bad, "--s3-endpoint is required (or STRATA_TEST_S3_ENDPOINT): e.g. http://127.0.0.1:9100")
		}
		if *duration < time.Second {
			bad = append(bad, fmt.Sprintf("--duration %s: want at least 1s", *duration))
		}
		list, badClasses := tortureClasses(*classes)
		bad = append(bad, badClasses...)
		if len(bad) > 0 {
			return badFlags(c.name, bad)
		}
		bin, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find this binary: %w", err)
		}
		if *dir == "" {
			if *dir, err = os.MkdirTemp("", "strata-torture-"); err != nil {
				return err
			}
		}
		log := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelError}))
		var privates []*jepsen.PrivatePostgres
		defer func() {
			for _, p := range privates {
				_ = p.Stop(context.WithoutCancel(ctx), "fast")
				_ = p.Remove()
			}
		}()
		env := jepsen.Env{
			Binary: bin,
			S3:     jepsen.S3Config{Endpoint: *endpoint, AccessKey: *accessKey, SecretKey: *secretKey, Region: *region},
			Dir:    *dir,
			Log:    log,
			NewDatabase: func(ctx context.Context) (string, error) {
				return jepsen.CreateDatabase(ctx, *pg)
			},
			NewPrivatePostgres: func(ctx context.Context) (*jepsen.PrivatePostgres, error) {
				p, err := privatepg.Start(ctx, *dir)
				if p != nil {
					privates = append(privates, p)
				}
				return p, err
			},
		}
		fmt.Fprintf(e.stderr, "strata torture: %s per class, classes %s; logs and histories in %s\n", *duration, strings.Join(list, ","), *dir)
		return runClasses(ctx, e, env, list, jepsen.RunConfig{Duration: *duration, Quiet: *quiet, Active: *active, Kafka: *kafkaClients}, *dir)
	}
}

// tortureClasses reads --classes: the classes to run, in order, and what is wrong with
// them.
func tortureClasses(classes string) (list, bad []string) {
	for _, cl := range strings.Split(classes, ",") {
		cl = strings.TrimSpace(cl)
		for _, part := range strings.Split(cl, "+") {
			if !slices.Contains(jepsen.Classes, part) || (part == jepsen.ClassAll || part == jepsen.ClassStore) && part != cl {
				bad = append(bad, fmt.Sprintf("--classes: unknown class %q: use %s, or process faults joined with '+' (kill+pg-cut)", cl, strings.Join(jepsen.Classes, ", ")))
				break
			}
		}
		list = append(list, cl)
	}
	return list, bad
}

// runClasses runs each class in turn, printing and saving each one's table as it ends,
// and prints the whole table last.
func runClasses(ctx context.Context, e *env, env jepsen.Env, list []string, rc jepsen.RunConfig, dir string) error {
	var results []*jepsen.Result
	failed := 0
	for _, cl := range list {
		if ctx.Err() != nil {
			break
		}
		fmt.Fprintf(e.stderr, "strata torture: %s ...\n", cl)
		r := jepsen.Run(ctx, env, cl, rc)
		results = append(results, r)
		if !r.OK() {
			failed++
		}
		for _, n := range r.Notes {
			fmt.Fprintf(e.stderr, "  %s\n", n)
		}
		// Each class's figures are printed and saved as it ends: a long run that
		// is interrupted keeps what it measured.
		jepsen.WriteTable(e.stderr, []*jepsen.Result{r})
		if err := writeSummary(filepath.Join(dir, "summary.txt"), results); err != nil {
			fmt.Fprintf(e.stderr, "strata torture: %v\n", err)
		}
	}
	jepsen.WriteTable(e.stdout, results)
	if failed > 0 {
		return fmt.Errorf("%d of %d fault classes found anomalies or could not run", failed, len(results))
	}
	return nil
}

// writeSummary writes the table of the classes run so far to path.
func writeSummary(path string, results []*jepsen.Result) error {
	var b bytes.Buffer
	jepsen.WriteTable(&b, results)
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write the summary: %w", err)
	}
	return nil
}

// recheckHistory checks a saved history again.
func recheckHistory(e *env, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	h, err := jepsen.ReadHistory(f)
	if err != nil {
		return err
	}
	r := jepsen.Check(h)
	r.WriteText(e.stdout)
	if !r.Valid() {
		return fmt.Errorf("the history of %s has anomalies", path)
	}
	return nil
}

// torturePostgresProblem says what is wrong with a --postgres value, or "": the fresh
// databases are named in a URL's path, so the catalog rule's keyword form will not do.
func torturePostgresProblem(pg string) string {
	if pg == "" {
		return "--postgres is required (or STRATA_TEST_POSTGRES): e.g. postgres://strata:strata@127.0.0.1:5432/strata_test?sslmode=disable"
	}
	if t, err := catopen.Parse(pg, catopen.Options{}); err == nil && t.Kind() == catopen.Postgres && strings.Contains(pg, "://") {
		return ""
	}
	return fmt.Sprintf("--postgres %q: want a Postgres URL, postgres://USER:PASSWORD@HOST:5432/DB (fresh databases are created beside DB)", redact.String(pg))
}
